"""Where ``vllm bench serve`` is driven: its argv, one bounded repetition, and its result JSON.

A repetition is a process of its own, or, where the executable is vLLM's own CLI, a child of the case's warm
client (``WarmClient``, ``bench_client_script.py``), which imports vLLM once for all of a case's repetitions, every
phase's, instead of once per repetition (8-15 s of a CPU core each). The runner starts it as it launches the case's
servers (``runner/server.py``), so the import overlaps their start-up, and closes it at the case's teardown.

``vllm bench serve`` exits 0 even when every request failed or no server listened, so a repetition passes only
when its result JSON is an object with consistent counts (``completed + failed == num_prompts``, ``failed == 0``,
``completed >= 1``) and every metric the profile compares is a finite non-negative number; anything else fails it
with a one-line reason naming the file and the field.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import queue
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO, Any, Protocol

from afd_e2e.profile.bench_spec import LATENCIES, LATENCY_PERCENTILES, BenchSpec
from afd_e2e.results.performance_records import CasePerformance, Load, Repetition
from afd_e2e.results.redaction import redact_argv, redact_env
from afd_e2e.results.status import Saturation, Status
from afd_e2e.system.engine_probe import ProbeFailed, interpreter_of

PERCENTILE_METRICS = ",".join(stem for stem, _ in LATENCIES)
METRIC_PERCENTILES = ",".join(str(p) for p in LATENCY_PERCENTILES)
# Result keys kept per repetition: throughputs (goodput when ``--goodput`` asked for it), and
# mean/median/std/percentiles of every latency metric.
THROUGHPUT_KEYS = ("request_throughput", "output_throughput", "total_token_throughput", "request_goodput")
LATENCY_STATS = ("mean", "median", "std", *(f"p{p}" for p in LATENCY_PERCENTILES))
LATENCY_KEYS = tuple(f"{s}_{stem}_ms" for stem, _ in LATENCIES for s in LATENCY_STATS)
# The bench client's environment on top of the agent's: offline, no telemetry.
CLIENT_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
}
KILL_GRACE_S = 5.0
# A running repetition's progress line (``run_bench_series``' ``heartbeat_s``), every this many seconds: the
# performance phase's and the runner's ranged series' alike.
PROGRESS_EVERY_S = 10.0
# The process name in the run's markers (``system/markers.py``) of the warm client and of every bench command,
# whichever phase runs it: what ``afd-e2e cleanup`` names a leftover by.
PROCESS_NAME = "bench"
CLIENT_SCRIPT = Path(__file__).with_name("bench_client_script.py")
VLLM_CLI = "vllm.entrypoints.cli.main"  # the console script's entry point, and what the GPU kit's wrapper runs


def client_env(base: Mapping[str, str]) -> dict[str, str]:
    """The environment every ``vllm bench serve`` gets: ``base`` (the phase's client environment: the agent's
    without credentials, with the run's markers), offline and without telemetry."""
    return {**base, **CLIENT_ENV}


def bench_argv(
    executable: str,
    spec: BenchSpec,
    *,
    base_url: str,
    model: str,
    tokenizer: str,
    result_dir: Path,
    result_file: str,
    extra: Sequence[str] = (),
) -> list[str]:
    """The ``vllm bench serve`` command of one repetition; ``extra``: further flags (the capacity's ``--goodput``)."""
    argv = [executable, "bench", "serve", "--backend", "vllm", "--base-url", base_url, "--endpoint", "/v1/completions"]
    argv += ["--model", model, "--tokenizer", tokenizer, "--dataset-name", spec.dataset]
    if spec.prefix is None:
        argv += ["--random-input-len", str(spec.input_len), "--random-output-len", str(spec.output_len)]
    argv += shape_argv(spec)
    argv += ["--num-prompts", str(spec.num_prompts), "--request-rate", f"{spec.request_rate:g}"]
    argv += ["--max-concurrency", str(spec.max_concurrency), "--seed", str(spec.seed)]
    argv += ["--temperature", f"{spec.temperature:g}", "--ignore-eos"]
    argv += ["--percentile-metrics", PERCENTILE_METRICS, "--metric-percentiles", METRIC_PERCENTILES]
    argv += ["--save-result", "--result-dir", str(result_dir), "--result-filename", result_file]
    return argv + list(extra)


def shape_argv(spec: BenchSpec) -> list[str]:
    """The flags of ``spec``'s load shape, each profile key to ``vllm bench serve``'s own flag, and only those a key
    moves from vLLM's default (a profile that sets none runs the argv it always ran): ``burstiness`` to
    ``--burstiness``, ``ramp_up`` to ``--ramp-up-strategy/-start-rps/-end-rps``, ``range_ratio`` to
    ``--random-range-ratio``, ``dataset: prefix_repetition`` to ``--prefix-repetition-prefix-len/-suffix-len/
    -num-prefixes/-output-len`` (the output length is ``output_len``). Preflight asks the installed client for
    every flag here (``shape_flags``)."""
    argv = [] if spec.burstiness == 1.0 else ["--burstiness", f"{spec.burstiness:g}"]
    if spec.ramp_up is not None:
        ramp = spec.ramp_up
        argv += ["--ramp-up-strategy", ramp.strategy]
        argv += ["--ramp-up-start-rps", str(ramp.start), "--ramp-up-end-rps", str(ramp.end)]
    if spec.range_ratio:
        argv += ["--random-range-ratio", f"{spec.range_ratio:g}"]
    if spec.prefix is not None:
        argv += ["--prefix-repetition-prefix-len", str(spec.prefix.prefix_len)]
        argv += ["--prefix-repetition-suffix-len", str(spec.prefix.suffix_len)]
        argv += ["--prefix-repetition-num-prefixes", str(spec.prefix.num_prefixes)]
        argv += ["--prefix-repetition-output-len", str(spec.output_len)]
    return argv


# The flags that say a repetition's load shape, and how ``shape_words`` reads each.
SHAPE_WORDS = {
    "--request-rate": "{} req/s",
    "--burstiness": "burstiness {}",
    "--ramp-up-strategy": "{} ramp",
    "--ramp-up-start-rps": "from {} req/s",
    "--ramp-up-end-rps": "to {} req/s",
    "--random-range-ratio": "lengths ±{}",
    "--prefix-repetition-num-prefixes": "{} shared prefixes",
    "--prefix-repetition-prefix-len": "of {} tokens",
    "--prefix-repetition-suffix-len": "+ {} own tokens",
    "--max-concurrency": "at most {} concurrent",
}


def shape_words(argv: Sequence[str]) -> str:
    """A repetition's load shape in words, read from its recorded argv (what ran, not what a profile says now):
    "8 req/s, burstiness 0.25, at most 4 concurrent". A ramp's ``--request-rate`` is inf and left out."""
    given = {flag: argv[i + 1] for i, flag in enumerate(argv[:-1]) if flag in SHAPE_WORDS}
    if "--ramp-up-strategy" in given:
        given.pop("--request-rate", None)
    return ", ".join(SHAPE_WORDS[flag].format(given[flag]) for flag in SHAPE_WORDS if flag in given)


def shape_flags(spec: BenchSpec) -> dict[str, str]:
    """Every flag the load shapes of ``spec`` and its shapes add, each with the profile key that asks for it
    (``workloads.bench.burstiness``, ``workloads.bench.shapes.burst.burstiness``): what preflight checks the
    installed ``vllm bench serve`` for."""
    keys = {
        "--burstiness": "burstiness",
        "--ramp-up": "ramp_up",
        "--random-range-ratio": "range_ratio",
        "--prefix-repetition": "dataset",
    }
    flags: dict[str, str] = {}
    for where, shape in (("workloads.bench", spec), *((f"workloads.bench.shapes.{n}", s) for n, s in spec.shapes)):
        for flag in (arg for arg in shape_argv(shape) if arg.startswith("--")):
            key = next(key for stem, key in keys.items() if flag.startswith(stem))
            flags.setdefault(flag, f"{where}.{key}")
    return flags


def _is_number(value: Any) -> bool:
    """A finite, non-negative JSON number; booleans are not numbers here."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _judge(name: str, data: Any, num_prompts: int, required: Sequence[str]) -> str | None:
    """The first reason a result JSON cannot count as a repetition, naming the file and the field; None if good."""
    if not isinstance(data, dict):
        return f"{name}: the top level is {'null' if data is None else type(data).__name__}, not an object"
    for key in ("num_prompts", "completed", "failed"):
        if not _is_count(data.get(key)):
            return f"{name}: {key} is {data.get(key, 'missing')!r}, not a count"
    if data["num_prompts"] != num_prompts:
        return f"{name}: num_prompts {data['num_prompts']}, the profile asked for {num_prompts}"
    if data["completed"] + data["failed"] != num_prompts:
        return f"{name}: completed {data['completed']} + failed {data['failed']} != num_prompts {num_prompts}"
    if data["failed"] > 0:
        return f"{data['failed']} of {num_prompts} requests failed"
    if data["completed"] < 1:
        return f"{name}: completed is 0"
    for key in required:
        if key not in data:
            return f"{name}: {key} is missing"
        if not _is_number(data[key]):
            return f"{name}: {key} is {data[key]!r}, not a finite non-negative number"
    return None


# A repetition is saturated when it reached less than this share of the rate an unsaturated server would show
# (``load_of``).
SATURATION_SHARE = 0.9


def load_of(data: Mapping[str, Any]) -> Load | None:
    """The asked and achieved request rates, the client's cap and the peak concurrency of one result JSON, and
    whether the repetition was saturated; None where it has no achieved rate (no ``request_throughput``).

    The rule: saturated when the achieved rate is below 90% of ``expected_rate``, the rate an unsaturated server
    shows for the asked one. vLLM draws the Poisson (or gamma, with ``burstiness``) gaps and then rescales them so
    that the last request is sent at exactly ``num_prompts / request_rate`` (``target_total_delay_s`` in
    ``vllm/benchmarks/serve.py``): the achieved rate carries no 1/sqrt(N) sampling error of the arrivals, only the
    drain of the last request, which ``duration`` includes. ``expected_rate`` takes that drain out (its p99
    end-to-end latency, so a slow last request is not mistaken for saturation); the 10% left covers the client's
    own lag in sending, far below what saturation costs (the seed's 1024 requests at 5 req/s with at most 32
    concurrent reached 2.40 req/s: 48%). An asked rate of "inf" sends every request at once: nothing falls short
    of it, so such a repetition is never saturated (its cap and peak are still recorded), nor is one that completed
    no request (it failed). A saturated repetition is ``concurrency-bound`` where the peak concurrency reached the
    client's ``max_concurrency``, else ``server-bound``; vLLM counts the peak per one-second bucket (a request
    counts in every second it touched), so it can exceed the cap, and a peak below the cap shows the cap never
    bound."""
    achieved = data.get("request_throughput")
    if not _is_number(achieved):
        return None
    cap, peak = data.get("max_concurrency"), data.get("max_concurrent_requests")
    load = Load(
        achieved_rate=float(achieved),
        max_concurrency=cap if _is_count(cap) and cap > 0 else None,
        peak_concurrency=peak if _is_count(peak) else None,
    )
    requested, prompts, completed = data.get("request_rate"), data.get("num_prompts"), data.get("completed")
    load.requested_rate = float(requested) if _is_number(requested) and requested > 0 else None  # None: "inf"
    if load.requested_rate is None or not _is_count(prompts) or not _is_count(completed) or completed < 1:
        return load  # no asked rate, or nothing came back: a failed repetition, not a slow one
    drain = next((data[k] / 1000 for k in ("p99_e2el_ms", "mean_e2el_ms") if _is_number(data.get(k))), 0.0)
    load.drain_s = drain
    load.expected_rate = prompts / (prompts / load.requested_rate + drain)
    load.floor_rate = SATURATION_SHARE * load.expected_rate
    if load.achieved_rate < load.floor_rate:
        bound = load.max_concurrency is not None and (load.peak_concurrency or 0) >= load.max_concurrency
        load.saturated = Saturation.CONCURRENCY_BOUND if bound else Saturation.SERVER_BOUND
    return load


def load_text(load: Load) -> str:
    """One repetition's load in words: achieved against asked (with the saturation floor), the peak concurrency
    against the cap, and the saturation word where the rule found one."""
    asked = f"{load.requested_rate:g} req/s asked" if load.requested_rate is not None else "inf req/s asked"
    floor = f", floor {load.floor_rate:.2f}" if load.floor_rate is not None else ""
    cap = f" of max_concurrency {load.max_concurrency}" if load.max_concurrency is not None else " (no cap)"
    peak = f"peak concurrency {load.peak_concurrency}{cap}" if load.peak_concurrency is not None else ""
    said = f"achieved {load.achieved_rate:.2f} of {asked}{floor}" + (f", {peak}" if peak else "")
    return f"SATURATED ({load.saturated}): {said}" if load.saturated else said


def saturation_line(reps: Sequence[Repetition]) -> str:
    """Which of ``reps`` were saturated, of which kind, achieved against asked and the floor; '' when none was (or
    the results predate the ``load`` record)."""
    hit = [(rep, rep.load) for rep in reps if rep.load is not None and rep.load.saturated is not None]
    if not hit:
        return ""
    kinds = ", ".join(sorted({str(load.saturated) for _, load in hit}))
    which = ", ".join(str(rep.index) for rep, _ in hit)
    achieved = ", ".join(f"{load.achieved_rate:.2f}" for _, load in hit)
    asked = ", ".join(sorted({f"{load.requested_rate:g}" for _, load in hit}))
    floors = ", ".join(sorted({f"{load.floor_rate:.2f}" for _, load in hit}))
    return (
        f"saturated ({kinds}) in {len(hit)} of {len(reps)} repetitions ({which}): achieved {achieved} req/s of "
        f"{asked} asked, below the floor {floors} ({SATURATION_SHARE:.0%} of what an unsaturated server shows): "
        "latencies measured in saturation, not at the asked rate"
    )


def read_result(path: Path, num_prompts: int, required: Sequence[str]) -> Repetition:
    """Judge one result JSON strictly: every ``required`` metric present and a finite non-negative number, counts
    consistent; otherwise a failed repetition with a one-line reason (index and paths left for the caller)."""
    rep = Repetition(index=0, status=Status.FAILED, failure=None, path="", log="", num_prompts=num_prompts)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        rep.failure = f"no result JSON {path.name}"
        return rep
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        rep.failure = f"unreadable result JSON {path.name}: {exc}"
        return rep
    if isinstance(data, dict):
        rep.completed = data["completed"] if _is_count(data.get("completed")) else None
        rep.failed = data["failed"] if _is_count(data.get("failed")) else None
        rep.duration_s = data["duration"] if _is_number(data.get("duration")) else None
        rep.metrics = {k: data[k] for k in (*THROUGHPUT_KEYS, *LATENCY_KEYS) if _is_number(data.get(k))}
        rep.load = load_of(data)
    rep.failure = _judge(path.name, data, num_prompts, required)
    if rep.failure is None:
        rep.status = Status.PASSED
    return rep


TQDM_COUNT = re.compile(r"(\d+)/(\d+) \[")  # tqdm's "12/16 [00:03<00:01, ...]"


def progress_tail(log: Path) -> str:
    """The bench's latest progress-bar or log line (tqdm rewrites its line with carriage returns)."""
    try:
        with log.open("rb") as handle:
            handle.seek(max(0, log.stat().st_size - 400))
            tail = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""
    pieces = [p.strip() for p in tail.replace("\r", "\n").split("\n") if p.strip()]
    for piece in reversed(pieces):
        count = TQDM_COUNT.search(piece)
        if count:  # a progress bar: its count, not its bar
            return f"{count[1]}/{count[2]} requests done"
        if any(c.isalnum() for c in piece):  # not a rule of '=' or a bare bar
            return piece[:120]
    return ""


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the bench's process group, SIGKILL it after a grace period; once the group's leader has ended, what
    is left of the group is killed too (a warm client's command would otherwise run on, orphaned)."""
    for sig, grace in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, KILL_GRACE_S)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


