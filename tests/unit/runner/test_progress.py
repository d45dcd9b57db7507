"""Progress lines: the last meaningful server log line, and a heartbeat while the runner waits."""

from __future__ import annotations

import io

from afd_e2e.system.progress import Progress, elapsed, last_meaningful_line, meaningful
from unit.timing import FakeClock, wait_until

VLLM_LOG = (
    "(APIServer pid=12234) INFO 11-29 20:25:53 [api_utils.py:347]        \u2584\u2584 \u2584\u2588\n"
    "W1129 20:26:06.655000 12532 torch/_library/triton.py:53] Triton not available\n"
    "(Worker pid=12532) INFO 11-29 20:26:07 [cpu_model_runner.py:68] Starting to load model /models/qwen...\n"
    "\rLoading safetensors checkpoint shards:   0% Completed | 0/39 [00:00<?, ?it/s]"
    "\rLoading safetensors checkpoint shards:  41% Completed | 16/39 [01:02<01:30, 3.9s/it]\n"
    '(APIServer pid=12234) INFO:     127.0.0.1:40112 - "GET /v1/models HTTP/1.1" 200 OK\n'
    "\n"
)


def test_last_meaningful_line_is_the_latest_progress_bar_state():
    assert (
        last_meaningful_line(VLLM_LOG)
        == "Loading safetensors checkpoint shards:  41% Completed | 16/39 [01:02<01:30, 3.9s/it]"
    )


def test_prefixes_are_dropped_and_warnings_kept_visible():
    assert meaningful("(Worker pid=1) INFO 11-29 20:26:07 [x.py:68] Starting to load model") == "Starting to load model"
    assert meaningful("W1129 20:26:06.655000 12532 torch/x.py:53] Triton not available") == (
        "WARNING: Triton not available"
    )
    assert meaningful("(EngineCore pid=3) ERROR 11-29 20:26:07 [core.py:1] boom") == "ERROR: boom"
    assert meaningful('INFO:     127.0.0.1:1 - "POST /v1/completions HTTP/1.1" 200 OK') is None
    assert meaningful("   ") is None
    assert len(meaningful("x" * 500)) == 160


def test_elapsed_reads_naturally():
    assert [elapsed(s) for s in (4.9, 65, 3725)] == ["4s", "1m05s", "1h02m"]


def test_heartbeat_names_case_phase_elapsed_and_last_server_line(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(VLLM_LOG)
    out = io.StringIO()
    clock = FakeClock()
    with Progress(interval_s=0.2, stream=out, clock=clock) as progress:
        progress.enter("afd-eager-4a4f", "startup", [log])
        for beats in (1, 2):
            clock.advance(0.2)  # one interval without a message: one heartbeat
            wait_until(lambda beats=beats: len(out.getvalue().splitlines()) >= beats, what=f"heartbeat {beats}")
    lines = out.getvalue().splitlines()

    assert len(lines) >= 2
    assert lines[0].startswith("afd-e2e | afd-eager-4a4f | startup | 0s | still running; server: Loading safetensors")
    assert "41% Completed" in lines[0]


def test_a_message_postpones_the_heartbeat():
    out = io.StringIO()
    clock = FakeClock()
    with Progress(interval_s=0.5, stream=out, clock=clock) as progress:
        progress.enter("c", "performance")
        for index in range(4):
            progress(f"repetition {index}")
            clock.advance(0.3)  # 1.2 s in all, never 0.5 s without a message
        assert out.getvalue().splitlines() == [f"afd-e2e | c | performance | 0s | repetition {i}" for i in range(4)]
        clock.advance(0.2)  # now 0.5 s since the last message: the heartbeat speaks
        wait_until(lambda: len(out.getvalue().splitlines()) == 5, what="the heartbeat")

    assert out.getvalue().splitlines()[4] == "afd-e2e | c | performance | 1s | still running"


def test_a_message_whose_last_part_is_empty_ends_without_a_dangling_comma():
    out = io.StringIO()
    Progress(stream=out)("bench warmup 1/1: 10 s, ")
    assert out.getvalue() == "afd-e2e | bench warmup 1/1: 10 s\n"
