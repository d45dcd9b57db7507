"""Unit tier: names that say their room. No two modules or packages of the product share a file name, and no two
public top-level functions share a name, unless the allow-lists below say why they are the same kind of thing.

A reader finds a module by its folder and file name alone ("where is the capacity plot drawn":
``report/capacity_report.py``) and a function by its name alone; where four packages each had a ``capacity.py``,
the name said nothing, grep answered four times and imports took aliases to tell them apart. A package's name
counts as a module's (``workloads/capacity/`` clashed with ``capacity.py``); a folder without Python (``profiles/``,
package data) is no module.
"""

from __future__ import annotations

import ast
import fnmatch
from collections import defaultdict
from pathlib import Path

from repo_paths import REPO

PACKAGE = REPO / "python" / "afd_e2e"

# Module names (fnmatch patterns) several packages may each hold, with the paths (a glob) that may hold them: the
# same kind of thing in each.
SHARED_MODULES = {
    "__init__": "*",  # a package's own body, Python's name for it
    "model": "*/model.py",  # a layer's typed records (profile's, plan's, results'), each read as ``<layer>.model``
    # A ``commands/`` module is the subcommand ``afd-e2e <name>`` (cli.py adds one per module): named by what the
    # user types, it shares the name of the library it fronts (``commands/bisect.py`` over ``bisect/``).
    "*": "commands/*.py",
}
# Public function names several modules may each define, with the paths that may define them.
SHARED_FUNCTIONS = {
    "main": "*",  # the entry point of a module run as a script (by path, ``python -m`` or scripts/)
    "register": "commands/*.py",  # cli.py's protocol: each subcommand module adds its parser ...
    "run": "commands/*.py",  # ... and runs its parsed arguments
}


def modules(root: Path) -> list[tuple[str, str]]:
    """(name, path relative to ``root``) for every module and package under ``root``; a package's path ends in
    ``/``."""
    found = []
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        found.append((path.stem, relative))
    for folder in sorted(p for p in root.rglob("*") if p.is_dir() and (p / "__init__.py").exists() and p != root):
        found.append((folder.name, folder.relative_to(root).as_posix() + "/"))
    return found


def public_functions(root: Path) -> list[tuple[str, str]]:
    """(name, path relative to ``root``) for every top-level ``def`` without a leading underscore."""
    found = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        relative = path.relative_to(root).as_posix()
        found += [
            (node.name, relative)
            for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith("_")
        ]
    return found


def shared(holders: list[tuple[str, str]], allowed: dict[str, str]) -> dict[str, list[str]]:
    """Each name held more than once by paths the allow-list does not cover for it."""
    by_name: dict[str, list[str]] = defaultdict(list)
    for name, path in holders:
        if not any(fnmatch.fnmatch(name, key) and fnmatch.fnmatch(path, glob) for key, glob in allowed.items()):
            by_name[name].append(path)
    return {name: paths for name, paths in sorted(by_name.items()) if len(paths) > 1}


def test_no_two_modules_share_a_name():
    clashes = shared(modules(PACKAGE), SHARED_MODULES)
    assert not clashes, "modules or packages sharing a name (rename them to say their room): " + "; ".join(
        f"{name}: {', '.join(paths)}" for name, paths in clashes.items()
    )


def test_no_two_public_functions_share_a_name():
    clashes = shared(public_functions(PACKAGE), SHARED_FUNCTIONS)
    assert not clashes, "public functions sharing a name (rename them to say what they do): " + "; ".join(
        f"{name}: {', '.join(paths)}" for name, paths in clashes.items()
    )


def test_each_allow_list_entry_is_needed():
    """An entry nothing needs any more is a door left open: without it, some name would clash."""
    for allowed, holders in ((SHARED_MODULES, modules(PACKAGE)), (SHARED_FUNCTIONS, public_functions(PACKAGE))):
        for key in allowed:
            rest = {k: glob for k, glob in allowed.items() if k != key}
            assert shared(holders, rest), f"allow-list entry {key!r}: {allowed[key]} covers no clash; remove it"
