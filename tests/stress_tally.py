"""Failures per test over the rounds of ``scripts/test stress``: the unit tier's JUnit XML and bats' TAP, one file of
each per round, read from the folder given. A test that failed in any round is a flake to fix (it judged the
machine's load, not the product), never one to retry.

    python tests/stress_tally.py DIR        (DIR holds unit-N.xml and bats-N.tap for rounds 1..N)

Exit 0 when every round of both ran and nothing failed, else 1.
"""

from __future__ import annotations

import re
import sys
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

NOT_OK = re.compile(r"^not ok \d+ (.*)$")
PLAN = re.compile(r"^1\.\.(\d+)$")


def unit_round(path: Path) -> tuple[int, list[str]]:
    """(tests run, the ones that failed or errored) of one round's pytest JUnit file."""
    cases = ET.parse(path).getroot().iter("testcase")
    ran, failed = 0, []
    for case in cases:
        ran += 1
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(f"{case.get('classname')}::{case.get('name')}")
    return ran, failed


def bats_round(path: Path) -> tuple[int, list[str]]:
    """(tests planned, the ones not ok) of one round's TAP output."""
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    planned = next((int(m.group(1)) for m in map(PLAN.match, lines) if m), 0)
    return planned, [f"bats: {m.group(1)}" for m in map(NOT_OK.match, lines) if m]


def main(folder: Path) -> int:
    rounds = sorted(int(p.stem.split("-")[1]) for p in folder.glob("unit-*.log"))
    failures: Counter[str] = Counter()
    missing = []
    for n in rounds:
        for kind, read in (("unit", unit_round), ("bats", bats_round)):
            path = folder / f"{kind}-{n}.{'xml' if kind == 'unit' else 'tap'}"
            ran, failed = read(path) if path.exists() and path.stat().st_size else (0, [])
            if ran == 0:
                missing.append(f"round {n}: {kind} ran no test (see {folder}/{kind}-{n}.*)")
            failures.update(failed)
            print(f"round {n} {kind}: {ran} tests, {len(failed)} failed")
    print(f"\n=== stress: {len(rounds)} rounds of the unit tier and bats, two CPU hogs beside them")
    for line in missing:
        print(line)
    for name, count in failures.most_common():
        print(f"{count}/{len(rounds)} failed  {name}")
    if not failures and not missing:
        print("no test failed in any round")
    return 1 if failures or missing or not rounds else 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1])))
