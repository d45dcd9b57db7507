"""The ``replay`` phase, defined in this one module: rounds of concurrent requests at the capture batch size, and
its measure, replay parity: the two cases' requests compared by the parity rule.

A CUDA-graph case decodes through graphs captured at one size; a single request replays them padded, a full batch
replays them as captured. Each round sends ``batch`` requests at once (the parity prompts, cycled), greedy, with
token ids; a comparison pairs the two cases' requests round by round and position by position.

The requests, top-k logprobs and all, go to the side file ``replay/<case>.jsonl`` (rewritten after each round), not
into results.json: 192 requests of a tiny model are about 500 KB. A comparison reads them back from there. The
comparison lists the requests that are not identical; the identical ones are counted.

Profile keys (docs/reference.md): ``workloads.replay.rounds`` (default 3) and ``workloads.replay.batch``, at most the
capture size of every graph case that runs the phase (a larger batch replays no graph); the prompts and the parity
rule are ``workloads.parity``'s (the correctness phase's), which the phase and its measure need;
``budgets.replay_s`` (default 600). The case's ``replay`` section and the comparison's are
``results/replay_records.py``'s; the reports show them through ``report/replay_report.py`` (a testcase per case and
per comparison, the annotation's Features table).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from afd_e2e.phases.registry import Budget, Measure, Phase, ResultsSection, Workload
from afd_e2e.plan.model import ComparisonPlan
from afd_e2e.profile import Profile
from afd_e2e.profile.reader import Reader
from afd_e2e.results.model import CaseResults
from afd_e2e.results.parity_records import ParityComparison
from afd_e2e.results.replay_records import SECTION, ReplayRequest, ReplayResult
from afd_e2e.results.side_files import read_records, write_records
from afd_e2e.results.status import ParityVerdict, Status
from afd_e2e.workloads import parity
from afd_e2e.workloads.context import PhaseContext, PhaseOutcome
from afd_e2e.workloads.parity import ParitySpec, parity_spec

NAME = "replay"
DEFAULT_ROUNDS = 3


@dataclass(frozen=True)
class ReplaySpec:
    """``workloads.replay``: rounds of ``batch`` concurrent requests (the parity prompts, cycled), enough to replay
    captured graphs."""

    rounds: int
    batch: int


def read_replay(r: Reader, profile: Profile) -> ReplaySpec:
    """The section, refused where its batch is above the capture size of a graph case that runs the phase: no graph
    would replay it as captured."""
    spec = ReplaySpec(rounds=r.positive_int("rounds", DEFAULT_ROUNDS), batch=r.positive_int("batch"))
    r.done()
    for case in profile.cases:
        if case.graph and NAME in case.phases and spec.batch > case.graph.capture_size:
            r.fail(
                r.key("batch"),
                f"{spec.batch} is above case {case.id}'s capture size {case.graph.capture_size}: no graph replays it",
                f"set batch to at most {case.graph.capture_size}",
            )
    return spec


def _needs_sections(profile: Profile) -> tuple[str, str] | None:
    """The rounds need ``workloads.replay`` for their size and ``workloads.parity`` for their prompts."""
    if NAME in profile.workloads and parity.NAME in profile.workloads:
        return None
    return "replay phase without workloads.replay and parity", "add both"


def _needs_parity(profile: Profile) -> tuple[str, str] | None:
    """Replay parity judges by the profile's parity rule."""
    if parity.NAME in profile.workloads:
        return None
    return "replay measure without workloads.parity", "add workloads.parity"


def pairing_key(request: ReplayRequest) -> str:
    """What pairs a request with the other case's: round, position and prompt."""
    return f"round {request.round} #{request.index}: {request.output.prompt}"


def _one(
    base_url: str, model: str, spec: ParitySpec, timeout_s: float, number: int, index: int, prompt: str
) -> ReplayRequest:
    """One request through parity's own collection (a one-prompt spec), so both phases record the same fields."""
    outputs = parity.collect_outputs(
        replace(spec, prompts=(prompt,)),
        base_url=base_url,
        model=model,
        publish=lambda _: None,
        progress=lambda _: None,
        cancelled=threading.Event(),
        request_timeout_s=timeout_s,
    )
    return ReplayRequest(round=number, index=index, output=outputs[0])


def replay_records_path(case_id: str) -> str:
    """Where a case's replay requests go, relative to the results folder."""
    return f"replay/{case_id}.jsonl"


def read_requests(out_dir: Path, result: ReplayResult) -> list[ReplayRequest]:
    """A case's replay requests: from its side file, or inline in results written before it."""
    return result.requests if result.records is None else read_records(out_dir, result.records, ReplayRequest)


