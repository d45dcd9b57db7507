"""Engine tier: ``afd-e2e bisect`` on the real CPU vLLM finds the first bad commit of a vLLM general plugin.

The plugin's history (``tests/bisect_plugin/make_history.py``, ten first-parent commits, built in tmp) plants a
per-step slowdown from commit 5, a correctness break (greedy tokens from negated logits) from commit 3, and a
packaging break at commit 6 that ``pip install`` refuses. Proves:
- the TPOT search finds commit 5 in at most ⌈log2 9⌉ + 2 = 6 probes, reports commit 6 ``skipped`` with pip's
  reason, and judges the unchanged commits it probes ``good`` with a ``parity`` verdict (not ``inconclusive``) at
  the defaults; bisect.json fits its schema, the plot and the annotation section are written;
- the parity search, sharing the sample cache, finds commit 3, reusing the runs the TPOT search made of the same
  commits (one case runs both the parity outputs and the bench, so a run serves either metric).

vLLM launches: 5 for the TPOT search (commits 0, 9, 4, 7, 5; commit 6 does not install, so nothing launches) and 2
for the parity search (commits 2, 3; 0, 4 and 9 come from the cache): 7 servers of one engine configuration, each
one probe (~45 s start plus ~15-30 s of parity and bench on 2 shared cores), about 8-9 minutes in all. Ports
23200-23209 (the profile's port_base; this module's block is 23200-23599).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import jsonschema
import pytest

from afd_e2e.cli import main
from afd_e2e.results.bisect import bisect_schema, load_bisect
from afd_e2e.results.status import BisectWord, Verdict
from bisect_plugin.make_history import BROKEN_AT, CORRUPT_AT, SLOW_AT, SUBJECTS, make_history
from repo_paths import FIXTURES

pytestmark = pytest.mark.engine

PROFILE = FIXTURES / "profiles" / "bisect-cpu.yaml"
PORT_BASE = 23200


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], Path]:
    root = tmp_path_factory.mktemp("bisect")
    repo = root / "plugin"
    return repo, make_history(repo), root / "cache"


def _bisect(history, tiny_model: Path, metric: str, out: Path) -> int:
    repo, shas, cache = history
    argv = ["bisect", "--profile", str(PROFILE), "--case", "cpu-tp1", "--metric", metric, "--repo", str(repo)]
    argv += ["--good", shas[0], "--bad", "main", "--out", str(out), "--cache", str(cache)]
    return main([*argv, "--model", str(tiny_model), "--port-base", str(PORT_BASE)])


def _table(out: Path) -> str:
    record = load_bisect(out)
    rows = [f"{p.commit[:12]} {p.word:8} {p.verdict or '-'!s:13} {p.seconds:6.1f} s  {p.reason}" for p in record.probes]
    return "\n".join([*rows, f"total {record.seconds:.1f} s, {record.launches} launches"])


def test_tpot_search_finds_the_slowdown(history, tiny_model: Path, tmp_path: Path, capsys) -> None:
    _repo, shas, _cache = history
    out = tmp_path / "tpot"
    assert _bisect(history, tiny_model, "mean_tpot_ms", out) == 0
    printed = capsys.readouterr().out
    assert f"first bad commit: {shas[SLOW_AT]} {SUBJECTS[SLOW_AT]}" in printed
    record = load_bisect(out)
    jsonschema.validate(json.loads((out / "bisect.json").read_text()), bisect_schema())
    print(_table(out))
    assert record.first_bad == shas[SLOW_AT]
    words = {p.index: p for p in record.probes}
    assert words[BROKEN_AT].word is BisectWord.SKIPPED and "pip install failed" in words[BROKEN_AT].reason
    for index, probe in words.items():
        if index in (0, BROKEN_AT):
            continue
        expected = BisectWord.BAD if index >= SLOW_AT else BisectWord.GOOD
        assert probe.word is expected, probe
        assert probe.verdict is (Verdict.WORSE if index >= SLOW_AT else Verdict.PARITY), probe
    unskipped = [p for p in record.probes if p.word is not BisectWord.SKIPPED]
    assert len(unskipped) <= math.ceil(math.log2(len(shas) - 1)) + 2
    assert (out / "bisect.png").is_file() and "Bisect of `mean_tpot_ms`" in (out / "bisect.md").read_text()
    assert "git bisect skip " + shas[BROKEN_AT] in (out / "bisect.log").read_text()


def test_parity_search_finds_the_break_from_the_same_runs(history, tiny_model: Path, tmp_path: Path) -> None:
    _repo, shas, _cache = history
    out = tmp_path / "parity"
    assert _bisect(history, tiny_model, "parity", out) == 0
    record = load_bisect(out)
    print(_table(out))
    assert record.first_bad == shas[CORRUPT_AT]
    reused = [p for p in record.probes if p.runs and all(run.cached for run in p.runs)]
    assert len(reused) >= 3, "the TPOT search's runs of commits 0, 4 and 9 serve the parity search"
    assert record.launches <= 2