class Command(Protocol):
    """One running ``vllm bench serve``: ``poll`` its exit status (None while it runs), ``stop`` it."""

    def poll(self) -> int | None: ...

    def stop(self) -> None: ...


class _OwnProcess:
    """A ``vllm bench serve`` in a process (and process group) of its own, its output in its log."""

    def __init__(self, argv: list[str], log_path: Path, env: Mapping[str, str]) -> None:
        with log_path.open("wb") as log:
            self.process = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, env=dict(env), start_new_session=True
            )

    def poll(self) -> int | None:
        return self.process.poll()

    def stop(self) -> None:
        _stop(self.process)


def warm_interpreter(executable: str) -> str | None:
    """The Python to run the warm client in, or None: only an executable that runs vLLM's own CLI (its console
    script, or a wrapper that execs ``-m vllm.entrypoints.cli.main``) is warmed, so the client runs what the
    executable would; any other (a wrapper with behaviour of its own, a stand-in) runs as itself, per command."""
    try:
        with open(executable, "rb") as handle:
            head = handle.read(4096).decode("utf-8", "replace")
        python = interpreter_of(executable)
    except (OSError, ProbeFailed):
        return None
    return python if VLLM_CLI in head else None


def _read_answers(stream: IO[bytes], answers: queue.Queue[int | None]) -> None:
    """The client's answers (each command's exit status) into ``answers``; None once it has ended."""
    for line in stream:
        with contextlib.suppress(ValueError, KeyError, TypeError):
            answers.put(int(json.loads(line)["returncode"]))
    answers.put(None)


