"""The ``serving`` phase, defined in this one module: what any OpenAI client relies on, asked of the case's API. A
completion comes back well formed; its usage counts match the token ids returned; a request for a model the server
does not serve is rejected with an HTTP client error; concurrent requests are all answered. Each check is recorded
whatever the others did, and is a JUnit testcase of its own.

Profile keys (docs/reference.md): ``workloads.serving.prompt`` and ``workloads.serving.max_tokens`` (default: the
smoke's, through ``smoke_spec``), ``workloads.serving.concurrency`` (default 4); ``budgets.serving_s`` (default 300).
A case lists the phase only in a profile that has ``workloads.serving``. The case's ``serving`` section is
``results/serving_records.py``'s; the reports show it through ``report/serving_report.py`` (a testcase per check and
the annotation's Features table).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import requests

from afd_e2e.phases.registry import Budget, Phase, ResultsSection, Workload
from afd_e2e.phases.smoke import smoke_spec
from afd_e2e.profile import Profile
from afd_e2e.profile.reader import Reader
from afd_e2e.results.model import CheckRecord
from afd_e2e.results.serving_records import SECTION, ServingResult
from afd_e2e.results.status import Status
from afd_e2e.workloads.context import PhaseContext, PhaseOutcome

NAME = "serving"
DEFAULT_CONCURRENCY = 4
UNKNOWN_MODEL = "afd-e2e-no-such-model"


@dataclass(frozen=True)
class ServingSpec:
    """``workloads.serving``: the completion the checks ask for, and how many requests go at once."""

    prompt: str
    max_tokens: int
    concurrency: int


def read_serving(r: Reader, profile: Profile) -> ServingSpec:
    smoke = smoke_spec(profile)
    spec = ServingSpec(
        prompt=r.get("prompt", str, smoke.prompt),
        max_tokens=r.positive_int("max_tokens", smoke.max_tokens),
        concurrency=r.positive_int("concurrency", DEFAULT_CONCURRENCY),
    )
    r.done()
    return spec


def _needs_section(profile: Profile) -> tuple[str, str] | None:
    """The checks run only where the profile asks for them: it has ``workloads.serving``."""
    if NAME in profile.workloads:
        return None
    return "serving phase without workloads.serving", "add workloads.serving"


class _Problem(Exception):
    """A check's failure, one line."""


def _post(base_url: str, payload: dict[str, Any], timeout_s: float) -> requests.Response:
    try:
        return requests.post(f"{base_url}/v1/completions", json=payload, timeout=timeout_s)
    except requests.RequestException as exc:
        raise _Problem(f"POST /v1/completions: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}") from exc


def _completion(base_url: str, payload: dict[str, Any], timeout_s: float) -> dict[str, Any]:
    response = _post(base_url, payload, timeout_s)
    if response.status_code != 200:
        raise _Problem(f"HTTP {response.status_code}: {' '.join(response.text.split())[:200]}")
    try:
        body = response.json()
        choice = body["choices"][0]
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise _Problem("the answer has no choices[0]") from exc
    if len(body["choices"]) != 1 or not isinstance(choice.get("text"), str) or not choice["text"]:
        raise _Problem(f"expected one choice with non-empty text, got {body['choices']!r:.200}")
    if choice.get("finish_reason") not in ("stop", "length"):
        raise _Problem(f"finish_reason {choice.get('finish_reason')!r}, expected stop or length")
    return body


def _check_completion(body: dict[str, Any]) -> str:
    choice = body["choices"][0]
    return f"{choice['text']!r:.120} (finish_reason {choice['finish_reason']})"


def _check_usage(body: dict[str, Any]) -> str:
    usage, choice = body.get("usage") or {}, body["choices"][0]
    prompt, completion, total = usage.get("prompt_tokens"), usage.get("completion_tokens"), usage.get("total_tokens")
    if not all(isinstance(n, int) and n > 0 for n in (prompt, completion)):
        raise _Problem(f"usage {usage!r}: prompt_tokens and completion_tokens must be positive")
    if total != prompt + completion:
        raise _Problem(f"total_tokens {total} != prompt_tokens {prompt} + completion_tokens {completion}")
    returned, prompt_ids = choice.get("token_ids"), choice.get("prompt_token_ids")
    if not isinstance(returned, list) or len(returned) != completion:
        got = len(returned) if isinstance(returned, list) else returned
        raise _Problem(f"completion_tokens {completion} but {got} token ids returned")
    if isinstance(prompt_ids, list) and len(prompt_ids) != prompt:
        raise _Problem(f"prompt_tokens {prompt} but {len(prompt_ids)} prompt token ids returned")
    return f"prompt {prompt} + completion {completion} = total {total}, matching the token ids returned"


