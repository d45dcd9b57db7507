"""Unit tier: the repository carries the licence its metadata names (pyproject.toml's `license = "Apache-2.0"`):
the full Apache License 2.0 text in LICENSE, which the wheel ships and a plugin user finds at the root."""

from __future__ import annotations

import hashlib

import tomllib

from repo_paths import REPO

# The MD5 of the Apache Software Foundation's LICENSE-2.0.txt (as Debian ships it in /usr/share/common-licenses).
APACHE_2_0_MD5 = "3b83ef96387f14655fc854ddc3c6bd57"


def test_license_is_the_unchanged_apache_2_0_text_the_metadata_names():
    text = (REPO / "LICENSE").read_bytes()
    assert hashlib.md5(text).hexdigest() == APACHE_2_0_MD5
    assert b"Apache License\n                           Version 2.0, January 2004" in text
    assert tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["license"] == "Apache-2.0"
