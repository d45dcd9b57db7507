"""Engine tier: ``afd-e2e bisect`` on the real CPU vLLM finds the first bad commit of a vLLM general plugin.

The plugin's history (``tests/bisect_plugin/make_history.py``, seven first-parent commits 0..6, built in tmp)
plants a correctness break (greedy tokens from negated logits) from commit 1, a per-step slowdown (100 -> 200 ms)
from commit 2, and a packaging break at commit 3 that ``pip install`` refuses. Proves:
- the TPOT search probes 0, 6, 3, 2, 1 and finds commit 2: the bad revision is ``worse`` against the good one;
  commit 3, the first midpoint, is really probed and reported ``skipped`` with pip's reason (it lies after the first
  bad commit, so the answer stays unambiguous); commit 2 is placed at the bad end (position near 1, its interval
  above the middle) and commit 1, whose TPOT is unchanged, at the good end (near 0, below it), at the defaults
  (``--max-runs`` 3, so each look spends a third of the error rate); bisect.json fits its schema, the plot and the
  annotation section are written;
- the parity search, sharing the sample cache, finds commit 1 from the TPOT search's runs alone: it probes the
  same commits, every run comes from the cache (one case runs both the parity outputs and the bench, so a run
  serves either metric) and it launches nothing.

vLLM launches: 4 (one more for a commit undecided at its first run, and one of an endpoint whose spread weighs as
much as the commit's own: the rule places a commit on the regression, +93% here, so a loaded machine's few % of
noise no longer leaves commit 1 undecided as the ±15% equivalence margin once did on CI), all in the
TPOT search (commits 0, 6, 2, 1; commit 3 does not install, so nothing launches), of
one engine configuration, each one probe (~22 s to ready, a few s of parity outputs, two bench repetitions of
~3.5 s each plus ~10 s of ``vllm bench serve`` start-up: 56-70 s a probe); the parity search: 0. Measured on the 2
shared cores: the TPOT search 260 s quiet, 330 s beside another engine tier (TPOT 104 ms good, 204 ms slowed; commit 2
at position 0.94, 90% interval [0.90, 0.99], commit 1 at -0.03 [-0.07, 0.01]), the parity search 0.2 s, the module
260-330 s (was 566 s with 7 launches). Ports
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
from afd_e2e.results.bisect_records import bisect_schema, load_bisect
from afd_e2e.results.status import BisectWord, Verdict
from bisect_plugin.make_history import BROKEN_AT, CORRUPT_AT, SLOW_AT, SUBJECTS, make_history
from repo_paths import FIXTURES

# the most vLLM servers this module starts (tests/launch_counter.py): 4 when each of commits 0, 6, 2, 1 decides at
# its first run; --max-runs 3 each at most
LAUNCHES = 12

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
        f"{p.index} {p.commit[:12]} {p.word:8} {p.verdict or '-'!s:13} {p.seconds:6.1f} s  {len(p.runs)} runs  {p.reason}"
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
    last = len(shas) - 1
    assert words[last].word is BisectWord.BAD and words[last].verdict is Verdict.WORSE, words[last]
    for index in (SLOW_AT, CORRUPT_AT):
        probe, bad = words[index], index >= SLOW_AT
        assert probe.word is (BisectWord.BAD if bad else BisectWord.GOOD), probe
        assert probe.position is not None and probe.position_ci90 is not None, probe
        assert abs(probe.position - (1.0 if bad else 0.0)) < 0.25, probe
        assert (probe.position_ci90[0] > 0.5) if bad else (probe.position_ci90[1] < 0.5), probe
    assert [p.index for p in record.probes] == PROBED, "the history is shaped for this order (make_history.py)"
    launched = [run for probe in record.probes for run in probe.runs if not run.cached]
    assert record.launches == len(launched), "one server per run measured"
    # one run for each probe but the skipped one; a commit undecided at its first run is run again (--max-runs), and an
    # endpoint whose spread weighs as much as the commit's own too
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