def _check_unknown_model(base_url: str, spec: ServingSpec, timeout_s: float) -> str:
    response = _post(base_url, {"model": UNKNOWN_MODEL, "prompt": spec.prompt, "max_tokens": 1}, timeout_s)
    if not 400 <= response.status_code < 500:
        raise _Problem(f"model {UNKNOWN_MODEL!r} answered HTTP {response.status_code}, expected a 4xx rejection")
    return f"model {UNKNOWN_MODEL!r} rejected with HTTP {response.status_code}"


def _check_concurrent(base_url: str, payload: dict[str, Any], concurrency: int, timeout_s: float) -> str:
    def one(_: int) -> str | None:
        try:
            _completion(base_url, payload, timeout_s)
        except _Problem as exc:
            return str(exc)
        return None

    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        errors = [e for e in pool.map(one, range(concurrency)) if e]
    if errors:
        raise _Problem(f"{len(errors)} of {concurrency} concurrent requests failed; {errors[0]}")
    return f"{concurrency} concurrent requests all answered"


def run_serving_checks(
    spec: ServingSpec, *, base_url: str, model: str, progress: Callable[[str], None], request_timeout_s: float
) -> ServingResult:
    """The four checks, each recorded whatever the others did; each request given up after ``request_timeout_s``."""
    payload = {
        "model": model,
        "prompt": spec.prompt,
        "max_tokens": spec.max_tokens,
        "temperature": 0.0,
        "return_token_ids": True,
    }
    result = ServingResult(status=Status.RUNNING)
    body: dict[str, Any] | None = None

    def record(name: str, check: Callable[[], str]) -> None:
        try:
            result.checks.append(CheckRecord(name, Status.PASSED, check()))
        except _Problem as exc:
            result.checks.append(CheckRecord(name, Status.FAILED, str(exc)))
        progress(f"serving: {name} {result.checks[-1].status}: {result.checks[-1].detail}")

    def completion() -> str:
        nonlocal body
        body = _completion(base_url, payload, request_timeout_s)
        return _check_completion(body)

    def usage() -> str:
        if body is None:
            raise _Problem("no completion to read usage from (see the completion check)")
        return _check_usage(body)

    record("completion", completion)
    record("usage", usage)
    record("unknown_model", lambda: _check_unknown_model(base_url, spec, request_timeout_s))
    record("concurrent", lambda: _check_concurrent(base_url, payload, spec.concurrency, request_timeout_s))
    failed = [c for c in result.checks if c.status is Status.FAILED]
    result.status = Status.FAILED if failed else Status.PASSED
    result.failure = "; ".join(f"{c.check}: {c.detail}" for c in failed) or None
    return result


def run_serving(ctx: PhaseContext) -> PhaseOutcome:
    """The checks of ``workloads.serving`` against the case's API, recorded once all four are done."""
    section = run_serving_checks(
        ctx.profile.workloads[NAME],
        base_url=ctx.case.base_url,
        model=ctx.case.served_model_name,
        progress=ctx.progress,
        request_timeout_s=ctx.profile.budgets.request_s,
    )
    ctx.record(SECTION, section)
    return PhaseOutcome(section.status, section.failure)


SERVING = Phase(
    name=NAME,
    doc="the OpenAI API checks: a completion, its usage, an unknown model refused, concurrent requests",
    workloads=(Workload(NAME, read=read_serving),),
    needs=_needs_section,
    budget=Budget("serving_s", 300.0),
    run=run_serving,
    # ``| None``: results written while the serving checks were a field of every case hold ``"serving": null``
    sections=(ResultsSection(SECTION, ServingResult | None),),
)
