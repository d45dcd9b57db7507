"""Engine tier: ``afd-e2e bisect`` on the real CPU vLLM finds the first bad commit of a vLLM general plugin.

The plugin's history (``tests/bisect_plugin/make_history.py``, seven first-parent commits 0..6, built in tmp)
plants a correctness break (greedy tokens from negated logits) from commit 1, a per-step slowdown (100 -> 200 ms)
from commit 2, and a packaging break at commit 3 that ``pip install`` refuses. Proves:
- the TPOT search probes 0, 6, 3, 2, 1 and finds commit 2: commit 3, the first midpoint, is really probed and
  reported ``skipped`` with pip's reason (it lies after the first bad commit, so the answer stays unambiguous);
  commit 1, whose TPOT is unchanged, is judged ``good`` with a ``parity`` verdict (not ``inconclusive``) at the
  defaults (``--max-runs`` 3, so each look spends a third of the error rates); bisect.json fits its schema, the
  plot and the annotation section are written;
- the parity search, sharing the sample cache, finds commit 1 from the TPOT search's runs alone: it probes the
  same commits, every run comes from the cache (one case runs both the parity outputs and the bench, so a run
  serves either metric) and it launches nothing.

vLLM launches: 4 (one more when a commit is inconclusive at its first run, as on a loaded machine), all in the
TPOT search (commits 0, 6, 2, 1; commit 3 does not install, so nothing launches), of
one engine configuration, each one probe (~22 s to ready, a few s of parity outputs, two bench repetitions of
~3.5 s each plus ~10 s of ``vllm bench serve`` start-up: 56-70 s a probe); the parity search: 0. Measured on the 2
shared cores: the TPOT search 260 s (TPOT 104 ms good, 205 ms slowed; commit 1 +0.2%, 90% interval -0.4%..+0.7%
against the ±15% margin), the parity search 0.2 s, the module 260 s (was 566 s with 7 launches). Ports
23200-23209 (the profile's port_base; this module's block is 23200-23599).
"""

from __future__ import annotations

import contextlib
import io
import json
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
PROBED = [0, 6, BROKEN_AT, SLOW_AT, CORRUPT_AT]  # both searches: the ends, the skipped midpoint, then down to 1


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
    rows = [
        f"{p.index} {p.commit[:12]} {p.word:8} {p.verdict or '-'!s:13} {p.seconds:6.1f} s  {p.reason}"
        + (f" (90% interval {p.ci90_pct[0]:+.1f}%..{p.ci90_pct[1]:+.1f}%)" if p.ci90_pct else "")
        for p in record.probes
    ]
    return "\n".join([*rows, f"total {record.seconds:.1f} s, {record.launches} launches"])


@pytest.fixture(scope="module")
def tpot_search(history, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, str]:
    """The TPOT search, run once for the module: its folder, exit status and what it printed. The parity search
    reads its runs from the shared cache, so it asks for this fixture too and never depends on the tests' order."""
    out = tmp_path_factory.mktemp("tpot")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = _bisect(history, tiny_model, "mean_tpot_ms", out)
    return out, status, printed.getvalue()


def test_tpot_search_finds_the_slowdown(history, tpot_search, capsys) -> None:
    _repo, shas, _cache = history
    out, status, printed = tpot_search
    assert status == 0
    assert f"first bad commit: {shas[SLOW_AT]} {SUBJECTS[SLOW_AT]}" in printed
    record = load_bisect(out)
    jsonschema.validate(json.loads((out / "bisect.json").read_text()), bisect_schema())
    with capsys.disabled():
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
    assert [p.index for p in record.probes] == PROBED, "the history is shaped for this order (make_history.py)"
    launched = [run for probe in record.probes for run in probe.runs if not run.cached]
    assert record.launches == len(launched), "one server per run measured"
    # one run for each probe but the skipped one; a commit inconclusive at its first run is run again (--max-runs),
    # as a loaded machine made commit 1 once
    assert {p.index for p in record.probes if p.runs} == set(PROBED) - {BROKEN_AT}
    assert record.launches >= len(PROBED) - 1
    assert (out / "bisect.png").is_file() and "Bisect of `mean\\_tpot\\_ms`" in (out / "bisect.md").read_text()
    assert "git bisect skip " + shas[BROKEN_AT] in (out / "bisect.log").read_text()


def test_parity_search_finds_the_break_from_the_same_runs(
    history, tpot_search, tiny_model: Path, tmp_path: Path
) -> None:
    _repo, shas, _cache = history
    out = tmp_path / "parity"
    assert _bisect(history, tiny_model, "parity", out) == 0
    record = load_bisect(out)
    print(_table(out))
    assert record.first_bad == shas[CORRUPT_AT]
    assert [p.index for p in record.probes] == PROBED
    assert record.probes[PROBED.index(BROKEN_AT)].word is BisectWord.SKIPPED
    ran = [p for p in record.probes if p.index != BROKEN_AT]
    assert all(p.runs and all(run.cached for run in p.runs) for p in ran), "the TPOT search's runs serve it"
    assert record.launches == 0
