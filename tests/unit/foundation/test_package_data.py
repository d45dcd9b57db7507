"""Unit tier: what the wheel ships beside the code. A file the package reads at run time or calls shipped (the
profiles, results.json's and bisect.json's schemas) must match ``pyproject.toml``'s package data, or an installed
afd-e2e lacks it while a checkout (where every file is there) never notices."""

from __future__ import annotations

import tomllib

from afd_e2e.results import bisect_records, schema
from repo_paths import REPO

PACKAGE = REPO / "python" / "afd_e2e"


def shipped() -> set[str]:
    """The package's files that ``[tool.setuptools.package-data]`` puts in the wheel, relative to the package."""
    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["afd_e2e"]
    return {path.relative_to(PACKAGE).as_posix() for pattern in patterns for path in PACKAGE.glob(pattern)}


def test_every_data_file_of_the_package_ships_in_the_wheel():
    data = {
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts
    }
    assert data - shipped() == set()


def test_both_schemas_ship():
    """The files ``afd-e2e schema`` regenerates (CONTRIBUTING's table) under the names the code reads them by."""
    assert {f"results/{schema.SCHEMA_FILE.name}", f"results/{bisect_records.SCHEMA_FILE.name}"} <= shipped()
