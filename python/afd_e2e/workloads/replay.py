"""Graph replay: rounds of concurrent requests at the capture batch size, compared across cases by the parity rule.

A CUDA-graph case decodes through graphs captured at one size; a single request replays them padded, a full batch
replays them as captured. Each round sends ``batch`` requests at once (the parity prompts, cycled), greedy, with
token ids; a comparison pairs the two cases' requests round by round and position by position.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from afd_e2e.profile import ParitySpec, ReplaySpec
from afd_e2e.workloads import parity


@dataclass
class ReplayOutput:
    round: int
    index: int  # position in the round's batch
    output: dict[str, Any]  # the request's parity output, collected exactly as the correctness phase does

    @property
    def key(self) -> str:
        """What pairs this request with the other case's: round, position and prompt."""
        return f"round {self.round} #{self.index}: {self.output['prompt']}"


@dataclass
class ReplayResult:
    status: str
    failure: str | None
    rounds: int
    batch: int
    answered: int = 0
    outputs: list[ReplayOutput] = field(default_factory=list)


def _one(base_url: str, model: str, spec: ParitySpec, number: int, index: int, prompt: str) -> ReplayOutput:
    """One request through parity's own collection (a one-prompt spec), so both phases record the same fields."""
    outputs = parity.collect_outputs(
        replace(spec, prompts=(prompt,)),
        base_url=base_url,
        model=model,
        publish=lambda _: None,
        progress=lambda _: None,
        cancelled=threading.Event(),
    )
    return ReplayOutput(round=number, index=index, output=outputs[0])


def run_replay(
    spec: ReplaySpec,
    prompts: ParitySpec,
    *,
    base_url: str,
    model: str,
    publish: Callable[[ReplayResult], None],
    progress: Callable[[str], None],
    cancelled: threading.Event,
) -> ReplayResult:
    """Every round's requests sent together; a request that fails fails the phase, naming the first error."""
    result = ReplayResult(status="running", failure=None, rounds=spec.rounds, batch=spec.batch)
    batch = [prompts.prompts[i % len(prompts.prompts)] for i in range(spec.batch)]
    with ThreadPoolExecutor(max_workers=spec.batch) as pool:
        for number in range(1, spec.rounds + 1):
            if cancelled.is_set():
                result.status, result.failure = "cancelled", "cancelled"
                publish(result)
                return result
            futures = [pool.submit(_one, base_url, model, prompts, number, i, p) for i, p in enumerate(batch)]
            result.outputs += [f.result() for f in futures]
            result.answered = sum(o.output["error"] is None for o in result.outputs)
            publish(result)
            progress(f"replay: round {number}/{spec.rounds}, {spec.batch} concurrent requests")
    errors = [o.output["error"] for o in result.outputs if o.output["error"]]
    if errors:
        result.status = "failed"
        result.failure = f"{len(errors)} of {len(result.outputs)} replay requests failed; {errors[0]}"
    else:
        result.status = "passed"
    publish(result)
    return result


def compare_replay(
    spec: ParitySpec,
    baseline_id: str,
    baseline: dict[str, Any] | None,
    candidate_id: str,
    candidate: dict[str, Any] | None,
) -> dict[str, Any]:
    """The ``replay`` block of a comparison: the profile's parity rule over every paired request."""
    sides = [[ReplayOutput(**o) for o in (section or {}).get("outputs") or []] for section in (baseline, candidate)]
    keys = list(dict.fromkeys(o.key for side in sides for o in side))
    as_parity = [[{**o.output, "prompt": o.key} for o in side] or None for side in sides]
    return parity.compare_outputs(
        replace(spec, prompts=tuple(keys)), baseline_id, as_parity[0], candidate_id, as_parity[1]
    )
