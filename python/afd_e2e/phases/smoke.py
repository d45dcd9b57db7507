"""The ``smoke`` phase, defined in this one module: one greedy completion of a fixed prompt, proving the served model
answers at all. A failure ends the case: no later phase can tell anything of a server that does not answer.

Profile keys (docs/reference.md): ``workloads.smoke.prompt`` and ``workloads.smoke.max_tokens`` (both needed where
the section is given; without it, ``DEFAULT_PROMPT`` and ``DEFAULT_MAX_TOKENS``); ``budgets.smoke_s`` (default 300).
Other phases that send a plain completion default to this one's prompt and length: they read it through
``smoke_spec``. The case's ``smoke`` section is ``results/smoke_records.py``'s; the reports show it through
``report/smoke_report.py`` (its JUnit testcase, its column of the per-case table and its model output).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import requests

from afd_e2e.phases.registry import Budget, Phase, ResultsSection, Workload
from afd_e2e.profile import Profile
from afd_e2e.profile.reader import Reader
from afd_e2e.results.smoke_records import SECTION, SmokeResult
from afd_e2e.results.status import Status
from afd_e2e.workloads.context import PhaseContext, PhaseOutcome

NAME = "smoke"
DEFAULT_PROMPT = "The capital of France is"
DEFAULT_MAX_TOKENS = 16


@dataclass(frozen=True)
class SmokeSpec:
    """``workloads.smoke``: the prompt and how many tokens its completion may have."""

    prompt: str
    max_tokens: int


def read_smoke(r: Reader, profile: Profile) -> SmokeSpec:
    spec = SmokeSpec(prompt=r.get("prompt", str), max_tokens=r.positive_int("max_tokens"))
    r.done()
    return spec


def smoke_spec(profile: Profile) -> SmokeSpec:
    """The profile's ``workloads.smoke``, or the defaults when the profile has none: what the phase sends, and what
    the phases that send a plain completion of their own default to."""
    return profile.workloads.get(NAME) or SmokeSpec(DEFAULT_PROMPT, DEFAULT_MAX_TOKENS)


def smoke_completion(base_url: str, model: str, prompt: str, max_tokens: int, timeout_s: float) -> SmokeResult:
    """POST one greedy completion within ``timeout_s`` (the profile's ``budgets.request_s``); return the results
    ``smoke`` section (status ``passed`` or ``failed``)."""
    result = SmokeResult(Status.FAILED, prompt)
    payload = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
    started = time.monotonic()
    try:
        response = requests.post(f"{base_url}/v1/completions", json=payload, timeout=timeout_s)
    except requests.RequestException as exc:
        result.failure = f"completion request failed: {exc}"
        return result
    result.latency_s = round(time.monotonic() - started, 3)
    if response.status_code != 200:
        result.failure = f"HTTP {response.status_code} from /v1/completions: {response.text[:300]}"
        return result
    try:
        body = response.json()
        result.completion = body["choices"][0]["text"]
        result.completion_tokens = body.get("usage", {}).get("completion_tokens")
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        result.failure = f"unexpected completion response ({exc!r}): {response.text[:300]}"
        return result
    result.status = Status.PASSED
    return result


def run_smoke(ctx: PhaseContext) -> PhaseOutcome:
    spec = smoke_spec(ctx.profile)
    case = ctx.case
    result = smoke_completion(
        case.base_url, case.served_model_name, spec.prompt, spec.max_tokens, ctx.profile.budgets.request_s
    )
    ctx.record(SECTION, result)
    if result.status is Status.PASSED:
        ctx.progress(f"smoke: {result.completion!r} ({result.completion_tokens} tokens in {result.latency_s} s)")
    return PhaseOutcome(result.status, result.failure)


SMOKE = Phase(
    name=NAME,
    doc="one greedy completion of a fixed prompt: the served model answers at all (a failure ends the case)",
    workloads=(Workload(NAME, read=read_smoke),),
    budget=Budget("smoke_s", 300.0),
    run=run_smoke,
    ends_case=True,
    # ``| None``: results written while the smoke was a field of every case hold ``"smoke": null`` where it never ran
    sections=(ResultsSection(SECTION, SmokeResult | None),),
)
