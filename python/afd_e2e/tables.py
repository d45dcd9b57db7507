"""The one kind of table every layer's registry is: ``Registry``, entries by name in the order registered.

Each layer holds what it knows of the phases in tables of its own, filled from above by ``afd_e2e.phases`` (the
profile's ``catalogue``, ``results.result_sections``, the runner's ``dispatch``, ``workloads.comparisons``,
``report.section_renderers``); so they all refuse a name twice, name what they know when asked for what they do not, and
freeze the same way. It sits below every layer that keeps one, and imports nothing of afd_e2e.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Registry(Mapping[str, T], Generic[T]):
    """Entries by name, read as a mapping in the order registered (the order a case runs its phases).

    ``register`` refuses a name already taken: two phases by one name would silently replace each other. Tables that
    share one namespace (a phase and a case section are both a case's section names) are built with
    ``sharing_names_with``, and each refuses the others' names too.

    ``freeze`` ends registration: the entry points install the built-in entries and freeze, so nothing registers once
    profiles have been read against the table, and a second install finds the table ``frozen`` and does nothing
    (frozen means installed: no separate flag). A test adds a throwaway entry with ``extended``, frozen or not,
    which takes it out again when its ``with`` block ends; there is no other way to remove one, so outside such
    blocks a frozen table holds what install put there and nothing else.
    """

    def __init__(self, table: str, *, sharing_names_with: Registry[Any] | None = None) -> None:
        self.table = table  # what the table holds, for its errors: "phase run functions"
        self._entries: dict[str, T] = {}
        self._frozen = False
        # every table of one namespace holds the same list, this one included
        self._namespace: list[Registry[Any]] = [] if sharing_names_with is None else sharing_names_with._namespace
        self._namespace.append(self)

    def __getitem__(self, name: str) -> T:
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(self._entries) or "none"
            raise KeyError(f"{self.table}: nothing is registered as {name!r} (known: {known})") from None

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def frozen(self) -> bool:
        return self._frozen

    def freeze(self) -> None:
        self._frozen = True

    def register(self, name: str, entry: T) -> None:
        if self._frozen:
            raise RuntimeError(
                f"{self.table}: cannot register {name!r}, the table is frozen (install fills it and freezes it; "
                "a test adds an entry with extended())"
            )
        self._add(name, entry)

    @contextmanager
    def extended(self, name: str, entry: T) -> Iterator[T]:
        """``entry`` registered for the length of a ``with`` block, frozen or not: a test's throwaway phase."""
        self._add(name, entry)
        try:
            yield entry
        finally:
            del self._entries[name]

    def _add(self, name: str, entry: T) -> None:
        for table in self._namespace:
            if name in table._entries:
                where = "" if table is self else f" (in {table.table})"
                raise ValueError(f"{self.table}: {name!r} is already registered{where}")
        self._entries[name] = entry
