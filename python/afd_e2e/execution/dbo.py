"""Whether a role asked for dual-batch overlap (``--enable-dbo``) really split its batches into micro-batches, from
its own log, as the AFD plugin's own e2e proves it (``assert_dbo_live_split_coverage``: Attention's DEBUG lines that
hold ``UBatchSlice(`` after the evaluation started, warm-up and graph capture not counted).

vLLM 0.26's V1 model runner (``vllm/v1/worker/gpu_model_runner.py``, ``execute_model``) logs at DEBUG, for every
step it runs, the micro-batches it chose: ``ubatch_slices: [UBatchSlice(request_slice=slice(0, 6, None),
token_slice=slice(0, 6, None)), UBatchSlice(...)], ubatch_slices_padded: ...`` for a split step, ``ubatch_slices:
None, ubatch_slices_padded: None`` for an unsplit one. The harness sets ``VLLM_LOGGING_LEVEL=DEBUG`` for the DBO
case's roles that schedule batches (``plan/serve_argv.py``), and only there: the line costs a log write per step.

The window is what the engine ran after ``Application startup complete.``, the API server's own line that the
engine is up: every step before it is the engine's own (profiling, dummy runs, graph capture), every step after it
serves the harness's requests. Ranks are told apart by the line's process prefix (``(EngineCore_DP1 pid=...)``).

- **proven**: every rank that logged a step in the window split at least one;
- **contradicted**: the window's steps ran unsplit on a rank (vLLM 0.26 splits only when every DP rank agrees, and
  never at DP 1: ``coordinate_batch_across_dp`` returns early), the counts and a line quoted;
- **unproven**: no step line in the window (the log level was not DEBUG, or no step ran), or no start-up line.

The FFN role runs the micro-batches Attention sends it and logs no step of its own; the plugin proves DBO on
Attention's ranks, and so does this: an FFN role that asked for DBO is not judged here.
"""

from __future__ import annotations

import re

from afd_e2e.results.execution_records import MAX_LINE_CHARS, MicroBatches
from afd_e2e.results.status import Proof

READY_LINE = "Application startup complete."
JUDGED_ROLES = ("native", "attention")  # the roles whose runner schedules batches
_STEP = re.compile(r"ubatch_slices: (None|\[)")
_RANK = re.compile(r"^\((\S+) pid=\d+\)")
WOULD_PROVE = (
    "DEBUG 'ubatch_slices: [UBatchSlice(' lines after start-up (VLLM_LOGGING_LEVEL=DEBUG, which the harness sets for "
    "a case's dbo:) and batches at or above the DBO token thresholds on every DP rank"
)


def _cut(line: str) -> str:
    line = line.rstrip()
    return line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + f" [{len(line) - MAX_LINE_CHARS} cut]"


def read_microbatches(text: str) -> MicroBatches:
    """The split and unsplit steps each rank logged after the ready line (``started`` false: no ready line, and
    nothing counted)."""
    found = MicroBatches(started=False)
    for line in text.splitlines():
        if not found.started:
            found.started = READY_LINE in line
            continue
        step = _STEP.search(line)
        if step is None:
            continue
        rank = m.group(1) if (m := _RANK.match(line)) else "engine"
        split = step.group(1) == "[" and "UBatchSlice(" in line
        counts = found.split if split else found.unsplit
        counts[rank] = counts.get(rank, 0) + 1
        found.split.setdefault(rank, 0)
        if split and found.split_line is None:
            found.split_line = _cut(line)
        if not split and found.unsplit_line is None:
            found.unsplit_line = _cut(line)
    return found


def _quoted(line: str | None) -> str:
    return f": '{line.split('] ', 1)[-1]}'" if line else ""


def judge_microbatches(found: MicroBatches) -> tuple[Proof, str, str | None]:
    """(proof, reason, what would prove it) for a role that asked for DBO, from its log's micro-batch lines."""
    if not found.started:
        return Proof.UNPROVEN, f"DBO: no '{READY_LINE}' line, so no window to read micro-batches in", WOULD_PROVE
    if not found.split:
        return Proof.UNPROVEN, "DBO: no 'ubatch_slices' step line after start-up", WOULD_PROVE
    counts = ", ".join(
        f"{rank} {found.split[rank]} of {found.split[rank] + found.unsplit.get(rank, 0)}"
        for rank in sorted(found.split)
    )
    unsplit = sorted(rank for rank, n in found.split.items() if n == 0)
    if unsplit:
        return (
            Proof.CONTRADICTED,
            f"DBO: ran unsplit after start-up on {', '.join(unsplit)} (steps split: {counts})"
            + _quoted(found.unsplit_line),
            None,
        )
    return (
        Proof.PROVEN,
        f"DBO: steps split into micro-batches after start-up: {counts}" + _quoted(found.split_line),
        None,
    )
