"""Driving ``vllm bench serve``: argv, judging its result JSON (real ones from the CPU vLLM), bounded runs."""

from __future__ import annotations

import copy
import json
import os
import sys
import threading
from dataclasses import replace
from pathlib import Path

import pytest

from afd_e2e.profile.bench_spec import DEFAULT_BENCH_METRICS, BenchSpec, MetricGate
from afd_e2e.workloads import bench
from repo_paths import FIXTURES
from unit.timing import FakeClock, wait_until

REQUIRED = [metric.key for metric in DEFAULT_BENCH_METRICS]

SPEC = BenchSpec(
    dataset="random",
    input_len=64,
    output_len=16,
    num_prompts=16,
    request_rate=8.0,
    max_concurrency=4,
    temperature=0.0,
    seed=0,
    warmups=1,
    repetitions=2,
    parity_threshold_pct=10.0,
    timeout_s=30.0,
    metrics=tuple(MetricGate(metric, "warn") for metric in DEFAULT_BENCH_METRICS),
)


def _copy(name: str, tmp_path: Path, **changes) -> Path:
    data = json.loads((FIXTURES / "vllm_bench" / name).read_text(encoding="utf-8"))
    data.update(changes)
    path = tmp_path / "rep-1.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def _read(path: Path, num_prompts: int = 16):
    return bench.read_result(path, num_prompts, REQUIRED)


def test_argv_carries_the_workload():
    argv = bench.bench_argv(
        "/venv/bin/vllm",
        SPEC,
        base_url="http://127.0.0.1:19500",
        model="tiny-moe",
        tokenizer="/m",
        result_dir=Path("/out/bench/c"),
        result_file="rep-2.json",
    )
    text = " ".join(argv)
    assert argv[:3] == ["/venv/bin/vllm", "bench", "serve"]
    for flags in (
        "--base-url http://127.0.0.1:19500 --endpoint /v1/completions --model tiny-moe --tokenizer /m",
        "--dataset-name random --random-input-len 64 --random-output-len 16 --num-prompts 16 --request-rate 8",
        "--max-concurrency 4 --seed 0 --temperature 0 --ignore-eos",
        "--percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,90,99",
        "--save-result --result-dir /out/bench/c --result-filename rep-2.json",
    ):
        assert flags in text


def test_real_passed_result(tmp_path):
    rep = _read(_copy("passed.json", tmp_path))
    assert (rep.status, rep.failure, rep.completed, rep.failed) == ("passed", None, 16, 0)
    metrics = rep.metrics
    for key in ("request_throughput", "output_throughput", "mean_ttft_ms", "p99_e2el_ms", "median_itl_ms"):
        assert metrics[key] > 0
    assert rep.duration_s == pytest.approx(2.0586, abs=1e-3)


def test_real_all_failed_result_fails_despite_exit_code_zero(tmp_path):
    rep = _read(_copy("all-failed.json", tmp_path), 8)
    assert (rep.status, rep.failure) == ("failed", "8 of 8 requests failed")


def test_missing_and_unreadable_results(tmp_path):
    assert _read(tmp_path / "absent.json").failure == "no result JSON absent.json"
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")
    assert _read(tmp_path / "broken.json").failure.startswith("unreadable result JSON broken.json")


# Each variant breaks one field of the real passed.json (16 prompts, all completed); the profile asks for 16.
BROKEN_VARIANTS = [
    ({"mean_ttft_ms": float("nan")}, "rep-1.json: mean_ttft_ms is nan, not a finite non-negative number"),
    ({"mean_tpot_ms": float("inf")}, "rep-1.json: mean_tpot_ms is inf, not a finite non-negative number"),
    ({"request_throughput": -1.5}, "rep-1.json: request_throughput is -1.5, not a finite non-negative number"),
    ({"p99_e2el_ms": "72.4"}, "rep-1.json: p99_e2el_ms is '72.4', not a finite non-negative number"),
    ({"mean_itl_ms": True}, "rep-1.json: mean_itl_ms is True, not a finite non-negative number"),
    ({"mean_e2el_ms": None}, "rep-1.json: mean_e2el_ms is None, not a finite non-negative number"),
    ({"completed": 12}, "rep-1.json: completed 12 + failed 0 != num_prompts 16"),
    ({"completed": True}, "rep-1.json: completed is True, not a count"),
    ({"failed": None}, "rep-1.json: failed is None, not a count"),
    ({"failed": -1, "completed": 17}, "rep-1.json: failed is -1, not a count"),
    ({"completed": 16.0}, "rep-1.json: completed is 16.0, not a count"),
    ({"num_prompts": 8}, "rep-1.json: num_prompts 8, the profile asked for 16"),
]


