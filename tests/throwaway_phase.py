"""A throwaway phase, defined and registered from here alone: it proves a phase needs no other file.

``echo`` asks the served API which models it serves and records them in its own results section (a type
``CaseResults`` does not declare), renders a JUnit testcase and an annotation section of its own. ``ECHO`` is what
the layers below the reports need (``registry.registered``); ``ECHO_REPORT`` what the reports show
(``rendering.rendered``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import requests

from afd_e2e.phases.registry import Budget, Phase, ResultsSection, Workload
from afd_e2e.profile import Profile
from afd_e2e.profile.reader import Reader
from afd_e2e.report.junit import SuiteTestcases
from afd_e2e.report.section_renderers import AnnotationPart, SectionReport
from afd_e2e.results.model import CaseResults, RunResults
from afd_e2e.results.status import Status
from afd_e2e.workloads.context import PhaseContext, PhaseOutcome


@dataclass(frozen=True)
class EchoSpec:
    """``workloads.echo``: the path that lists the served models."""

    path: str = "/v1/models"


def read_echo(r: Reader, profile: Profile) -> EchoSpec:
    spec = EchoSpec(path=r.get("path", str, EchoSpec.path))
    r.done()
    return spec


@dataclass
class EchoResult:
    """What ``/v1/models`` answered."""

    status: Status
    failure: str | None = None
    models: list[str] = field(default_factory=list)


def run_echo(ctx: PhaseContext) -> PhaseOutcome:
    section = EchoResult(Status.FAILED)
    spec = ctx.profile.workloads.get("echo", EchoSpec())
    try:
        response = requests.get(f"{ctx.case.base_url}{spec.path}", timeout=ctx.profile.budgets.request_s)
        section.models = [model["id"] for model in response.json()["data"]]
        section.status = Status.PASSED if ctx.case.served_model_name in section.models else Status.FAILED
        section.failure = None if section.status is Status.PASSED else f"{ctx.case.served_model_name} not served"
    except (requests.RequestException, ValueError, KeyError) as exc:
        section.failure = f"{spec.path}: {exc}"
    ctx.case_results.set_section("echo", section)
    ctx.flush()
    return PhaseOutcome(section.status, section.failure)


def echo_testcases(suite: SuiteTestcases, case: CaseResults) -> None:
    if (echo := case.section("echo")) is not None:
        suite.add("echo models", echo.status, message=echo.failure or ", ".join(echo.models))


def echo_annotation(results: RunResults, plots: Mapping[str, str]) -> list[AnnotationPart]:
    rows = [
        f"| {case_id} | {', '.join(echo.models)} |"
        for case_id, case in results.cases.items()
        if (echo := case.section("echo")) is not None
    ]
    if not rows:
        return []
    return [AnnotationPart("### Echo\n\n| Case | Served models |\n| --- | --- |\n" + "\n".join(rows) + "\n", "Echo")]


ECHO = Phase(
    name="echo",
    doc="asks the server which models it serves",
    workloads=(Workload("echo", read=read_echo),),
    budget=Budget("echo_s", 60.0),
    run=run_echo,
    sections=(ResultsSection("echo", EchoResult),),
)
ECHO_REPORT = SectionReport("echo", echo_testcases, echo_annotation)