class ClientClosed(RuntimeError):
    """A command for a warm client that was already closed: its case is being torn down."""


class WarmClient:
    """One warm ``vllm bench serve`` interpreter (``bench_client_script.py``) for a case's commands against one
    server (``server``, its base URL, named in the client's argv for ``ps``), in a process group of its own, with
    ``env``; its own output appended to ``log_path``. ``start`` begins its import; a command finds it started, or
    starts it again after a command was stopped (a stop ends the whole group). ``close`` ends it for good: a command
    that comes later (from a phase abandoned at the teardown) raises ClientClosed instead of starting one that
    nothing would end."""

    def __init__(self, python: str, env: Mapping[str, str], log_path: Path, server: str) -> None:
        self.python, self.env, self.log_path, self.server = python, dict(env), log_path, server
        self.process: subprocess.Popen[bytes] | None = None
        self.answers: queue.Queue[int | None] = queue.Queue()
        self.closed = False
        self.idle = True  # the running client was given no command yet (it may still be importing vLLM)
        self._lock = threading.Lock()  # close (the runner's thread) against a submit (a phase's)

    def start(self) -> WarmClient:
        """Start the client now (its import of vLLM begins), unless it runs already."""
        with self._lock:
            self._running()
        return self

    def _running(self) -> subprocess.Popen[bytes]:
        if self.closed:
            raise ClientClosed(f"the bench client for {self.server} is closed: its case is being torn down")
        if self.process is not None and self.process.poll() is None:
            return self.process
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            process = subprocess.Popen(
                [self.python, str(CLIENT_SCRIPT), "--server", self.server],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=self.env,
                start_new_session=True,
            )
        self.process, self.answers, self.idle = process, queue.Queue(), True
        assert process.stdout is not None
        threading.Thread(target=_read_answers, args=(process.stdout, self.answers), daemon=True).start()
        return process

    def submit(self, argv: list[str], log_path: Path) -> Command:
        """Run ``argv`` (a ``vllm bench serve`` command) in a child of the client, its output in ``log_path``."""
        with self._lock:
            process = self._running()
            answers, self.idle = self.answers, False
        assert process.stdin is not None
        with contextlib.suppress(BrokenPipeError):  # the client is gone: the command ends with its exit status
            process.stdin.write((json.dumps({"argv": argv, "log": str(log_path)}) + "\n").encode())
            process.stdin.flush()
        return _ClientCommand(self, process, answers)

    def forget(self, process: subprocess.Popen[bytes]) -> None:
        """``process``, this client's, was stopped with a command (its whole group): the next command starts anew."""
        with self._lock:
            if self.process is process:
                self.process = None

    def close(self) -> None:
        """End the client for good: stdin closed (it exits), stopped if it does not within the grace period; one
        never given a command is stopped at once (it would read the end of its stdin only once its import is
        done: a case that failed or was cancelled during its start-up would wait for that)."""
        with self._lock:
            self.closed = True
            process, self.process, idle = self.process, None, self.idle
        if process is None:
            return
        with contextlib.suppress(BrokenPipeError):
            assert process.stdin is not None
            process.stdin.close()
        if idle:
            _stop(process)
            return
        try:
            process.wait(timeout=KILL_GRACE_S)
        except subprocess.TimeoutExpired:
            _stop(process)