@pytest.mark.parametrize(("changes", "reason"), BROKEN_VARIANTS, ids=[str(c) for c, _ in BROKEN_VARIANTS])
def test_a_broken_field_fails_the_repetition_naming_file_and_field(tmp_path, changes, reason):
    rep = _read(_copy("passed.json", tmp_path, **changes))
    assert (rep.status, rep.failure) == ("failed", reason)
    assert all(isinstance(v, float) and v == v for v in rep.metrics.values())  # never keeps a NaN


def test_no_completed_request_is_a_failed_repetition(tmp_path):
    rep = _read(_copy("passed.json", tmp_path, completed=0, failed=0, num_prompts=0), num_prompts=0)
    assert rep.failure == "rep-1.json: completed is 0"


def test_a_missing_compared_metric_fails_and_an_uncompared_one_does_not(tmp_path):
    data = json.loads((FIXTURES / "vllm_bench" / "passed.json").read_text(encoding="utf-8"))
    del data["p99_itl_ms"]
    path = tmp_path / "rep-1.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    assert _read(path).failure == "rep-1.json: p99_itl_ms is missing"
    rep = bench.read_result(path, 16, ["mean_ttft_ms"])
    assert rep.status == "passed" and "p99_itl_ms" not in rep.metrics


@pytest.mark.parametrize(("top", "word"), [([1, 2], "list"), (None, "null"), ("x", "str"), (3.5, "float")])
def test_a_top_level_that_is_not_an_object_is_a_failed_repetition(tmp_path, top, word):
    path = tmp_path / "rep-1.json"
    path.write_text(json.dumps(top), encoding="utf-8")
    rep = _read(path)
    assert (rep.status, rep.failure) == ("failed", f"rep-1.json: the top level is {word}, not an object")


def test_nan_literal_as_python_writes_it_is_read_and_refused(tmp_path):
    """``json.dump`` writes float('nan') as the bare literal NaN, which Python's reader accepts."""
    path = _copy("passed.json", tmp_path, mean_ttft_ms=float("nan"))
    assert '"mean_ttft_ms": NaN' in path.read_text(encoding="utf-8")
    assert _read(path).failure == "rep-1.json: mean_ttft_ms is nan, not a finite non-negative number"


def _run(argv, tmp_path, timeout_s=30.0, cancelled=None, clock=None):
    lines: list[str] = []
    timing = {} if clock is None else {"clock": clock, "sleep": clock.sleep}
    rep, ended = bench.run_repetition(
        argv,
        result_path=tmp_path / "rep-1.json",
        log_path=tmp_path / "rep-1.log",
        num_prompts=16,
        required=REQUIRED,
        timeout_s=timeout_s,
        label="case rep 1/1",
        progress=lines.append,
        cancelled=cancelled or threading.Event(),
        heartbeat_s=0.2,
        env=bench.client_env(os.environ),
        **timing,
    )
    return rep, ended, lines


def test_exit_code_is_named_when_no_json_came(tmp_path):
    rep, ended, _ = _run([sys.executable, "-c", "raise SystemExit(3)"], tmp_path)
    assert ended and rep.failure == "no result JSON rep-1.json (vllm bench serve exited 3)"


def test_a_stale_result_file_is_not_taken_for_this_run(tmp_path):
    _copy("passed.json", tmp_path)
    rep, _, _ = _run([sys.executable, "-c", "pass"], tmp_path)
    assert rep.failure == "no result JSON rep-1.json"


def test_timeout_stops_the_bench_and_reports_progress(tmp_path):
    """The 1 s is the FakeClock's, which moves only once the bench has printed its progress line; the bench then
    hangs, so only the timeout can end it (never its own end, however late the test's thread runs)."""
    script = "import time\nprint('1/100', flush=True)\ntime.sleep(600)"
    log = tmp_path / "rep-1.log"
    clock = FakeClock(settle=lambda: wait_until(lambda: "/100" in log.read_text(), what="the bench's progress"))
    rep, ended, lines = _run([sys.executable, "-c", script], tmp_path, timeout_s=1.0, clock=clock)
    assert not ended and rep.status == "failed" and rep.failure == "timed out after 1 s"
    assert lines and all(line.startswith("case rep 1/1: ") for line in lines)
    assert any("/100" in line for line in lines)


