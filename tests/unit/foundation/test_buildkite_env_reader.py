"""Unit tier: ``buildkite/env.py`` is the one reader of ``BUILDKITE_*``. Every other module of the product asks it
(its accessors, or its constants for a name an error or a help text states), so what Buildkite's variables mean is
written once.

The rule is on code only: a string in a module's code (not its docstrings, whose prose may name the variables it is
about, and not comments, which the parser drops) that names a ``BUILDKITE`` variable is a second reader. A name the
user picks itself (a token's variable) is no read of Buildkite's: ALLOWED lists those, each with why.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from repo_paths import REPO

PACKAGE = REPO / "python" / "afd_e2e"
READER = PACKAGE / "buildkite" / "env.py"
VARIABLE = re.compile(r"\bBUILDKITE(?:_[A-Z0-9_]+)?\b")  # BUILDKITE, BUILDKITE_JOB_ID, ...; not BUILDKITE_*
ALLOWED = {
    # An example in an error's fix of a name the user may give the Test Engine suite token: read by the name the
    # user passes (--test-engine-token-env), never by this one.
    ("commands/report.py", "BUILDKITE_ANALYTICS_TOKEN"),
}


def docstrings(tree: ast.Module) -> set[int]:
    """The ids of the string nodes that are docstrings (a module's, class's or function's first statement)."""
    owners = [
        tree,
        *(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)),
    ]
    return {
        id(owner.body[0].value)
        for owner in owners
        if owner.body and isinstance(owner.body[0], ast.Expr) and isinstance(owner.body[0].value, ast.Constant)
    }


def named_in_code(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = docstrings(tree)
    return {
        name
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped
        for name in VARIABLE.findall(node.value)
    }


def test_only_the_env_module_names_buildkite_variables_in_code():
    found = {
        (path.relative_to(PACKAGE).as_posix(), name)
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != READER
        for name in named_in_code(path)
    }
    assert found - ALLOWED == set(), "read them through afd_e2e.buildkite.env (an accessor or its name constant)"
    assert found >= ALLOWED, "an entry of ALLOWED that no longer occurs: remove it"


def test_the_rule_sees_a_read_and_spares_docstrings_and_comments(tmp_path):
    module = tmp_path / "reader.py"
    module.write_text(
        '"""Reads ``BUILDKITE_JOB_ID``."""\n'
        "import os\n"
        "# BUILDKITE_BRANCH too\n"
        "def job():\n"
        '    """The job (``BUILDKITE_JOB_ID``)."""\n'
        '    return os.environ.get("BUILDKITE_JOB_ID"), f"{os.environ} BUILDKITE=true", "BUILDKITE_* variables"\n'
    )
    assert named_in_code(module) == {"BUILDKITE_JOB_ID", "BUILDKITE"}
    assert "BUILDKITE_JOB_ID" in named_in_code(READER)