@dataclass
class _ClientCommand:
    """A command running in a warm client: its exit status is the client's answer, or the client's own if the
    client ended first."""

    client: WarmClient
    process: subprocess.Popen[bytes]
    answers: queue.Queue[int | None]

    def poll(self) -> int | None:
        try:
            answer = self.answers.get_nowait()
        except queue.Empty:
            return None
        return answer if answer is not None else self.process.wait()

    def stop(self) -> None:
        _stop(self.process)  # the client's whole group: the client and the command's child
        self.client.forget(self.process)


def open_client(executable: str, env: Mapping[str, str], log_path: Path, *, server: str) -> WarmClient | None:
    """A warm client for commands of ``executable`` against ``server``, started now, or None where the executable
    is not vLLM's own CLI (each command is then a process of its own). The caller closes it."""
    python = warm_interpreter(executable)
    return WarmClient(python, env, log_path, server).start() if python is not None else None


@contextlib.contextmanager
def warm_client(executable: str, env: Mapping[str, str], log_path: Path, *, server: str) -> Iterator[WarmClient | None]:
    """``open_client`` for the length of a block (a benchmark's series), closed when the block is left."""
    client = open_client(executable, env, log_path, server=server)
    try:
        yield client
    finally:
        if client is not None:
            client.close()


