"""A finite pool of tagged Buildkite agents on this machine, for tests of builds whose jobs need several agents.

Models what Buildkite does with the jobs of running builds (../shared/reference/buildkite.md), no more:
- a build's steps become jobs in creation order: first its pipeline, then each ``pipeline upload`` a job makes (the
  buildkite-agent stub's shared store keeps them, tests/stubs/record-call), in upload order;
- a job runs on a free agent whose tags satisfy its ``agents`` (no ``agents``: ``queue=default``), one job per
  agent at a time;
- ``concurrency`` + ``concurrency_group``: at most that many jobs of the group run at once, across builds;
  ``ordered`` (the default) also keeps the group's jobs in creation order (a later one never passes a waiting
  earlier one), ``eager`` lets any of them start as soon as the limit allows;
- a job started is a separate process in its own working folder (standing in for another agent picking it up)
  that runs the step as an agent does: a command in bash; the plugin's real hooks (environment, pre-command,
  command, then pre-exit always), each sourced with the exports of the ones before.

``AgentPool.run`` returns when every job has finished, or reports a deadlock: jobs waiting while nothing happened
(no job started or finished, nothing written to any build's store, no job printed anything) for ``no_progress_s``
on the pool's ``clock`` (a test's FakeClock, or the real one as a guard against a hang), or at once when every
running job only waits for a job that cannot start (``stuck``); it then names what each running job holds and what
each waiting job waits for, and kills every job. Not modelled: priorities, retries,
timeouts, cancellation, block steps and ``depends_on`` (a test's pipelines use none of them).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from afd_e2e.buildkite.agent_tags import tags_satisfy

REPO = Path(__file__).resolve().parents[1]
RECORD_CALL = REPO / "tests" / "stubs" / "record-call"
PLUGIN_PREFIX = "BUILDKITE_PLUGIN_AFD_E2E_"
HOOKS = ("environment", "pre-command", "command")
WAITING, RUNNING, FINISHED = "waiting", "running", "finished"
POLL_S = 0.05


def plugin_env(config: dict[str, Any]) -> dict[str, str]:
    """Plugin options as the agent exports them: upper-cased, ``-`` -> ``_``, lists as _0, _1..., booleans true/false."""
    env = {"BUILDKITE_PLUGIN_CONFIGURATION": json.dumps(config)}
    for option, value in config.items():
        name = PLUGIN_PREFIX + option.upper().replace("-", "_")
        items = value if isinstance(value, list) else None
        if items is None:
            env[name] = str(value).lower() if isinstance(value, bool) else str(value)
        else:
            env.update({f"{name}_{i}": str(item) for i, item in enumerate(items)})
    return env


@dataclass(frozen=True)
class PoolAgent:
    name: str
    tags: Mapping[str, str]


@dataclass
class PoolJob:
    build: str
    id: str
    step: dict[str, Any]
    state: str = WAITING
    agent: str | None = None
    process: subprocess.Popen[bytes] | None = None
    exit_status: int | None = None
    folder: Path | None = None
    started: float | None = None  # on the pool's clock
    finished: float | None = None

    @property
    def label(self) -> str:
        return f"{self.build}: {self.step.get('label') or self.step.get('key')}"

    @property
    def wanted(self) -> dict[str, str]:
        return dict(self.step.get("agents") or {"queue": "default"})

    @property
    def group(self) -> str | None:
        return self.step.get("concurrency_group")

    @property
    def ordered(self) -> bool:
        return self.step.get("concurrency_method", "ordered") == "ordered"

    def log(self) -> str:
        """What the job printed (its hooks and commands)."""
        assert self.folder is not None
        return (self.folder / "job.log").read_text(encoding="utf-8", errors="replace")

    def calls(self) -> list[str]:
        """The stubbed commands the job called (tests/stubs/record-call's log)."""
        assert self.folder is not None
        return (self.folder / "calls.log").read_text(encoding="utf-8").splitlines()


@dataclass(frozen=True)
class Deadlock:
    """Jobs waiting, nothing moving: which running job holds which agent, and what each waiting job waits for."""

    no_progress_s: float
    holding: tuple[tuple[str, str], ...]  # (job label, agent)
    waiting: tuple[tuple[str, str], ...]  # (job label, why it cannot start)

    def describe(self) -> str:
        lines = [f"deadlock: jobs wait and nothing has moved for {self.no_progress_s:g} s"]
        lines += [f"  {label} holds {agent}" for label, agent in self.holding]
        lines += [f"  {label} waits: {why}" for label, why in self.waiting]
        return "\n".join(lines)


@dataclass
class Outcome:
    jobs: list[PoolJob]
    deadlock: Deadlock | None
    elapsed_s: float

    def of_build(self, build: str) -> list[PoolJob]:
        return [job for job in self.jobs if job.build == build]


@dataclass
class _Build:
    id: str
    store: Path
    env: dict[str, str]
    uploads_seen: int = 0


@dataclass
class AgentPool:
    """``agents`` on this machine, under ``root``; jobs use the plugin in ``plugin_dir`` and the commands in
    ``commands`` (name -> the argv it runs, e.g. an ``afd-e2e`` stand-in) besides the stubbed ``buildkite-agent``.
    Its time (no progress, the limit, when a job started and finished) is read on ``clock``; it polls with
    ``sleep``."""

    root: Path
    agents: Sequence[PoolAgent]
    plugin_dir: Path = REPO
    commands: Mapping[str, Sequence[str]] = field(default_factory=dict)
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    jobs: list[PoolJob] = field(default_factory=list)
    builds: dict[str, _Build] = field(default_factory=dict)

    def start_build(self, build: str, steps: Sequence[dict[str, Any]], env: Mapping[str, str] | None = None) -> Path:
        """A build whose pipeline is ``steps`` (command steps; groups are flattened), with ``env`` in every job
        (the agents' environment); returns its store."""
        store = self.root / "builds" / build
        store.mkdir(parents=True)
        self.builds[build] = _Build(build, store, dict(env or {}))
        self._add(build, steps)
        return store

    def run(
        self, *, no_progress_s: float, limit_s: float = 120.0, stuck: Callable[[PoolJob], bool] | None = None
    ) -> Outcome:
        """Until every job has finished, or a deadlock (nothing moved for ``no_progress_s``); more than ``limit_s``
        with things still moving is an error of the test.

        ``stuck`` (optional) says of a running job that it now only waits for another job to start (e.g. a leader
        waiting for followers it has uploaded). Every running job stuck, and no waiting job able to start, is a
        deadlock at once, without waiting out ``no_progress_s``: nothing can move, however slow the machine."""
        start = last_progress = self.clock()
        snapshot = self._store_snapshot()
        try:
            while True:
                # Read before the uploads are ingested: whatever a stuck job uploaded is then in self.jobs.
                stuck_now = [job for job in self.jobs if job.state == RUNNING and stuck is not None and stuck(job)]
                progress = self._ingest_uploads() | self._reap() | self._dispatch()
                now_snapshot = self._store_snapshot()
                if progress or now_snapshot != snapshot:
                    last_progress, snapshot = self.clock(), now_snapshot
                if all(job.state == FINISHED for job in self.jobs):
                    return Outcome(self.jobs, None, self.clock() - start)
                idle = self.clock() - last_progress
                running = [job for job in self.jobs if job.state == RUNNING]
                held = not progress and running and all(job in stuck_now for job in running)
                if idle >= no_progress_s or held:
                    return Outcome(self.jobs, self._deadlock(idle), self.clock() - start)
                if self.clock() - start >= limit_s:
                    raise RuntimeError(
                        f"the pool's jobs still move after {limit_s:g} s: {self._deadlock(idle).describe()}"
                    )
                self.sleep(POLL_S)
        finally:
            self._kill_running()

    # Buildkite's side: jobs from pipelines, and which job starts on which agent.

    def _add(self, build: str, steps: Sequence[dict[str, Any]]) -> None:
        for step in steps:
            if "group" in step:
                self._add(build, step["steps"])
                continue
            if "command" not in step and "plugins" not in step:
                raise ValueError(f"the agent pool runs command steps only, not {step}")
            self.jobs.append(PoolJob(build, f"{build}-job-{len(self.jobs) + 1:02d}", step))  # ids in creation order

    def _ingest_uploads(self) -> bool:
        added = False
        for build in self.builds.values():
            uploads = sorted((build.store / "pipelines").glob("*.yml"))
            for path in uploads[build.uploads_seen :]:
                self._add(build.id, yaml.safe_load(path.read_text(encoding="utf-8")).get("steps") or [])
                added = True
            build.uploads_seen = len(uploads)
        return added

    def _dispatch(self) -> bool:
        started = False
        for job in [j for j in self.jobs if j.state == WAITING]:
            if self._blocked_by_group(job) is None and (agent := self._free_agent(job)) is not None:
                self._start(job, agent)
                started = True
        return started

    def _blocked_by_group(self, job: PoolJob) -> str | None:
        """Why the job's concurrency group keeps it waiting, or None."""
        if job.group is None:
            return None
        members = [j for j in self.jobs if j.group == job.group]
        running = [j for j in members if j.state == RUNNING]
        if len(running) >= int(job.step["concurrency"]):
            return f"concurrency group {job.group} is full ({', '.join(j.label for j in running)})"
        earlier = next((j for j in members if j.state == WAITING and j is not job), None)
        if job.ordered and earlier is not None and self.jobs.index(earlier) < self.jobs.index(job):
            return f"concurrency group {job.group} runs {earlier.label} first (ordered)"
        return None

    def _free_agent(self, job: PoolJob) -> PoolAgent | None:
        busy = {j.agent for j in self.jobs if j.state == RUNNING}
        for agent in self.agents:
            tags = {"queue": "default", **agent.tags}
            if agent.name not in busy and tags_satisfy(tags, job.wanted):
                return agent
        return None

    # The agent's side: a job as a process in its own folder.

    def _start(self, job: PoolJob, agent: PoolAgent) -> None:
        build = self.builds[job.build]
        folder = self.root / "agents" / agent.name / job.id
        (folder / "bin").mkdir(parents=True)
        for name in ("buildkite-agent", "nvidia-smi"):
            (folder / "bin" / name).symlink_to(RECORD_CALL)
        for name, argv in self.commands.items():
            (folder / "bin" / name).write_text(f'#!/bin/bash\nexec {shlex.join(argv)} "$@"\n', encoding="utf-8")
            (folder / "bin" / name).chmod(0o755)
        (folder / "build").mkdir()
        (folder / "calls.log").touch()
        env = {
            "PATH": f"{folder / 'bin'}:/usr/bin:/bin",
            "HOME": str(folder),
            "TMPDIR": str(folder),
            "STUB_CALLS": str(folder / "calls.log"),
            "STUB_BUILDKITE_STORE": str(build.store),
            "BUILDKITE_BUILD_ID": job.build,
            "BUILDKITE_JOB_ID": job.id,
            "BUILDKITE_AGENT_NAME": agent.name,
            "BUILDKITE_LABEL": str(job.step.get("label", "")),
            "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),  # this checkout's afd_e2e, for the commands
            **build.env,
            **{k: str(v) for k, v in (job.step.get("env") or {}).items()},
        }
        (folder / "job.json").write_text(json.dumps({"step": job.step, "env": env}), encoding="utf-8")
        with (folder / "job.log").open("wb") as log:
            job.process = subprocess.Popen(
                [sys.executable, __file__, "job", str(folder), str(self.plugin_dir)],
                cwd=folder / "build",
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        job.state, job.agent, job.folder, job.started = RUNNING, agent.name, folder, self.clock()

    def _reap(self) -> bool:
        finished = False
        for job in self.jobs:
            if job.state == RUNNING and job.process is not None and job.process.poll() is not None:
                job.state, job.exit_status, job.finished = FINISHED, job.process.returncode, self.clock()
                finished = True
        return finished

    def _store_snapshot(self) -> tuple[tuple[str, int], ...]:
        """What jobs leave behind as they move: every file of every build's store (meta-data set, artifacts,
        uploads) and every job's output, with its size."""
        files = [path for build in self.builds.values() for path in build.store.rglob("*") if path.suffix != ".tmp"]
        files += [job.folder / "job.log" for job in self.jobs if job.folder is not None]
        sizes = []
        for path in files:
            try:  # the stub writes a value beside its key and renames it: a file listed may be gone (or a folder)
                if path.is_file():
                    sizes.append((str(path), path.stat().st_size))
            except FileNotFoundError:
                continue
        return tuple(sorted(sizes))

    def _deadlock(self, idle: float) -> Deadlock:
        holding = tuple((j.label, str(j.agent)) for j in self.jobs if j.state == RUNNING)
        waiting = []
        for job in (j for j in self.jobs if j.state == WAITING):
            why = self._blocked_by_group(job)
            if why is None:
                wanted = ",".join(f"{k}={v}" for k, v in sorted(job.wanted.items()))
                holders = [
                    f"{j.agent} runs {j.label}"
                    for j in self.jobs
                    if j.state == RUNNING
                    and tags_satisfy({"queue": "default", **self._agent(str(j.agent)).tags}, job.wanted)
                ]
                why = f"an agent with {wanted}: " + ("; ".join(holders) or "none in the pool")
            waiting.append((job.label, why))
        return Deadlock(round(idle, 1), holding, tuple(waiting))

    def _agent(self, name: str) -> PoolAgent:
        return next(agent for agent in self.agents if agent.name == name)

    def _kill_running(self) -> None:
        for job in self.jobs:
            if job.state == RUNNING and job.process is not None:
                with contextlib.suppress(ProcessLookupError):  # the job ended on its own meanwhile
                    os.killpg(job.process.pid, signal.SIGKILL)
                job.process.wait()
                job.state, job.exit_status, job.finished = FINISHED, job.process.returncode, self.clock()


def run_job(folder: Path, plugin_dir: Path) -> int:
    """A job as the agent runs it (its working folder is ``folder/build``): a command step's command in bash, or
    the plugin's hooks, each sourced in bash with the environment the ones before left, pre-exit always."""
    job = json.loads((folder / "job.json").read_text(encoding="utf-8"))
    step, env = job["step"], job["env"]
    build_dir = folder / "build"
    if "command" in step:
        return subprocess.run(["bash", "-c", step["command"]], cwd=build_dir, env=env, check=False).returncode
    ((reference, config),) = (item for plugin in step["plugins"] for item in plugin.items())
    if not reference.rsplit("#", 1)[0].endswith("afd-e2e"):
        raise ValueError(f"the agent pool runs the afd-e2e plugin only, not {reference}")
    env = {**env, **plugin_env(config)}
    status = 0
    for hook in HOOKS:
        status, env = _source(folder, plugin_dir / "hooks" / hook, env)
        if status != 0:
            break
    env["BUILDKITE_COMMAND_EXIT_STATUS"] = str(status)
    _source(folder, plugin_dir / "hooks" / "pre-exit", env)
    return status


def _source(folder: Path, hook: Path, env: dict[str, str]) -> tuple[int, dict[str, str]]:
    """Source ``hook`` in bash as the agent's hook wrapper does, capturing the environment it leaves."""
    dump = folder / "env.dump"
    wrapper = 'trap \'env -0 > "$AFD_E2E_TEST_ENV_DUMP"\' EXIT; source "$1"'
    sys.stdout.flush()
    status = subprocess.run(
        ["bash", "-c", wrapper, "_", str(hook)],
        cwd=folder / "build",
        env={**env, "AFD_E2E_TEST_ENV_DUMP": str(dump)},
        check=False,
    ).returncode
    after = dict(item.split("=", 1) for item in dump.read_text(encoding="utf-8").split("\0") if "=" in item)
    after.pop("AFD_E2E_TEST_ENV_DUMP", None)
    return status, after


if __name__ == "__main__":
    if sys.argv[1:2] != ["job"] or len(sys.argv) != 4:
        sys.exit("usage: agent_pool.py job FOLDER PLUGIN_DIR (started by AgentPool for each job)")
    sys.exit(run_job(Path(sys.argv[2]), Path(sys.argv[3])))
