"""The engine tier's shared run: tiny-cpu as shipped (cpu-tp1 and cpu-tp2, the tp1-vs-tp2 comparison) with every
phase a ready server serves, run once per session by the runner's own lifecycle (``execute_run``: admission,
launch, readiness, the phases, teardown, hygiene, reports). Tests that only need a ready real vLLM or a finished
run read its results folder instead of launching their own (``tests/engine/conftest.py``: ``tiny_cpu_run``).

Its bench also measures three named load shapes after tiny-cpu's own Poisson one (``SHAPES``: a burst with
burstiness < 1, a shared-prefix set and an overload), each with its own repetitions and verdicts, on the same
launches and warm bench client (``tests/engine/test_load_shapes_cpu_vllm.py`` and
``tests/engine/test_saturation_cpu_vllm.py`` judge them).

Beside the shipped phases (smoke, correctness, performance, capacity) each case runs ``warmup``, ``serving`` and
``replay``
(their workloads added here; the parity prompts are the parity test's, ``fixtures/parity/record_tiny_cpu.py``, so
cpu-tp1's parity records are that test's bf16 outputs), the throwaway ``echo`` phase registered (and rendered) from ``tests/throwaway_phase.py``, and on
cpu-tp1 tiny-cpu's ``soak`` (15 s: ``tests/engine/test_soak_cpu_vllm.py`` judges it) and a ``probe`` phase
registered from here: while the server is up it asks what the tests judge later against
the same server (the serving checks under a name the server does not serve, and lm-eval's own GSM8K when its venv
is installed), records what it saw in memory and passes, so the run's verdict is the shipped profile's.
"""

from __future__ import annotations

import dataclasses
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

import lm_eval_reference
from afd_e2e.phases import gsm8k, replay, serving
from afd_e2e.phases.registry import Budget, Phase
from afd_e2e.phases.replay import ReplaySpec
from afd_e2e.phases.serving import ServingSpec
from afd_e2e.plan import build_plan
from afd_e2e.plan.model import RunPlan
from afd_e2e.profile import Profile, load_profile, parse_profile
from afd_e2e.results.model import CaseResults, RunResults
from afd_e2e.results.status import Status
from afd_e2e.runner.dispatch import RUNS
from afd_e2e.system.progress import Progress
from afd_e2e.workloads import parity
from afd_e2e.workloads.context import PhaseContext, PhaseOutcome
from fixtures.parity.record_tiny_cpu import PROMPTS as PARITY_PROMPTS
from repo_paths import GSM8K_DIR, REPO

PORT_BASE = 19200  # the shared run's block: 19200 (cpu-tp1), 19220 (cpu-tp2)
WRONG_NAME = "tiny-cpu-renamed"
SHIPPED = load_profile("tiny-cpu")
# Load shapes measured after tiny-cpu's own (16 prompts at 8 req/s, Poisson, at most 4 in flight), 8 prompts each:
# the same rate in bursts (gamma gaps of shape 0.25: the same mean rate, far burstier), 2 shared prefixes of 32
# tokens each with 16 tokens of its own, and an overload: 1000 req/s served one at a time, far beyond what the tiny
# model serves (a 16-token answer takes 30-300 ms on these CPUs: 3-30 req/s), so the cap, not the arrivals, sets
# the pace (tests/engine/test_saturation_cpu_vllm.py judges it saturated and tiny-cpu's own shape not).
SHAPES = {
    "burst": {"burstiness": 0.25, "num_prompts": 8},
    "shared-prefix": {
        "dataset": "prefix_repetition",
        "prefix_len": 32,
        "suffix_len": 16,
        "num_prefixes": 2,
        "num_prompts": 8,
    },
    "overload": {"request_rate": 1000, "max_concurrency": 1, "num_prompts": 8},
}


