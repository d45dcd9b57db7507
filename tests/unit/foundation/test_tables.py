"""Unit tier: ``Registry``, the one kind of table every layer keeps: order kept, a name refused twice (across
tables that share names too), an unknown name answered with the known ones, nothing registered once frozen but a
test's scoped entry, which leaves again. The tables the built-in phases fill: tests/unit/foundation/
test_phase_registry.py."""

from __future__ import annotations

import pytest

from afd_e2e.tables import Registry


def filled(*names: str) -> Registry[int]:
    table: Registry[int] = Registry("widths")
    for width, name in enumerate(names):
        table.register(name, width)
    return table


def test_entries_are_read_in_the_order_registered():
    table = filled("smoke", "warmup", "correctness")
    assert list(table) == ["smoke", "warmup", "correctness"]
    assert list(table.values()) == [0, 1, 2] and table["warmup"] == 1 and len(table) == 3


def test_a_name_registered_twice_is_refused_naming_the_table_and_the_name():
    table = filled("smoke")
    with pytest.raises(ValueError, match=r"^widths: 'smoke' is already registered$"):
        table.register("smoke", 7)
    assert table["smoke"] == 0


def test_tables_sharing_names_refuse_each_others():
    phases: Registry[int] = Registry("phases")
    sections: Registry[int] = Registry("case sections", sharing_names_with=phases)
    phases.register("smoke", 0)
    sections.register("hygiene", 1)
    with pytest.raises(ValueError, match=r"^case sections: 'smoke' is already registered \(in phases\)$"):
        sections.register("smoke", 2)
    with pytest.raises(ValueError, match=r"^phases: 'hygiene' is already registered \(in case sections\)$"):
        phases.register("hygiene", 3)
    measures: Registry[int] = Registry("measures")  # a namespace of its own
    measures.register("smoke", 4)


def test_an_unknown_name_is_answered_with_the_known_ones():
    with pytest.raises(KeyError, match=r"widths: nothing is registered as 'echo' \(known: smoke, warmup\)"):
        filled("smoke", "warmup")["echo"]
    with pytest.raises(KeyError, match=r"\(known: none\)"):
        filled()["echo"]
    assert "echo" not in filled("smoke") and filled("smoke").get("echo") is None


def test_a_frozen_table_refuses_to_register_and_a_test_scope_leaves_no_trace():
    table = filled("smoke")
    assert not table.frozen
    table.freeze()
    with pytest.raises(RuntimeError, match=r"^widths: cannot register 'echo', the table is frozen"):
        table.register("echo", 1)
    with table.extended("echo", 1) as entry:
        assert entry == 1 and list(table) == ["smoke", "echo"]
        with pytest.raises(ValueError, match="'echo' is already registered"), table.extended("echo", 2):
            pytest.fail("registered twice")
    assert list(table) == ["smoke"] and table.frozen
