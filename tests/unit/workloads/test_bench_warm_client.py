"""Unit tier: the warm ``vllm bench serve`` client (``bench.WarmClient``, ``bench_client_script.py``) with a stand-in
of vLLM's CLI package (``unit/vllm_cli_stand_in.py``: a few lines that record imports and runs and write a real
result JSON), on this Python. The real vLLM's CLI runs in it in every engine-tier phase that benches."""

from __future__ import annotations

import sys
import threading

import psutil
import pytest

from afd_e2e.system.markers import find_marked, marker_env
from afd_e2e.workloads import bench
from unit.timing import wait_until
from unit.vllm_cli_stand_in import record_lines, stand_in_vllm

SERVER = "http://127.0.0.1:9"


def _repetition(client, executable, env, tmp_path, stem, *flags, cancelled=None):
    argv = [executable, "bench", "serve", "--result-dir", str(tmp_path), "--result-filename", f"{stem}.json", *flags]
    return bench.run_repetition(
        argv,
        result_path=tmp_path / f"{stem}.json",
        log_path=tmp_path / f"{stem}.log",
        num_prompts=16,
        required=["mean_tpot_ms"],
        timeout_s=120.0,
        label=stem,
        progress=lambda _line: None,
        cancelled=cancelled or threading.Event(),
        heartbeat_s=0.05,
        env=env,
        client=client,
    )


def _running(pid: int) -> bool:
    """Alive and not a zombie (a killed orphan holds nothing until init reaps it)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_client_imports_vllm_once_and_runs_each_command_in_a_child_of_its_own(tmp_path):
    executable, env, record = stand_in_vllm(tmp_path)
    with bench.warm_client(executable, env, tmp_path / "client.log", server=SERVER) as client:
        assert client is not None
        reps = [_repetition(client, executable, env, tmp_path, f"rep-{i}") for i in (1, 2, 3)]
        process = client.process
    assert [(rep.status, ended) for rep, ended in reps] == [("passed", True)] * 3
    (imported,) = record_lines(record, "import")
    runs = record_lines(record, "run")
    assert len(runs) == 3 and len({pid for _, pid, _ in runs}) == 3, "one child per command"
    assert imported[1] not in {pid for _, pid, _ in runs}, "the commands ran in children of the warm process"
    assert all(argv0 == "vllm" for _, _, argv0 in runs), "each child runs the CLI as `vllm ...`"
    assert all((tmp_path / f"rep-{i}.log").read_text().strip() == "up" for i in (1, 2, 3)), "its output, its log"
    assert process is not None and process.poll() is not None, "the client ends when closed"


def test_a_stopped_command_ends_the_client_and_its_child_and_the_next_command_starts_a_new_one(tmp_path):
    executable, env, record = stand_in_vllm(tmp_path)
    env = {**env, **marker_env("run-1", "case-1", "bench")}
    cancelled = threading.Event()
    hung = tmp_path / "hung.log"
    marked: list[int] = []

    def cancel_once_up() -> None:
        """While the command runs: what ``afd-e2e cleanup`` would find of the run, then the cancel."""
        wait_until(lambda: hung.exists() and "up" in hung.read_text())
        marked.extend(found.process.pid for found in find_marked("run-1"))
        cancelled.set()

    threading.Thread(target=cancel_once_up).start()
    with bench.warm_client(executable, env, tmp_path / "client.log", server=SERVER) as client:
        rep, ended = _repetition(
            client, executable, env, tmp_path, "hung", "--hang", "--ignore-term", cancelled=cancelled
        )
        (_, child, _) = record_lines(record, "run")[0]
        assert not ended and (rep.status, rep.failure) == ("cancelled", "cancelled")
        assert int(child) in marked and len(marked) == 2, "the client and its child carry the run's markers"
        assert client.process is None
        wait_until(lambda: not _running(int(child)), what="the stopped command's child to end with its client")
        rep, ended = _repetition(client, executable, env, tmp_path, "after")
    assert ended and rep.status == "passed"
    assert len(record_lines(record, "import")) == 2, "a new client for the command after the stop"


def test_a_closed_client_starts_no_other(tmp_path):
    """A phase abandoned at its case's teardown may still send a command once the case closed its client: it gets
    ClientClosed, never a new client that nothing would end."""
    executable, env, record = stand_in_vllm(tmp_path)
    with bench.warm_client(executable, env, tmp_path / "client.log", server=SERVER) as client:
        assert client is not None
        rep, _ = _repetition(client, executable, env, tmp_path, "before")
    assert rep.status == "passed" and client.closed and client.process is None
    with pytest.raises(bench.ClientClosed, match="is closed: its case is being torn down"):
        _repetition(client, executable, env, tmp_path, "late")
    assert client.process is None and len(record_lines(record, "import")) == 1


def test_an_exit_status_and_a_crash_are_the_commands_own_and_the_client_goes_on(tmp_path):
    executable, env, record = stand_in_vllm(tmp_path)
    with bench.warm_client(executable, env, tmp_path / "client.log", server=SERVER) as client:
        exited, _ = _repetition(client, executable, env, tmp_path, "exited", "--exit", "3")
        crashed, _ = _repetition(client, executable, env, tmp_path, "crashed", "--crash")
        passed, _ = _repetition(client, executable, env, tmp_path, "passed")
    assert exited.failure == "no result JSON exited.json (vllm bench serve exited 3)"
    assert crashed.failure == "no result JSON crashed.json (vllm bench serve exited 1)"
    assert "RuntimeError: the stand-in crashed" in (tmp_path / "crashed.log").read_text()
    assert passed.status == "passed" and len(record_lines(record, "import")) == 1


def test_only_an_executable_that_runs_vllms_own_cli_is_warmed(tmp_path):
    executable, _env, _record = stand_in_vllm(tmp_path)
    wrapper = tmp_path / "gpu-kit-vllm"  # the GPU kit's wrapper, as its setup.sh writes it
    wrapper.write_text(f'#!/bin/bash\nexec "{sys.executable}" -m vllm.entrypoints.cli.main "$@"\n', encoding="utf-8")
    other = tmp_path / "site-wrapper"  # a wrapper with behaviour of its own runs as itself
    other.write_text(f'#!/bin/bash\nexport FORCE=1\nexec "{executable}" "$@"\n', encoding="utf-8")
    stand_in = tmp_path / "fake-vllm"
    stand_in.write_text(f"#!{sys.executable}\nprint('not vllm')\n", encoding="utf-8")
    assert bench.warm_interpreter(executable) == sys.executable
    assert bench.warm_interpreter(str(wrapper)) == sys.executable
    assert bench.warm_interpreter(str(other)) is None
    assert bench.warm_interpreter(str(stand_in)) is None
    assert bench.warm_interpreter(str(tmp_path / "missing")) is None
    with bench.warm_client(str(stand_in), {}, tmp_path / "client.log", server=SERVER) as client:
        assert client is None
