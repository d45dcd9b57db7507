"""One version number: ``afd-e2e --version``, the package metadata, the README's plugin references, the generator's
default ``--plugin`` reference and the CHANGELOG's newest entry all name ``afd_e2e.__version__``."""

from __future__ import annotations

import importlib.metadata
import re

import pytest
import tomllib

from afd_e2e import __version__
from afd_e2e.cli import main
from afd_e2e.pipeline.generate import DEFAULT_PLUGIN
from repo_paths import REPO

PLUGIN_REFERENCE = re.compile(r"vllm-project/afd-e2e(?:-buildkite-plugin)?[#@]v([0-9][^\s\"':]*)")


def test_version_is_a_release_number():
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__), __version__


def test_cli_version_is_the_package_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"afd-e2e {__version__}"


def test_package_metadata_reads_the_version_from_the_package():
    """pyproject.toml states no version of its own: the installed distribution's metadata, which a build (pip install
    -e) made from pyproject.toml, carries __version__."""
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "version" not in pyproject["project"]
    assert pyproject["project"]["dynamic"] == ["version"]
    assert importlib.metadata.version("afd-e2e") == __version__


def test_generator_default_plugin_is_this_release():
    assert f"vllm-project/afd-e2e#v{__version__}" == DEFAULT_PLUGIN


def test_every_readme_plugin_reference_is_this_release():
    references = PLUGIN_REFERENCE.findall((REPO / "README.md").read_text())
    assert len(references) >= 2, "README.md shows the bootstrap install and a plugin step"
    assert set(references) == {__version__}


def test_changelog_newest_entry_is_this_release():
    headings = re.findall(r"^## (\S+)", (REPO / "CHANGELOG.md").read_text(), re.MULTILINE)
    assert headings, "CHANGELOG.md has no release entry"
    assert headings[0] == __version__
    assert len(headings) == len(set(headings)), "a version is named by two entries"
