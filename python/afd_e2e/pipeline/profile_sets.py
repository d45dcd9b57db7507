"""Named sets of shipped profiles, offered as one group of steps: ``afd-e2e pipeline --profile-set NAME``.

A set names its profiles by glob over the shipped names, so a profile shipped later (``tiny-gpu-features``,
``deepseek-v2-lite-tp2``) joins its set without an edit here, and a set never names a file that does not exist.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass

from afd_e2e.errors import UsageError


@dataclass(frozen=True)
class ProfileSet:
    name: str
    description: str
    patterns: tuple[str, ...]  # globs over shipped profile names

    def members(self, shipped: Sequence[str]) -> tuple[str, ...]:
        return tuple(name for name in sorted(shipped) if any(fnmatch.fnmatchcase(name, p) for p in self.patterns))


PROFILE_SETS = {
    s.name: s
    for s in (
        ProfileSet(
            "afd-plugin-gpu",
            "the AFD plugin's GPU matrix on small models (tiny DeepSeek-V2, DeepSeek-V2-Lite; 2 to 4 GPUs)",
            ("tiny-gpu-*", "deepseek-v2-lite-*"),
        ),
    )
}


def resolve_profile_set(name: str, shipped: Sequence[str]) -> tuple[str, ...]:
    """The shipped profiles of set ``name``, in name order."""
    if name not in PROFILE_SETS:
        raise UsageError(f"unknown profile set {name!r}", f"use one of: {', '.join(sorted(PROFILE_SETS))}")
    members = PROFILE_SETS[name].members(shipped)
    if not members:
        patterns = ", ".join(PROFILE_SETS[name].patterns)
        raise UsageError(f"profile set {name} ({patterns}) matches no shipped profile", "ship one, or pick another set")
    return members
