"""The ``correctness`` phase: GSM8K strict match and greedy parity outputs on one case, and its measure, parity: two
cases' outputs compared prompt by prompt. Its parts, each where a reader of that part looks:

- GSM8K: its profile section, questions, grading and run in ``phases/gsm8k.py`` (lm-eval's task itself in
  ``phases/gsm8k_task.py``), its case section ``results/gsm8k_records.py``, its testcases, column and model output
  ``report/gsm8k_report.py``;
- parity: its profile section, collection and rule in ``workloads/parity.py`` (below the phases: a bisect on
  ``--metric parity`` and the replay phase judge by the same rule), its case and comparison sections
  ``results/parity_records.py``, its testcase, column and per-prompt table ``report/parity_report.py``.

This module runs both halves in one phase and registers them: the profile sections (``workloads.gsm8k``,
``workloads.parity``: at least one), ``budgets.correctness_s`` (default 3600), GSM8K's staged data checked at
admission, the case's ``gsm8k`` and ``parity_records`` sections (``parity_outputs`` only read, from results written
before the side file) and the ``parity`` measure. Its renderers are registered by ``phases/rendering.py``.
"""

from __future__ import annotations

from pathlib import Path

from afd_e2e.phases import gsm8k
from afd_e2e.phases.registry import Budget, Measure, Phase, ResultsSection, Workload
from afd_e2e.plan.model import ComparisonPlan
from afd_e2e.profile import Profile
from afd_e2e.results import gsm8k_records, parity_records
from afd_e2e.results.gsm8k_records import Gsm8kResult
from afd_e2e.results.model import CaseResults
from afd_e2e.results.parity_records import ParityComparison, ParityOutput
from afd_e2e.results.side_files import write_records
from afd_e2e.results.status import Status
from afd_e2e.workloads import parity
from afd_e2e.workloads.context import PhaseContext, PhaseOutcome, worst_outcome

NAME = "correctness"


def _needs_sections(profile: Profile) -> tuple[str, str] | None:
    """The phase runs GSM8K, parity or both: it needs at least one of their sections."""
    if gsm8k.NAME in profile.workloads or parity.NAME in profile.workloads:
        return None
    return "correctness phase without workloads.gsm8k or parity", "add one"


def _needs_parity(profile: Profile) -> tuple[str, str] | None:
    """The measure compares the parity prompts' outputs by the profile's parity rule."""
    if parity.NAME in profile.workloads:
        return None
    return "parity measure without workloads.parity", "add workloads.parity"


def _collect_parity(ctx: PhaseContext, spec: parity.ParitySpec) -> PhaseOutcome:
    """Each parity prompt's greedy output, written to the case's side file as it arrives; failed where a request
    failed (the outputs are judged only in the comparisons)."""
    records_rel = parity.parity_records_path(ctx.case.id)

    def publish(outputs: list[ParityOutput]) -> None:
        write_records(ctx.out_dir / records_rel, outputs)
        ctx.record(parity_records.RECORDS, records_rel)

    outputs = parity.collect_outputs(
        spec,
        base_url=ctx.case.base_url,
        model=ctx.case.served_model_name,
        publish=publish,
        progress=ctx.progress,
        cancelled=ctx.cancelled,
        request_timeout_s=ctx.profile.budgets.request_s,
    )
    errors = [o.error for o in outputs if o.error]
    if errors:
        return PhaseOutcome(Status.FAILED, f"parity: {len(errors)} requests failed; {errors[0]}")
    return PhaseOutcome(Status.PASSED)


def run_correctness(ctx: PhaseContext) -> PhaseOutcome:
    """GSM8K strict match (when the profile has it) and greedy parity outputs (when it has prompts)."""
    parts = []
    if (gsm8k_spec := ctx.profile.workloads.get(gsm8k.NAME)) is not None:
        parts.append(gsm8k.run_gsm8k(ctx, gsm8k_spec))
    if (parity_spec := parity.parity_spec(ctx.profile)) is not None and not ctx.cancelled.is_set():
        parts.append(_collect_parity(ctx, parity_spec))
    if ctx.cancelled.is_set() and not any(part.status is Status.CANCELLED for part in parts):
        parts.append(PhaseOutcome(Status.CANCELLED, "cancelled"))
    return worst_outcome(parts)


def compare_parity(
    profile: Profile, cmp: ComparisonPlan, base: CaseResults | None, cand: CaseResults | None, out_dir: Path
) -> ParityComparison:
    """The measure: each side's outputs read back from its side file, compared by the profile's parity rule."""
    spec = parity.parity_spec(profile)
    assert spec is not None  # the measure's needs
    sides = [parity.read_outputs(out_dir, case) if case else None for case in (base, cand)]
    return parity.compare_outputs(spec, cmp.baseline, sides[0], cmp.candidate, sides[1])


CORRECTNESS = Phase(
    name=NAME,
    doc="GSM8K strict match and greedy parity outputs",
    workloads=(Workload(gsm8k.NAME, read=gsm8k.read_gsm8k), Workload(parity.NAME, read=parity.read_parity)),
    needs=_needs_sections,
    budget=Budget("correctness_s", 3600.0),
    run=run_correctness,
    check_inputs=gsm8k.check_gsm8k_inputs,  # the staged GSM8K data; parity's prompts are the profile's own
    # ``| None``: results written while these were fields of every case hold ``null`` where the phase never ran;
    # ``parity_outputs`` is only read: results written before the side file hold the outputs inline there
    sections=(
        ResultsSection(gsm8k_records.SECTION, Gsm8kResult | None),
        ResultsSection(parity_records.RECORDS, str | None),
        ResultsSection(parity_records.OUTPUTS, list[ParityOutput] | None),
    ),
    measure=Measure(
        parity.NAME,
        ResultsSection(parity_records.SECTION, ParityComparison | None),
        compare_parity,
        needs=_needs_parity,
    ),
)