def test_cancel_stops_the_bench(tmp_path):
    """The cancel comes once the bench is up (it has printed), not after a fixed time."""
    cancelled = threading.Event()
    log = tmp_path / "rep-1.log"
    threading.Thread(
        target=lambda: (wait_until(lambda: log.exists() and "up" in log.read_text()), cancelled.set())
    ).start()
    script = "import time; print('up', flush=True); time.sleep(600)"  # only the cancel ends it (30 s: a guard)
    rep, ended, _ = _run([sys.executable, "-c", script], tmp_path, cancelled=cancelled)
    assert not ended and (rep.status, rep.failure) == ("cancelled", "cancelled")


def _fake_bench(tmp_path: Path, body: str) -> str:
    """An executable standing in for `vllm` (only its exit and files matter to the series)."""
    path = tmp_path / "fake-vllm"
    path.write_text(f"#!{sys.executable}\nimport sys, time\n{body}\n", encoding="utf-8")
    path.chmod(0o755)
    return str(path)


def _series(tmp_path, executable, cancelled=None, spec=SPEC, on_timeout=lambda _reason: None, clock=None):
    published = []
    timing = {} if clock is None else {"clock": clock, "sleep": clock.sleep}
    section = bench.run_bench_series(
        spec,
        bench.Target("cpu-tp1", "http://127.0.0.1:9", "m", "/m", bench.client_env(os.environ)),
        executable=executable,
        out_dir=tmp_path,
        publish=lambda s: published.append(copy.deepcopy(s)),
        progress=lambda _: None,
        cancelled=cancelled or threading.Event(),
        heartbeat_s=0.2,
        on_timeout=on_timeout,
        **timing,
    )
    return section, published


def test_series_writes_warmup_and_repetitions_and_keeps_going_after_a_failure(tmp_path):
    passed = (FIXTURES / "vllm_bench" / "passed.json").read_text(encoding="utf-8")
    body = (
        "args = sys.argv\nout = args[args.index('--result-dir') + 1] + '/' + args[args.index('--result-filename') + 1]\n"
        f"if not out.endswith('rep-1.json'):\n    open(out, 'w').write({passed!r})"
    )
    section, published = _series(tmp_path, _fake_bench(tmp_path, body))
    assert [w.status for w in section.warmups] == ["passed"]
    assert [(r.index, r.status) for r in section.repetitions] == [(1, "failed"), (2, "passed")]
    assert section.status == "failed" and section.failure == "rep 1: no result JSON rep-1.json"
    assert section.repetitions[1].path == "bench/cpu-tp1/rep-2.json"
    assert (tmp_path / "bench/cpu-tp1/warmup-1.json").exists() and (tmp_path / "bench/cpu-tp1/rep-2.log").exists()
    assert len(published) == 4 and published[-1] == section


def test_series_stops_after_a_timeout_once_the_case_forensics_were_asked_for(tmp_path):
    asked: list[str] = []
    bench_script = _fake_bench(tmp_path, "print('up', flush=True); time.sleep(600)")
    log = tmp_path / "bench" / "cpu-tp1" / "warmup-1.log"
    # the 1 s is a FakeClock's, which moves only once the bench is up (it has printed)
    clock = FakeClock(settle=lambda: wait_until(lambda: log.exists() and "up" in log.read_text(), what="the bench"))
    section, _ = _series(
        tmp_path, bench_script, spec=replace(SPEC, timeout_s=1.0), on_timeout=asked.append, clock=clock
    )
    assert section.status == "failed" and section.failure == "warmup 1: timed out after 1 s"
    assert section.repetitions == []
    assert asked == ["performance warmup 1: timed out after 1 s"]


def test_series_cancelled_before_start_records_nothing(tmp_path):
    cancelled = threading.Event()
    cancelled.set()
    section, _ = _series(tmp_path, _fake_bench(tmp_path, "pass"), cancelled)
    assert (section.status, section.warmups, section.repetitions) == ("cancelled", [], [])
