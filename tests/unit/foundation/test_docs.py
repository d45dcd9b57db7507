"""Unit tier: the README, CONTRIBUTING.md and docs/ say only what is true of this checkout. Every ``afd-e2e`` command
they show names a real subcommand and only flags its ``--help`` lists; every ``scripts/...`` exists and can run;
every repository path resolves; every link between the pages reaches a file and a heading; docs/reference.md is what
``scripts/refresh-reference`` makes from the code now; the layers on the design page are the import contract's; the
README stays short."""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import io
import os
import re
from functools import cache
from pathlib import Path

import pytest
import tomllib

from afd_e2e.cli import COMMANDS, main
from repo_paths import REPO

PAGES = [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]
PACKAGE = REPO / "python" / "afd_e2e"
ROOTS = {p.name for p in REPO.iterdir()} | {"../shared"}
SUBPACKAGES = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
PLACEHOLDER = re.compile(r"[<>*{}$~]|\.\.\.|^[A-Z]+/")  # <case>, *.xml, ${VAR}, ~/.cache, DIR/...


def code_of(text: str) -> list[str]:
    """The page's code: fenced blocks, indented blocks and inline code spans."""
    fenced = re.findall(r"^```[a-z]*\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    prose = re.sub(r"^```[a-z]*\n.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    indented = [line for line in prose.splitlines() if line.startswith("    ") and not line.lstrip().startswith("-")]
    return fenced + indented + re.findall(r"`([^`\n]+)`", prose)


def page_ids(page: Path) -> str:
    return str(page.relative_to(REPO))


def path_tokens(text: str) -> set[str]:
    """Repository paths in the page's code: a token under a top-level folder of the repository, or a module or
    folder of the package named from it (``runner/case.py``, ``phases/``)."""
    found = set()
    for code in code_of(text):
        for token in re.split(r"[\s,()\[\]=\"'|]+", code):
            token = token.rstrip(".:;")
            if "/" not in token or PLACEHOLDER.search(token) or token.startswith(("/", "http", "git+")):
                continue
            first = "../shared" if token.startswith("../shared/") else token.split("/", 1)[0]
            under_package = first in SUBPACKAGES and token.endswith((".py", "/"))
            if (first in ROOTS and first != "afd-e2e-out") or under_package:
                found.add(token)
    return found


def resolves(token: str) -> bool:
    """A path exists; ``path.py::test_name`` also names a test that the file defines."""
    path, _, test = token.partition("::")
    files = [base / path for base in (REPO, PACKAGE) if (base / path).exists()]
    return bool(files) and (not test or any(f"def {test}(" in f.read_text(encoding="utf-8") for f in files))


@pytest.mark.parametrize("page", PAGES, ids=page_ids)
def test_every_repository_path_resolves(page):
    missing = sorted(t for t in path_tokens(page.read_text(encoding="utf-8")) if not resolves(t))
    assert missing == [], f"{page_ids(page)} names paths that do not exist: {missing}"


def commands_in(text: str) -> list[list[str]]:
    """Each ``afd-e2e SUBCOMMAND ...`` the page shows as a command (not as output quoting the name), as words up to
    a pipe, ``&&`` or the end of the line."""
    found = []
    for code in code_of(text):
        for line in code.splitlines():
            # where a command starts: the line's start (a prompt, a YAML list item), after a pipe, && or ;, or $(
            for match in re.finditer(r"(?:^\s*(?:\$\s+|-\s+)?|[|;&]\s*|\$\(\s*)afd-e2e\s+([^|&;#\n]*)", line):
                words = match.group(1).split()
                if words and re.fullmatch(r"[a-z][a-z-]*", words[0]):  # not a label, a placeholder or a flag
                    found.append(words)
    return found


@cache
def help_of(command: str) -> str:
    """``afd-e2e COMMAND --help``, run."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0
    return out.getvalue()


@pytest.mark.parametrize("page", PAGES, ids=page_ids)
def test_every_afd_e2e_command_is_real_and_uses_only_flags_it_has(page):
    problems = []
    for words in commands_in(page.read_text(encoding="utf-8")):
        command = words[0]
        if command not in COMMANDS:
            problems.append(f"afd-e2e {command}: no such command")
            continue
        flags = {w.split("=", 1)[0] for w in words[1:] if w.startswith("--")}
        problems += [f"afd-e2e {command} {flag}" for flag in sorted(flags) if flag not in help_of(command)]
    assert problems == [], f"{page_ids(page)}: {problems}"


@pytest.mark.parametrize("page", PAGES, ids=page_ids)
def test_every_script_it_names_exists_and_can_run(page):
    scripts = {m for code in code_of(page.read_text(encoding="utf-8")) for m in re.findall(r"scripts/[\w-]+", code)}
    broken = sorted(s for s in scripts if not os.access(REPO / s, os.X_OK))
    assert broken == [], f"{page_ids(page)}: {broken}"


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.MULTILINE | re.DOTALL)
    return {_slug(h) for h in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}


@pytest.mark.parametrize("page", PAGES, ids=page_ids)
def test_every_link_reaches_a_file_and_its_heading(page):
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
        if target.startswith(("http://", "https://")):
            continue
        file, _, anchor = target.partition("#")
        linked = (page.parent / file).resolve() if file else page
        if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in anchors(linked)):
            broken.append(target)
    assert broken == [], f"{page_ids(page)}: {broken}"


def test_the_reference_is_what_the_code_says_now():
    loader = importlib.machinery.SourceFileLoader("refresh_reference", str(REPO / "scripts" / "refresh-reference"))
    spec = importlib.util.spec_from_loader("refresh_reference", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    assert (REPO / "docs" / "reference.md").read_text(encoding="utf-8") == module.render(), (
        "docs/reference.md is stale: run scripts/refresh-reference"
    )


def test_the_design_page_lists_the_layers_of_the_import_contract():
    contract = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]
    design = (REPO / "docs" / "design.md").read_text(encoding="utf-8")
    listed = design.split("<!-- layers -->", 1)[1].split("<!-- /layers -->", 1)[0]
    written = [re.match(r"\d+\. (`[^:]+?`)(?: \(|:)", line) for line in listed.strip().splitlines()]
    layers = [" | ".join(re.findall(r"\w+", m.group(1))) for m in written if m]
    assert layers == contract["layers"]


def test_the_readme_stays_short_and_lists_every_docs_page():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    listed = set(re.findall(r"\]\((docs/[\w.-]+\.md)\)", readme))
    assert listed == {f"docs/{p.name}" for p in (REPO / "docs").glob("*.md")}
