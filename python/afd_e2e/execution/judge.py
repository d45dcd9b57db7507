"""The verdict per role and per case: does the engine's own evidence show the execution mode the case asked for?

- asked **eager**: proven by the engine's eager line or its resolved compile mode NONE; contradicted by a
  compilation line, a graph capture or a graph launch in its trace.
- asked **compiled** (no CUDA graphs: the CPU, or ``cudagraph_mode`` NONE): proven by a compilation line;
  contradicted by the eager line or compile mode NONE.
- asked **CUDA graphs**: proven by graph launches in the trace's decode steps (the whole trace where it has no step
  annotations), captured at start-up or not; contradicted by the eager line, cudagraph mode NONE in the resolved
  config, no graph launch in the decode steps of a trace, or (``FULL_DECODE_ONLY``) graph launches in prefill steps,
  which that mode runs eager; a capture without a trace is unproven (replay is not shown).

Unproven says what would decide it. A case fails on a contradicted role, and on an unproven one when the profile
requires proof (``execution.require_proof``); an unproven role alone is a warning.

The model runner is judged beside the mode: a role whose log shows another runner than its environment asked is
contradicted (the runner decides what a comparison compares); a log that names none leaves the mode's verdict.
So is DBO, where the role asked for it and schedules batches (``execution/dbo.py``): the role's verdict is the worse
of its mode's and its micro-batches'.
"""

from __future__ import annotations

from pathlib import Path

from afd_e2e.execution.asked import COMPILED, EAGER, asked_of
from afd_e2e.execution.dbo import JUDGED_ROLES, judge_microbatches, read_microbatches
from afd_e2e.execution.provable import SCHEDULE_FIX
from afd_e2e.execution.startup import read_startup
from afd_e2e.execution.trace import read_traces, trace_files
from afd_e2e.plan.model import CasePlan, ProcessPlan
from afd_e2e.plan.serve_argv import trace_dir
from afd_e2e.results.execution_records import (
    CaseExecution,
    ExecutionAsked,
    RoleExecution,
    RuntimeEvidence,
    StartupEvidence,
    StepCounts,
)
from afd_e2e.results.status import Proof, Status

PROFILER_HINT = "run the profiler phase: its trace shows the graph launches per decode step"
WORST = {Proof.PROVEN: 0, Proof.UNPROVEN: 1, Proof.CONTRADICTED: 2}  # a role's verdict: the worst of its parts


def _counts(name: str, counts: StepCounts) -> str:
    per = f" ({counts.graphs_per_step:.1f} per step)" if counts.graphs_per_step is not None else ""
    return (
        f"{name}: {counts.steps} steps, {counts.graph_launches} graph launches{per}, {counts.kernel_launches} kernels"
    )


def describe_runtime(runtime: RuntimeEvidence) -> str:
    if runtime.split:
        return f"{_counts('decode', runtime.decode)}; {_counts('prefill', runtime.prefill)}"
    return _counts("whole trace (no step annotations)", runtime.total)


def _line(startup: StartupEvidence, *words: str) -> str:
    """The first kept line holding any of ``words``, quoted, else ''."""
    for line in startup.lines:
        if any(word in line for word in words):
            return f"log shows '{line.split('] ', 1)[-1]}'"
    return ""


def _eager(startup: StartupEvidence | None, runtime: RuntimeEvidence | None) -> tuple[Proof, str, str | None]:
    against = []
    if startup is not None and startup.compiled:
        against.append(_line(startup, "ompil", "Dynamo", "AOT") or "log shows compilation")
    if startup is not None and startup.graphs_captured:
        against.append(_line(startup, "Graph capturing", "Capturing CUDA graphs") or "log shows CUDA graph capture")
    if runtime is not None and runtime.total.graph_launches:
        against.append(describe_runtime(runtime))
    if against:
        return Proof.CONTRADICTED, "; ".join(against), None
    if startup is not None and (startup.eager or startup.engine_compile_mode == "NONE"):
        shown = _line(startup, "eager") or "engine config: compile mode NONE"
        return Proof.PROVEN, shown + (f"; {describe_runtime(runtime)}" if runtime else ""), None
    return Proof.UNPROVEN, "no eager line in the log", "vLLM's 'Enforce eager set' line or its resolved config line"


def _compiled(startup: StartupEvidence | None) -> tuple[Proof, str, str | None]:
    if startup is not None and (startup.eager or startup.engine_compile_mode == "NONE"):
        why = _line(startup, "eager") or "engine config: compile mode NONE"
        return Proof.CONTRADICTED, why, None
    if startup is not None and startup.compiled:
        return Proof.PROVEN, _line(startup, "ompil", "Dynamo", "AOT"), None
    return (
        Proof.UNPROVEN,
        "no compilation line in the log",
        "a compilation line ('torch.compile took', 'Compiling a graph')",
    )