def run_repetition(
    argv: list[str],
    *,
    result_path: Path,
    log_path: Path,
    num_prompts: int,
    required: Sequence[str],
    timeout_s: float,
    label: str,
    progress: Callable[[str], None],
    cancelled: threading.Event,
    heartbeat_s: float,
    env: Mapping[str, str],
    client: WarmClient | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[Repetition, bool]:
    """Run one ``vllm bench serve`` bounded by ``timeout_s`` with ``env`` (``client_env``), in ``client`` when one
    is given (started with the same ``env``), else as a process of its own: the repetition (index and paths left
    for the caller), and whether the bench ended by itself (False when it was stopped for a timeout or a cancel).
    The timeout and heartbeats are read on ``clock``, the polls wait with ``sleep`` (tests drive both)."""
    result_path.unlink(missing_ok=True)  # a stale file must not pass for this run's result
    started = clock()
    command = client.submit(argv, log_path) if client is not None else _OwnProcess(argv, log_path, env)
    next_beat = started + heartbeat_s
    while (returncode := command.poll()) is None:
        now = clock()
        if cancelled.is_set() or now - started > timeout_s:
            command.stop()
            reason = "cancelled" if cancelled.is_set() else f"timed out after {timeout_s:g} s"
            rep = read_result(result_path, num_prompts, required)
            rep.status, rep.failure = (Status.CANCELLED if cancelled.is_set() else Status.FAILED), reason
            return rep, False
        if now >= next_beat:
            progress(f"{label}: {now - started:.0f} s, {progress_tail(log_path)}")
            next_beat = now + heartbeat_s
        sleep(min(0.5, heartbeat_s))
    rep = read_result(result_path, num_prompts, required)
    if rep.failure and returncode:
        rep.failure += f" (vllm bench serve exited {returncode})"
    return rep, True


@dataclass(frozen=True)
class Target:
    """Where one case's repetitions go: its server, the tokenizer it loaded, its bench folder, its client env."""

    case_id: str
    base_url: str
    model: str
    tokenizer: str
    env: Mapping[str, str]


def run_one(
    spec: BenchSpec,
    target: Target,
    *,
    executable: str,
    out_dir: Path,
    kind: str,
    index: int,
    total: int,
    progress: Callable[[str], None],
    cancelled: threading.Event,
    heartbeat_s: float,
    diagnose: Callable[[], str] = lambda: "",
    client: WarmClient | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    shape: str = "",
) -> tuple[Repetition, bool]:
    """One warmup or formal repetition into ``out_dir/bench/<case>/<kind>-<index>.json`` (a named ``shape``'s in
    ``bench/<case>/<shape>/``): the repetition with its index and paths, and whether the bench ended by itself
    (False: stopped for a timeout or a cancel, then with the watchdog's ``diagnose()`` in its failure). ``client``,
    ``clock`` and ``sleep``: as ``run_repetition``'s."""
    where = f"{target.case_id}/{shape}" if shape else target.case_id
    folder = out_dir / "bench" / where
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{kind}-{index}"
    label = f"bench {shape + ' ' if shape else ''}{kind} {index}/{total}"
    progress(f"{label}: starting ({spec.num_prompts} prompts, ISL {spec.input_len}, OSL {spec.output_len})")
    argv = bench_argv(
        executable,
        spec,
        base_url=target.base_url,
        model=target.model,
        tokenizer=target.tokenizer,
        result_dir=folder,
        result_file=f"{stem}.json",
    )
    rep, ended_by_itself = run_repetition(
        argv,
        result_path=folder / f"{stem}.json",
        log_path=folder / f"{stem}.log",
        num_prompts=spec.num_prompts,
        required=[gate.metric.key for gate in spec.metrics],
        timeout_s=spec.timeout_s,
        label=label,
        progress=progress,
        cancelled=cancelled,
        heartbeat_s=heartbeat_s,
        env=target.env,
        client=client,
        clock=clock,
        sleep=sleep,
    )
    if not ended_by_itself and not cancelled.is_set() and (diagnosis := diagnose()):
        rep = replace(rep, failure=f"{rep.failure}; {diagnosis}")
    rel = f"bench/{where}/{stem}"
    rep = replace(rep, index=index, path=f"{rel}.json", log=f"{rel}.log", argv=redact_argv(argv))
    progress(f"{label}: {rep.status}" + (f" ({rep.failure})" if rep.failure else ""))
    return rep, ended_by_itself


def run_bench_series(
    spec: BenchSpec,
    target: Target,
    *,
    executable: str,
    out_dir: Path,
    publish: Callable[[CasePerformance], None],
    progress: Callable[[str], None],
    cancelled: threading.Event,
    heartbeat_s: float,
    on_timeout: Callable[[str], None] = lambda _reason: None,
    diagnose: Callable[[], str] = lambda: "",
    client: WarmClient | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    shape: str = "",
) -> CasePerformance:
    """Warmups then formal repetitions (a range's ``min``; the rest is the sequential series') into
    ``out_dir/bench/<case>/`` (a named ``shape``'s into ``bench/<case>/<shape>/``); the ``performance`` section of
    a case, or one shape's.

    Each finished repetition is published at once. A timed-out or cancelled repetition ends the series (a hung
    server would time out every later one too), a timed-out one after ``on_timeout`` (the case's forensics) was
    called with its failure, which carries the progress watchdog's ``diagnose()`` (what is in flight, since when
    no token moved, the process that explains it); other failures are recorded and the series goes on. Each
    repetition's timeout and heartbeats are read on ``clock`` (tests drive it and ``sleep``); ``client``: the warm
    client the repetitions run in, if any (the case's, ``CaseServers.bench_client``).
    """
    section = CasePerformance(Status.RUNNING, env=redact_env(target.env))
    schedule = [("warmup", i, section.warmups) for i in range(1, spec.warmups + 1)]
    schedule += [("rep", i, section.repetitions) for i in range(1, spec.repetitions + 1)]
    for kind, index, bucket in schedule:
        if cancelled.is_set():
            break
        rep, ended_by_itself = run_one(
            spec,
            target,
            executable=executable,
            out_dir=out_dir,
            kind=kind,
            index=index,
            total=spec.warmups if kind == "warmup" else spec.repetitions,
            progress=progress,
            cancelled=cancelled,
            heartbeat_s=heartbeat_s,
            diagnose=diagnose,
            client=client,
            clock=clock,
            sleep=sleep,
            shape=shape,
        )
        bucket.append(rep)
        if rep.failure and section.failure is None:
            section.failure = f"{kind} {index}: {rep.failure}"
        publish(section)
        if not ended_by_itself:
            if not cancelled.is_set():
                on_timeout(f"performance {kind} {index}: {rep.failure}")
            break
    section.status = _ended(section, cancelled)
    publish(section)
    return section


def _ended(section: CasePerformance, cancelled: threading.Event) -> Status:
    """A series' status once it stops: cancelled, failed (any repetition), or passed."""
    if cancelled.is_set():
        section.failure = section.failure or "cancelled"
        return Status.CANCELLED
    return Status.FAILED if section.failure else Status.PASSED
