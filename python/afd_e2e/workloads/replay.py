"""Graph replay: rounds of concurrent requests at the capture batch size, compared across cases by the parity rule.

A CUDA-graph case decodes through graphs captured at one size; a single request replays them padded, a full batch
replays them as captured. Each round sends ``batch`` requests at once (the parity prompts, cycled), greedy, with
token ids; a comparison pairs the two cases' requests round by round and position by position.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace

from afd_e2e.profile import ParitySpec, ReplaySpec
from afd_e2e.results.model import ParityComparison, ReplayRequest, ReplayResult
from afd_e2e.results.status import Status
from afd_e2e.workloads import parity


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


def run_replay(
    spec: ReplaySpec,
    prompts: ParitySpec,
    *,
    base_url: str,
    model: str,
    publish: Callable[[ReplayResult], None],
    progress: Callable[[str], None],
    cancelled: threading.Event,
    request_timeout_s: float,
) -> ReplayResult:
    """Every round's requests sent together; a request that fails fails the phase, naming the first error."""
    result = ReplayResult(status=Status.RUNNING, failure=None, rounds=spec.rounds, batch=spec.batch)
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
            result.requests += [f.result() for f in futures]
            result.answered = sum(r.output.error is None for r in result.requests)
            publish(result)
            progress(f"replay: round {number}/{spec.rounds}, {spec.batch} concurrent requests")
    errors = [r.output.error for r in result.requests if r.output.error]
    if errors:
        result.status = Status.FAILED
        result.failure = f"{len(errors)} of {len(result.requests)} replay requests failed; {errors[0]}"
    else:
        result.status = Status.PASSED
    publish(result)
    return result


def compare_replay(
    spec: ParitySpec,
    baseline_id: str,
    baseline: ReplayResult | None,
    candidate_id: str,
    candidate: ReplayResult | None,
) -> ParityComparison:
    """The ``replay`` block of a comparison: the profile's parity rule over every paired request."""
    for case_id, side in ((baseline_id, baseline), (candidate_id, candidate)):
        if side is None or not side.requests:
            failure = f"case {case_id} recorded no replay requests"
            return ParityComparison(Status.SKIPPED, failure, 0, 0, None, mode=spec.mode, top_logprobs=spec.top_logprobs)
    sides = [side.requests if side else [] for side in (baseline, candidate)]
    keys = tuple(dict.fromkeys(pairing_key(r) for side in sides for r in side))
    as_parity = [[replace(r.output, prompt=pairing_key(r)) for r in side] or None for side in sides]
    return parity.compare_outputs(replace(spec, prompts=keys), baseline_id, as_parity[0], candidate_id, as_parity[1])
