"""What the stall tests share (CPU and GPU): when the verdict was printed, when the API's tokens last moved, the
bench client's processes and a role's EngineCore."""

from __future__ import annotations

import io
import json
import os
import signal
import threading
import time
from pathlib import Path

import psutil

from afd_e2e.system.progress import Progress
from afd_e2e.telemetry.engine_metrics import read_metrics


class VerdictClock(Progress):
    """The runner's progress printer noting when (monotonic) the first "engine stalled" line was printed; quiet
    unless ``echo``."""

    def __init__(self, *, echo: bool = False) -> None:
        self.lines = io.StringIO()
        super().__init__(stream=None if echo else self.lines)
        self.stalled_at: float | None = None

    def __call__(self, message: str) -> None:
        if self.stalled_at is None and "engine stalled" in message:
            self.stalled_at = time.monotonic()
        super().__call__(message)


class LastToken:
    """Polls the API's token counters every ``every_s`` and notes when (monotonic) they last moved.

    Tests poll every 0.5 s (the default): each poll is a client connection to the API port, which the watchdog counts
    as a request in flight while it is open (``telemetry/in_flight.py``), and on a loaded machine a fast poller's
    connections are open in most 1 s samples, so a quiet engine before any traffic could read as stalled. Noting the
    last token up to 0.5 s late only shortens the measured time to the verdict, which tests bound from above. The
    lifecycle benchmark, measuring that figure itself, polls every 0.1 s."""

    def __init__(self, port: int, every_s: float = 0.5) -> None:
        self.url, self.at, self._seen, self.every_s = f"http://127.0.0.1:{port}/metrics", None, None, every_s
        self._stop = threading.Event()
        threading.Thread(target=self._poll, daemon=True).start()

    def _poll(self) -> None:
        while not self._stop.wait(self.every_s):
            metrics = read_metrics(self.url)
            tokens = metrics.tokens if metrics else None
            if tokens is not None and tokens != self._seen:
                self._seen, self.at = tokens, time.monotonic()

    def stop(self) -> None:
        self._stop.set()


def bench_processes(port: int) -> list[psutil.Process]:
    """The bench processes against the server on ``port``: a ``vllm bench serve`` of its own, or the phase's warm
    client (``bench_client_script.py --server URL``) with the children it forked for its commands (alive, not
    zombies)."""
    found = []
    for proc in psutil.process_iter():
        try:
            cmdline = proc.cmdline()
            zombie = proc.status() == psutil.STATUS_ZOMBIE
        except psutil.Error:
            continue
        bench = "bench" in cmdline or any(Path(arg).name == "bench_client_script.py" for arg in cmdline[:2])
        if bench and not zombie and any(str(port) in arg for arg in cmdline):
            found.append(proc)
    return found


def engine_core_of(api_pid: int) -> psutil.Process | None:
    """The API server's ``VLLM::EngineCore`` child, once it has set its title."""
    try:
        children = psutil.Process(api_pid).children(recursive=True)
    except psutil.Error:
        return None
    for child in children:
        try:
            if "EngineCore" in " ".join(child.cmdline()):
                return child
        except psutil.Error:
            continue
    return None


def engine_core(out: Path, role: str) -> psutil.Process | None:
    """``role``'s EngineCore (by the run record's server pid), once it exists."""
    record = out / "run-record.json"
    if not record.exists():
        return None
    servers = [p for p in json.loads(record.read_text())["processes"] if p["name"] == role]
    if not servers:
        return None
    try:
        children = psutil.Process(servers[0]["pid"]).children(recursive=True)
    except psutil.Error:
        return None
    return next((c for c in children if "EngineCore" in c.name()), None)


def stop_engine_mid_bench(out: Path, role: str, api_port: int, *, within_s: float = 900) -> dict[str, int]:
    """A thread that SIGSTOPs ``role``'s EngineCore the moment the API's engine has requests running (the bench's:
    nothing else sends any), so the stopped engine holds requests in flight; the returned dict gets its ``pid``.

    The condition is the engine's own gauge, read every 0.25 s once the EngineCore is known: a bench client alive is
    not enough (the warm client lives before and after its commands' traffic, and a stop after the last answer was
    no stall: a loaded run once passed that way). Not faster: each read is a connection to the API port, which the
    watchdog counts as a request in flight while no token moves (20 ms reads before the bench's traffic made a
    loaded run's idle engine a stall)."""
    stopped: dict[str, int] = {}

    def run() -> None:
        deadline = time.monotonic() + within_s
        core = None
        while time.monotonic() < deadline and not stopped:
            core = core or engine_core(out, role)
            metrics = read_metrics(f"http://127.0.0.1:{api_port}/metrics") if core is not None else None
            if core is not None and metrics and (metrics.running or 0) > 0:
                os.kill(core.pid, signal.SIGSTOP)
                stopped["pid"] = core.pid
            time.sleep(0.25)

    threading.Thread(target=run, daemon=True).start()
    return stopped