def _graphs(
    asked: ExecutionAsked, startup: StartupEvidence | None, runtime: RuntimeEvidence | None
) -> tuple[Proof, str, str | None]:
    mode = (asked.cudagraph_mode or "FULL_AND_PIECEWISE").upper()
    against = []
    if startup is not None and startup.eager:
        against.append(_line(startup, "eager"))
    elif startup is not None and startup.engine_cudagraph_mode == "NONE":
        against.append("engine config: cudagraph mode NONE")
    if runtime is not None:
        replays = runtime.decode if runtime.split else runtime.total
        if replays.steps and replays.graph_launches == 0:
            against.append(describe_runtime(runtime))
        elif runtime.split and mode == "FULL_DECODE_ONLY" and runtime.prefill.graph_launches:
            against.append(f"{describe_runtime(runtime)}: FULL_DECODE_ONLY runs prefill steps eager")
    if against:
        return Proof.CONTRADICTED, "; ".join(against), None
    captured = _line(startup, "Graph capturing", "Capturing CUDA graphs") if startup is not None else ""
    if runtime is not None:
        replays = runtime.decode if runtime.split else runtime.total
        if replays.graph_launches:
            return Proof.PROVEN, "; ".join(filter(None, [captured, describe_runtime(runtime)])), None
        return (
            Proof.UNPROVEN,
            "the trace holds no decode step",
            f"a profiler window on decode steps ({SCHEDULE_FIX}: it opens after the first request's prefill)",
        )
    if captured:
        return Proof.UNPROVEN, f"{captured}; replay not shown (no profiler trace)", PROFILER_HINT
    return Proof.UNPROVEN, "no capture line in the log and no trace", PROFILER_HINT


def runner_name(runner: str | None) -> str:
    """``V1``, ``V2``, or what an unknown one is."""
    return runner.upper() if runner else "not shown"


def judge_runner(asked: ExecutionAsked, startup: StartupEvidence) -> str | None:
    """Why the role ran another model runner than its environment asked, with the line that shows it, or None."""
    if asked.model_runner is None or startup.model_runner in (None, asked.model_runner):
        return None
    shown = _line(startup, "Model Runner", "model_runner", "model runner") or "its log"
    return f"asked model runner {runner_name(asked.model_runner)}, ran {runner_name(startup.model_runner)}: {shown}"


def judge_role(
    asked: ExecutionAsked, startup: StartupEvidence | None, runtime: RuntimeEvidence | None
) -> tuple[Proof, str, str | None]:
    if asked.mode == EAGER:
        return _eager(startup, runtime)
    if asked.mode == COMPILED:
        return _compiled(startup)
    return _graphs(asked, startup, runtime)


def trace_folder(case: CasePlan, process: ProcessPlan) -> str:
    """Where a role's profiler writes: ``traces/<case>/<role>`` (``server`` for a native case)."""
    return trace_dir(case.id, process.name if process.role == "native" else process.role)


def judge_process(case: CasePlan, process: ProcessPlan, platform: str, out_dir: Path, log: str | None) -> RoleExecution:
    """One role: its asked mode, the evidence in its log (``log``: relative to ``out_dir``; None where this agent
    has none) and traces, the verdict."""
    asked = asked_of(process.argv, platform, process.env_set)
    startup = None
    if log is not None and (out_dir / log).is_file():
        startup = read_startup((out_dir / log).read_text(encoding="utf-8", errors="replace"), log, asked.connector)
    folder = trace_folder(case, process)
    files = trace_files(out_dir / folder)
    runtime = read_traces(files, [str(p.relative_to(out_dir)) for p in files]) if files else None
    proof, reason, would = judge_role(asked, startup, runtime)
    if startup is None:
        reason = f"no start-up log here; {reason}"
    if asked.connector and startup is not None and not startup.connector_line:
        reason += f"; no log line names the connector {asked.connector}"
    if startup is not None and (runner := judge_runner(asked, startup)) is not None:
        proof, reason, would = Proof.CONTRADICTED, f"{runner}; {reason}", None
    microbatches = None
    if asked.dbo and process.role in JUDGED_ROLES and startup is not None:
        microbatches = read_microbatches((out_dir / log).read_text(encoding="utf-8", errors="replace"))
        dbo_proof, dbo_reason, dbo_would = judge_microbatches(microbatches)
        reason = f"{asked.mode} {proof}: {reason}; {dbo_reason}"  # each part's own verdict, the role's the worse
        if WORST[dbo_proof] > WORST[proof]:
            proof, would = dbo_proof, dbo_would
    return RoleExecution(process.role, process.name, asked, proof, reason, would, startup, runtime, microbatches)


def judge_case(
    case: CasePlan, platform: str, out_dir: Path, logs: dict[str, str], require_proof: bool
) -> CaseExecution:
    """Every process of the case (``logs``: process name -> log path relative to ``out_dir``)."""
    roles = [judge_process(case, p, platform, out_dir, logs.get(p.name)) for p in case.processes]
    bad = [r for r in roles if r.proof is Proof.CONTRADICTED or (require_proof and r.proof is Proof.UNPROVEN)]
    unproven = [r for r in roles if r.proof is Proof.UNPROVEN]
    section = CaseExecution(Status.PASSED, require_proof, roles)
    if bad:
        section.status, section.failure = Status.FAILED, "; ".join(describe_role(r) for r in bad)
    elif unproven:
        section.status, section.failure = Status.WARNED, "; ".join(describe_role(r) for r in unproven)
    return section


def describe_role(role: RoleExecution) -> str:
    """``server role asked compiled: contradicted, log shows 'Enforce eager set, ...'``."""
    would = f" (would prove it: {role.would_prove})" if role.would_prove else ""
    return f"{role.process} role asked {role.asked.text}: {role.proof}, {role.reason}{would}"
