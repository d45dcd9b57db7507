"""A YAML mapping walker: each key type-checked, unknown keys refused, errors naming file, key and fix."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

from afd_e2e.errors import UsageError


class Reader:
    """Walks a YAML mapping, type-checking each key and rejecting unknown ones, with file:key context."""

    def __init__(self, source: str, data: Any, path: str) -> None:
        self.source = source
        self.path = path
        if not isinstance(data, Mapping):
            self.fail(path or "(top level)", f"must be a mapping, got {type(data).__name__}", "write key: value pairs")
        self.data = data
        self.seen: set[str] = set()

    def fail(self, key: str, problem: str, fix: str) -> None:
        raise UsageError(f"{self.source}: {key}: {problem}", fix)

    def key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def get(self, name: str, kind: type | tuple[type, ...], default: Any = ..., *, fix: str = "") -> Any:
        self.seen.add(name)
        if name not in self.data:
            misspelt = _closest(name, (str(k) for k in self.data if k not in self.seen))
            if default is ... and misspelt is not None:
                self.fail(
                    self.key(name), f"missing; {self.key(misspelt)} is not a known key", f"rename {misspelt} to {name}"
                )
            if default is ...:
                self.fail(self.key(name), "missing", fix or f"add {name}")
            return default
        value = self.data[name]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if isinstance(value, bool) and bool not in kinds:
            self.fail(self.key(name), f"must be {_kind_names(kinds)}, got a boolean", fix or "use a number or string")
        if float in kinds and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kinds):
            self.fail(
                self.key(name),
                f"must be {_kind_names(kinds)}, got {type(value).__name__} {value!r}",
                fix or f"set {name} to {_kind_names(kinds)}",
            )
        return value

    def positive_int(self, name: str, default: Any = ..., *, minimum: int = 1) -> int:
        value = self.get(name, int, default)
        if value < minimum:
            self.fail(self.key(name), f"must be >= {minimum}, got {value}", f"set {name} to at least {minimum}")
        return value

    def str_list(self, name: str, default: Any = ...) -> tuple[str, ...]:
        value = self.get(name, list, default)
        for item in value:
            if not isinstance(item, str):
                self.fail(self.key(name), f"items must be strings, got {item!r}", "quote every item")
        return tuple(value)

    def str_map(self, name: str, default: Any = ...) -> dict[str, str]:
        value = self.get(name, dict, default)
        out = {}
        for k, v in value.items():
            if not isinstance(v, (str, int, float)) or isinstance(v, bool):
                self.fail(f"{self.key(name)}.{k}", f"must be a string, got {v!r}", "quote the value")
            out[str(k)] = str(v)
        return out

    def child(self, name: str, default: Any = ...) -> Reader | None:
        value = self.get(name, dict, default)
        if value is None:
            return None
        return Reader(self.source, value, self.key(name))

    def done(self) -> None:
        unknown = sorted(set(self.data) - self.seen)
        if unknown:
            where = self.path or "top level"
            key = str(unknown[0])
            closest = _closest(key, self.seen)
            if closest is not None:
                self.fail(
                    self.key(key),
                    f"unknown key at {where}; the closest known key is {closest}",
                    f"rename it to {closest}",
                )
            allowed = ", ".join(sorted(self.seen))
            self.fail(self.key(key), f"unknown key at {where}", f"remove it or use one of: {allowed}")


def _closest(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate a typo of ``name`` most likely meant (difflib's closest match), or None."""
    matches = difflib.get_close_matches(name, sorted(candidates), n=1, cutoff=0.75)
    return matches[0] if matches else None


def _kind_names(kinds: tuple[type, ...]) -> str:
    names = {
        int: "an integer",
        float: "a number",
        str: "a string",
        bool: "true/false",
        list: "a list",
        dict: "a mapping",
    }
    return " or ".join(names.get(k, k.__name__) for k in kinds)