def run_replay_rounds(
    spec: ReplaySpec,
    prompts: ParitySpec,
    *,
    base_url: str,
    model: str,
    out_dir: Path,
    case_id: str,
    publish: Callable[[ReplayResult], None],
    progress: Callable[[str], None],
    cancelled: threading.Event,
    request_timeout_s: float,
) -> ReplayResult:
    """Every round's requests sent together, written to ``replay/<case>.jsonl`` after each round; a request that
    fails fails the phase, naming the first error."""
    records = replay_records_path(case_id)
    result = ReplayResult(status=Status.RUNNING, failure=None, rounds=spec.rounds, batch=spec.batch, records=records)
    requests: list[ReplayRequest] = []
    write_records(out_dir / records, requests)
    batch = [prompts.prompts[i % len(prompts.prompts)] for i in range(spec.batch)]
    with ThreadPoolExecutor(max_workers=spec.batch) as pool:
        for number in range(1, spec.rounds + 1):
            if cancelled.is_set():
                result.status, result.failure = Status.CANCELLED, "cancelled"
                publish(result)
                return result
            futures = [
                pool.submit(_one, base_url, model, prompts, request_timeout_s, number, i, p)
                for i, p in enumerate(batch)
            ]
            requests += [f.result() for f in futures]
            write_records(out_dir / records, requests)
            result.answered = sum(r.output.error is None for r in requests)
            publish(result)
            progress(f"replay: round {number}/{spec.rounds}, {spec.batch} concurrent requests")
    errors = [r.output.error for r in requests if r.output.error]
    if errors:
        result.status = Status.FAILED
        result.failure = f"{len(errors)} of {len(requests)} replay requests failed; {errors[0]}"
    else:
        result.status = Status.PASSED
    publish(result)
    return result


def run_replay(ctx: PhaseContext) -> PhaseOutcome:
    """Rounds of concurrent requests at the capture batch size (``workloads.replay``), token ids recorded."""
    prompts = parity_spec(ctx.profile)
    assert prompts is not None  # the phase's needs
    section = run_replay_rounds(
        ctx.profile.workloads[NAME],
        prompts,
        base_url=ctx.case.base_url,
        model=ctx.case.served_model_name,
        out_dir=ctx.out_dir,
        case_id=ctx.case.id,
        publish=partial(ctx.record, SECTION),
        progress=ctx.progress,
        cancelled=ctx.cancelled,
        request_timeout_s=ctx.profile.budgets.request_s,
    )
    return PhaseOutcome(section.status, section.failure)


def compare_replay_requests(
    spec: ParitySpec,
    baseline_id: str,
    baseline: list[ReplayRequest] | None,
    candidate_id: str,
    candidate: list[ReplayRequest] | None,
) -> ParityComparison:
    """The ``replay`` block of a comparison: the profile's parity rule over every paired request (``read_requests``
    of each side); the identical ones are counted, not listed."""
    for case_id, side in ((baseline_id, baseline), (candidate_id, candidate)):
        if not side:
            failure = f"case {case_id} recorded no replay requests"
            return ParityComparison(Status.SKIPPED, failure, 0, 0, None, mode=spec.mode, top_logprobs=spec.top_logprobs)
    sides = [baseline or [], candidate or []]
    keys = tuple(dict.fromkeys(pairing_key(r) for side in sides for r in side))
    as_parity = [[replace(r.output, prompt=pairing_key(r)) for r in side] or None for side in sides]
    compared = parity.compare_outputs(
        replace(spec, prompts=keys), baseline_id, as_parity[0], candidate_id, as_parity[1]
    )
    compared.prompts = [p for p in compared.prompts if p.outcome is not ParityVerdict.IDENTICAL]
    return compared


def compare_replay(
    profile: Profile, cmp: ComparisonPlan, base: CaseResults | None, cand: CaseResults | None, out_dir: Path
) -> ParityComparison:
    """The measure: each side's requests read back from its side file, compared by the profile's parity rule."""
    spec = parity_spec(profile)
    assert spec is not None  # the measure's needs
    sections: list[ReplayResult | None] = [case.section(SECTION) if case else None for case in (base, cand)]
    sides = [read_requests(out_dir, section) if section else None for section in sections]
    return compare_replay_requests(spec, cmp.baseline, sides[0], cmp.candidate, sides[1])


REPLAY = Phase(
    name=NAME,
    doc="rounds of concurrent requests at the CUDA-graph capture size, token ids recorded",
    workloads=(Workload(NAME, read=read_replay), Workload(parity.NAME)),
    needs=_needs_sections,
    budget=Budget("replay_s", 600.0),
    run=run_replay,
    # ``| None``: results written while replay was a field of every case and comparison hold ``"replay": null``
    sections=(ResultsSection(SECTION, ReplayResult | None),),
    measure=Measure(NAME, ResultsSection(SECTION, ParityComparison | None), compare_replay, needs=_needs_parity),
)
