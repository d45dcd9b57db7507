"""JUnit XML for Buildkite Test Engine and JUnit viewers, written to ``junit/<profile>-<n>.xml``.

Suites: ``afd-e2e.<profile>.preflight``, one ``.case.<id>`` per case (launch/readiness, smoke, GSM8K aggregate and
per question, the performance runs, each hygiene check), one ``.comparison.<id>`` per comparison (parity, each
performance metric) and ``.run`` (the verdict). A GSM8K question answered wrongly fails only where the profile says
accuracy is meaningful; a performance metric fails only when it is worse and its profile says ``on_worse: fail``
(``warn`` passes with a warning). At most 5000 testcases per file, as Test Engine requires.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from junit_xml import TestCase, TestSuite, to_xml_report_string

from afd_e2e.report import formatting
from afd_e2e.report.escape import one_line, xml_text
from afd_e2e.results.model import (
    CaseResults,
    Comparison,
    Gsm8kResult,
    MetricComparison,
    PerformanceComparison,
    PreflightRecord,
    Repetition,
    RunResults,
)
from afd_e2e.results.status import Status, Verdict
from afd_e2e.workloads.parity import describe, parity_summary

MAX_TESTCASES_PER_FILE = 5000
LOG_TAIL_CHARS = 64 * 1024  # the end of a log is what explains a failure; keep files small


@dataclass
class _Recorded:
    suite: str
    case: TestCase


@dataclass
class _Builder:
    """Collects testcases in report order; every testcase gets a classname (its suite) and a name."""

    prefix: str
    run_status: str
    items: list[_Recorded] = field(default_factory=list)

    def add(
        self,
        suite: str,
        name: str,
        status: Status | None,
        *,
        message: object = "",
        output: object = "",
        stdout: object = "",
        elapsed: float | None = None,
    ) -> None:
        classname = f"{self.prefix}.{suite}"
        case = TestCase(xml_text(name), classname=xml_text(classname), elapsed_sec=elapsed, stdout=_bounded(stdout))
        status = status or Status.RUNNING
        line = one_line(message) or f"{name}: {status}"
        if status is Status.FAILED:
            case.add_failure_info(message=line, output=_bounded(output) or line)
        elif status is Status.CRASHED:
            case.add_error_info(message=line, output=_bounded(output) or line)
        elif status in (Status.RUNNING, Status.INTERRUPTED):
            case.add_error_info(message=f"did not finish (run status {self.run_status})", output=_bounded(output))
        elif status in (Status.SKIPPED, Status.CANCELLED):
            case.add_skipped_info(message=one_line(message) or str(status))
        elif status is Status.WARNED:
            case.stdout = _bounded(f"warning: {line}\n{stdout}".strip())
        self.items.append(_Recorded(classname, case))

    def reported_a_problem(self, suite: str) -> bool:
        classname = f"{self.prefix}.{suite}"
        return any(item.suite == classname and (item.case.failures or item.case.errors) for item in self.items)


def _bounded(value: object) -> str | None:
    text = xml_text(value) if value else ""
    return text[-LOG_TAIL_CHARS:] or None


def build_testcases(results: RunResults) -> list[_Recorded]:
    builder = _Builder(prefix=f"afd-e2e.{results.profile}", run_status=str(results.status))
    _add_preflight(builder, results.preflight)
    for case_id, case in results.cases.items():
        _add_case(builder, f"case.{case_id}", case)
    for comparison_id, comparison in results.comparisons.items():
        _add_comparison(builder, f"comparison.{comparison_id}", comparison)
    _add_verdict(builder, results)
    return builder.items


def _add_preflight(builder: _Builder, preflight: PreflightRecord | None) -> None:
    for check in preflight.checks if preflight else []:
        detail = f"measured {check.measured}, wanted {check.wanted or 'anything'}"
        fix = f"; fix: {check.fix}" if check.fix else ""
        builder.add("preflight", check.name, check.status, message=detail + fix, stdout=detail)


def _add_case(builder: _Builder, suite: str, case: CaseResults) -> None:
    log_tail = case.log_tail or ""
    ready_s = case.timings.launch_to_ready_s
    if ready_s is not None:
        builder.add(
            suite, "launch and readiness", Status.PASSED, elapsed=ready_s, stdout=f"ready after {ready_s:.1f} s"
        )
    else:
        builder.add(suite, "launch and readiness", case.status, message=case.failure, output=log_tail)

    if smoke := case.smoke:
        builder.add(
            suite,
            "smoke",
            smoke.status,
            message=smoke.failure,
            output=log_tail,
            stdout=f"prompt: {smoke.prompt}\ncompletion: {smoke.completion}",
            elapsed=smoke.latency_s,
        )

    if gsm8k := case.gsm8k:
        _add_gsm8k(builder, suite, gsm8k, log_tail, case.timings.phases.get("correctness"))

    if performance := case.performance:
        builder.add(
            suite,
            "performance runs",
            performance.status,
            message=performance.failure,
            output=log_tail,
            stdout="\n".join(_repetition_line(rep) for rep in performance.repetitions),
            elapsed=case.timings.phases.get("performance"),
        )

    if case.status.is_failure and not builder.reported_a_problem(suite):
        # The case broke between phases (a harness error, say): no phase above carries it, so this testcase does.
        builder.add(suite, "case", case.status, message=case.failure, output=log_tail)

    for check in case.hygiene:
        builder.add(suite, f"hygiene {check.check}", check.status, message=check.detail)


def _add_gsm8k(builder: _Builder, suite: str, gsm8k: Gsm8kResult, log_tail: str, elapsed: float | None) -> None:
    summary = (
        f"strict match {gsm8k.correct}/{gsm8k.total} (at least {gsm8k.min_correct} needed), "
        f"flexible {gsm8k.flexible_correct}"
    )
    builder.add(
        suite,
        "gsm8k strict match",
        gsm8k.status,
        message=gsm8k.failure or summary,
        output=log_tail,
        stdout=summary,
        elapsed=elapsed,
    )
    for question in gsm8k.questions:
        answer = f"extracted {question.extracted!r}, gold {question.gold!r}"
        if question.correct:
            status, note = Status.PASSED, answer
        elif gsm8k.accuracy_meaningful:
            status, note = Status.FAILED, answer
        else:
            status, note = Status.PASSED, f"incorrect, not counted (accuracy not meaningful for this profile): {answer}"
        builder.add(suite, f"gsm8k question {question.index}", status, message=answer, stdout=note)


def _repetition_line(rep: Repetition) -> str:
    return (
        f"repetition {rep.index}: {rep.status}, {rep.completed}/{rep.num_prompts} "
        f"completed, {rep.failed} failed, {formatting.duration(rep.duration_s)}"
        + (f" ({rep.failure})" if rep.failure else "")
    )


def _add_comparison(builder: _Builder, suite: str, comparison: Comparison) -> None:
    if parity := comparison.parity:
        message = parity.failure or parity_summary(parity)
        lines = "\n".join(describe(prompt, comparison.baseline, comparison.candidate) for prompt in parity.prompts)
        builder.add(suite, "parity", parity.status, message=message, stdout=lines)

    performance = comparison.performance
    if performance is None:
        return
    if not performance.metrics:  # nothing to compare: the gate's own status says why
        builder.add(suite, "performance", performance.status, message=performance.failure)
    for metric in performance.metrics:
        summary = _metric_line(comparison, metric, control=performance.control)
        status = _metric_status(metric, performance)
        builder.add(suite, f"performance {metric.key}", status, message=summary, stdout=summary)


def _metric_status(metric: MetricComparison, performance: PerformanceComparison) -> Status:
    """A metric's testcase fails only when it is worse and its profile says ``on_worse: fail``; ``warn`` passes
    with a warning; a control run's metrics are shown, never judged. (A failed side fails its case's testcase.)"""
    if performance.status is Status.SKIPPED:
        return Status.SKIPPED
    if performance.control or metric.verdict is not Verdict.WORSE:
        return Status.PASSED
    return {"fail": Status.FAILED, "warn": Status.WARNED}.get(metric.on_worse, Status.PASSED)


def _metric_line(comparison: Comparison, metric: MetricComparison, *, control: bool) -> str:
    baseline = formatting.measure(metric.baseline.mean, metric.baseline.std, metric.unit)
    candidate = formatting.measure(metric.candidate.mean, metric.candidate.std, metric.unit)
    return (
        f"{metric.name}: {comparison.baseline_label} {baseline}, {comparison.candidate_label} {candidate}, "
        f"delta {formatting.percent(metric.delta_pct)}, 95% CI {formatting.interval(metric.ci95_pct)}, "
        f"{metric.verdict}" + (" (control run, not headline evidence)" if control else "")
    )


def _add_verdict(builder: _Builder, results: RunResults) -> None:
    reasons = "; ".join(results.verdict.reasons)
    status = results.status if results.partial else results.verdict.status
    builder.add("run", "verdict", status, message=reasons, stdout=reasons)


def _chunks(items: list[_Recorded], size: int) -> Iterator[list[_Recorded]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _suites(chunk: list[_Recorded], results: RunResults) -> list[TestSuite]:
    """Consecutive testcases of one suite form one <testsuite>; a suite split across files appears in each."""
    properties = {"profile": results.profile, "platform": results.platform}
    properties["smoke_only"] = str(results.smoke_only).lower()
    hostname = results.environment.hostname
    suites: list[TestSuite] = []
    for item in chunk:
        if not suites or suites[-1].name != item.suite:
            suites.append(
                TestSuite(
                    item.suite,
                    [],
                    hostname=xml_text(hostname) if hostname else None,
                    timestamp=results.started_at,
                    properties={k: xml_text(v) for k, v in properties.items()},
                )
            )
        suites[-1].test_cases.append(item.case)
    return suites


def write_junit(results: RunResults, junit_dir: Path, per_file: int = MAX_TESTCASES_PER_FILE) -> tuple[Path, ...]:
    """Write the files, replacing any from an earlier render of the same folder."""
    junit_dir.mkdir(parents=True, exist_ok=True)
    for stale in junit_dir.glob("*.xml"):
        stale.unlink()
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", results.profile or "results")
    paths = []
    for number, chunk in enumerate(_chunks(build_testcases(results), per_file), 1):
        path = junit_dir / f"{stem}-{number}.xml"
        path.write_text(to_xml_report_string(_suites(chunk, results), encoding="utf-8"), encoding="utf-8")
        paths.append(path)
    return tuple(paths)
