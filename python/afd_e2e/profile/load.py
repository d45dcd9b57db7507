"""Finding a profile (a shipped name or a path) and reading its YAML."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

import yaml

from afd_e2e.errors import UsageError
from afd_e2e.profile.model import Profile
from afd_e2e.profile.section_readers import parse_profile


def _builtin_dir() -> Path:
    return Path(str(resources.files("afd_e2e") / "profiles"))


def builtin_profiles() -> list[str]:
    """Names of the profiles shipped inside the package."""
    return sorted(p.stem for p in _builtin_dir().glob("*.yaml"))


def _yaml_error(path: Path, exc: yaml.YAMLError) -> UsageError:
    """``file:line:column: problem`` for a syntax error (PyYAML counts from 0)."""
    mark = getattr(exc, "problem_mark", None)
    where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    return UsageError(
        f"{where}: YAML syntax error: {problem}{f' ({context})' if context else ''}", "fix the YAML there"
    )


def load_profile(name_or_path: str) -> Profile:
    """Load a shipped profile by name, or any profile file by path."""
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or os.sep in name_or_path:
        if not path.is_file():
            what = "is a folder, not a profile file" if path.is_dir() else "no such file"
            shipped = ", ".join(builtin_profiles())
            raise UsageError(f"profile {name_or_path}: {what}", f"check the path, or use a shipped profile: {shipped}")
    else:
        path = _builtin_dir() / f"{name_or_path}.yaml"
        if not path.exists():
            raise UsageError(
                f"unknown profile {name_or_path!r}",
                f"use one of: {', '.join(builtin_profiles())}, or a path to a .yaml profile",
            )
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise _yaml_error(path, exc) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read profile: {exc}", "check the file's permissions and encoding") from exc
    return parse_profile(data, str(path) if path.parent != _builtin_dir() else path.name)
