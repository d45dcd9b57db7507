"""Finding a profile (a shipped name or a path) and reading its YAML."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import yaml

from afd_e2e.errors import UsageError
from afd_e2e.profile.model import Profile
from afd_e2e.profile.sections import parse_profile


def _builtin_dir() -> Path:
    return Path(str(resources.files("afd_e2e") / "profiles"))


def builtin_profiles() -> list[str]:
    """Names of the profiles shipped inside the package."""
    return sorted(p.stem for p in _builtin_dir().glob("*.yaml"))


def load_profile(name_or_path: str) -> Profile:
    """Load a shipped profile by name, or any profile file by path."""
    path = Path(name_or_path)
    if not (path.suffix in (".yaml", ".yml") and path.exists()):
        path = _builtin_dir() / f"{name_or_path}.yaml"
        if not path.exists():
            raise UsageError(
                f"unknown profile {name_or_path!r}",
                f"use one of: {', '.join(builtin_profiles())}, or a path to a .yaml profile",
            )
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise UsageError(f"{path}: cannot read profile: {first}", "fix the YAML syntax") from exc
    return parse_profile(data, str(path) if path.parent != _builtin_dir() else path.name)