def _with_shapes() -> Profile:
    """tiny-cpu as shipped with ``SHAPES`` under ``workloads.bench.shapes``, read by the profile reader."""
    data = yaml.safe_load((REPO / "python/afd_e2e/profiles/tiny-cpu.yaml").read_text(encoding="utf-8"))
    data["workloads"]["bench"]["shapes"] = SHAPES
    return parse_profile(data, "tiny-cpu.yaml with tests/shared_run.py's SHAPES")


_SHAPED = _with_shapes()
PROFILE = dataclasses.replace(
    _SHAPED,
    workloads={
        **_SHAPED.workloads,
        serving.NAME: ServingSpec(prompt="The capital of France is", max_tokens=6, concurrency=4),
        replay.NAME: ReplaySpec(rounds=2, batch=4),
        # the parity test's bf16 side
        parity.NAME: dataclasses.replace(parity.parity_spec(SHIPPED), prompts=PARITY_PROMPTS),
    },
)
PHASES = ("smoke", "warmup", "correctness", "performance", "capacity", "serving", "replay", "echo")


@dataclass
class Probed:
    """What the probe phase saw on cpu-tp1's live server."""

    wrong_name: CaseResults | None = None  # the serving checks' section, asked under WRONG_NAME
    wrong_name_outcome: PhaseOutcome | None = None
    lm_eval: list[dict[str, Any]] | None = None  # lm-eval's own per-question samples; None without lm-eval


class Lines(Progress):
    """The runner's progress printer, quiet, keeping each message (without its prefix) by case."""

    def __init__(self) -> None:
        super().__init__(stream=io.StringIO())
        self.by_case: dict[str, list[str]] = {}

    def __call__(self, message: str) -> None:
        self.by_case.setdefault(self.case_id, []).append(message)
        super().__call__(message)


def probe_phase(probed: Probed, model: Path, work: Path) -> Phase:
    """The ``probe`` phase: asks the live server what the tests judge, keeps it in ``probed``, and passes."""

    def run(ctx: PhaseContext) -> PhaseOutcome:
        renamed = dataclasses.replace(ctx.case, served_model_name=WRONG_NAME)
        wrong = dataclasses.replace(
            ctx,
            case=renamed,
            case_results=CaseResults(renamed.id, renamed.label, renamed.kind),
            flush=lambda: None,
        )
        probed.wrong_name_outcome = RUNS["serving"].run(wrong)
        probed.wrong_name = wrong.case_results
        if (python := lm_eval_reference.find_python(REPO)) is not None:
            spec = ctx.profile.workloads[gsm8k.NAME]
            probed.lm_eval = lm_eval_reference.run(
                python,
                base_url=ctx.case.base_url,
                model=ctx.case.served_model_name,
                tokenizer=str(model),
                dataset_dir=GSM8K_DIR,
                questions=spec.questions,
                shots=spec.shots,
                max_tokens=spec.max_tokens,
                concurrency=1,
                work_dir=work / "lm-eval",
                timeout_s=300,
            )
        return PhaseOutcome(Status.PASSED)

    return Phase(
        name="probe",
        doc="asks the live server what the engine tests judge later (tests/shared_run.py)",
        budget=Budget("probe_s", 600.0),
        run=run,
        sections=(),  # nothing for the reports: what it saw is the tests' to judge
    )


def shared_plan(model: Path) -> RunPlan:
    """Both cases with every phase above; cpu-tp1 also probed (call with ``echo`` and ``probe`` registered)."""
    plan = build_plan(PROFILE, model_path=str(model), port_base=PORT_BASE)
    cases = tuple(
        dataclasses.replace(case, phases=PHASES + (("soak", "probe") if case.id == "cpu-tp1" else ()))
        for case in plan.cases
    )
    return dataclasses.replace(plan, cases=cases)


@dataclass(frozen=True)
class SharedRun:
    """The finished shared run: its results folder, its results, what the probe saw, the progress lines by case,
    and the profile and plan it ran."""

    out: Path
    data: dict[str, Any]  # results.json as written
    results: RunResults  # what execute_run returned (typed)
    probed: Probed
    lines: dict[str, list[str]]
    plan: RunPlan
    profile: Any = PROFILE
