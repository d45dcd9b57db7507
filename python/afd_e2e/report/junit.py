"""JUnit XML for Buildkite Test Engine and JUnit viewers, written to ``junit/<profile>-<n>.xml``.

Suites: ``afd-e2e.<profile>.preflight``, one ``.case.<id>`` per case (launch/readiness, smoke, GSM8K aggregate and
per question, the performance runs, each hygiene check), one ``.comparison.<id>`` per comparison (parity, the
performance gate, each performance metric) and ``.run`` (the verdict). A GSM8K question answered wrongly fails only
where the profile says accuracy is meaningful; a performance metric fails only when it is worse and its profile says
``on_worse: fail`` (``warn`` passes with a warning). At most 5000 testcases per file, as Test Engine requires.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from junit_xml import TestCase, TestSuite, to_xml_report_string

from afd_e2e.report import formatting
from afd_e2e.report.escape import one_line, xml_text
from afd_e2e.report.status import Outcome, outcome, run_is_partial
from afd_e2e.workloads.parity import describe, parity_prompts, parity_summary

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
        status: str | None,
        *,
        message: object = "",
        output: object = "",
        stdout: object = "",
        elapsed: float | None = None,
    ) -> None:
        classname = f"{self.prefix}.{suite}"
        case = TestCase(xml_text(name), classname=xml_text(classname), elapsed_sec=elapsed, stdout=_bounded(stdout))
        result = outcome(status)
        line = one_line(message) or f"{name}: {status}"
        if result is Outcome.FAIL:
            case.add_failure_info(message=line, output=_bounded(output) or line)
        elif result is Outcome.ERROR:
            case.add_error_info(message=line, output=_bounded(output) or line)
        elif result is Outcome.UNFINISHED:
            case.add_error_info(message=f"did not finish (run status {self.run_status})", output=_bounded(output))
        elif result is Outcome.SKIP:
            case.add_skipped_info(message=one_line(message) or str(status))
        elif result is Outcome.WARN:
            case.stdout = _bounded(f"warning: {line}\n{stdout}".strip())
        self.items.append(_Recorded(classname, case))

    def reported_a_problem(self, suite: str) -> bool:
        classname = f"{self.prefix}.{suite}"
        return any(item.suite == classname and (item.case.failures or item.case.errors) for item in self.items)


def _bounded(value: object) -> str | None:
    text = xml_text(value) if value else ""
    return text[-LOG_TAIL_CHARS:] or None


def build_testcases(results: dict[str, Any]) -> list[_Recorded]:
    profile = results.get("profile") or "unknown"
    builder = _Builder(prefix=f"afd-e2e.{profile}", run_status=str(results.get("status")))
    _add_preflight(builder, results.get("preflight"))
    for case_id, case in (results.get("cases") or {}).items():
        _add_case(builder, f"case.{case_id}", case)
    for comparison_id, comparison in (results.get("comparisons") or {}).items():
        _add_comparison(builder, f"comparison.{comparison_id}", comparison)
    _add_verdict(builder, results)
    return builder.items


def _add_preflight(builder: _Builder, preflight: dict | None) -> None:
    for check in (preflight or {}).get("checks") or []:
        detail = f"measured {check.get('measured')}, wanted {check.get('wanted')}"
        fix = f"; fix: {check['fix']}" if check.get("fix") else ""
        builder.add("preflight", str(check.get("name")), check.get("status"), message=detail + fix, stdout=detail)


def _add_case(builder: _Builder, suite: str, case: dict) -> None:
    log_tail = case.get("log_tail") or ""
    ready_s = (case.get("timings") or {}).get("launch_to_ready_s")
    if ready_s is not None:
        builder.add(suite, "launch and readiness", "passed", elapsed=ready_s, stdout=f"ready after {ready_s:.1f} s")
    else:
        builder.add(suite, "launch and readiness", case.get("status"), message=case.get("failure"), output=log_tail)

    if smoke := case.get("smoke"):
        stdout = f"prompt: {smoke.get('prompt')}\ncompletion: {smoke.get('completion')}"
        builder.add(
            suite,
            "smoke",
            smoke.get("status"),
            message=smoke.get("failure"),
            output=log_tail,
            stdout=stdout,
            elapsed=smoke.get("latency_s"),
        )

    if gsm8k := case.get("gsm8k"):
        _add_gsm8k(builder, suite, gsm8k, log_tail)

    if performance := case.get("performance"):
        reps = [_repetition_line(rep) for rep in performance.get("repetitions") or []]
        builder.add(
            suite,
            "performance runs",
            performance.get("status"),
            message=performance.get("failure"),
            output=log_tail,
            stdout="\n".join(reps),
        )

    if outcome(case.get("status")) in (Outcome.FAIL, Outcome.ERROR) and not builder.reported_a_problem(suite):
        # The case broke between phases (a harness error, say): no phase above carries it, so this testcase does.
        builder.add(suite, "case", case.get("status"), message=case.get("failure"), output=log_tail)

    for check in case.get("hygiene") or []:
        builder.add(suite, f"hygiene {check.get('check')}", check.get("status"), message=check.get("detail"))


def _add_gsm8k(builder: _Builder, suite: str, gsm8k: dict, log_tail: str) -> None:
    correct, total, needed = gsm8k.get("correct"), gsm8k.get("total"), gsm8k.get("min_correct")
    summary = f"strict match {correct}/{total} (at least {needed} needed), flexible {gsm8k.get('flexible_correct')}"
    builder.add(
        suite,
        "gsm8k strict match",
        gsm8k.get("status"),
        message=gsm8k.get("failure") or summary,
        output=log_tail,
        stdout=summary,
    )
    meaningful = gsm8k.get("accuracy_meaningful", True)
    for question in gsm8k.get("questions") or []:
        answer = f"extracted {question.get('extracted')!r}, gold {question.get('gold')!r}"
        if question.get("correct"):
            status, note = "passed", answer
        elif meaningful:
            status, note = "failed", answer
        else:
            status, note = "passed", f"incorrect, not counted (accuracy not meaningful for this profile): {answer}"
        builder.add(suite, f"gsm8k question {question.get('index')}", status, message=answer, stdout=note)


def _repetition_line(rep: dict) -> str:
    return (
        f"repetition {rep.get('index')}: {rep.get('status')}, {rep.get('completed')}/{rep.get('num_prompts')} "
        f"completed, {rep.get('failed')} failed, {formatting.duration(rep.get('duration_s'))}"
        + (f" ({rep['failure']})" if rep.get("failure") else "")
    )


def _add_comparison(builder: _Builder, suite: str, comparison: dict) -> None:
    if parity := comparison.get("parity"):
        baseline, candidate = comparison.get("baseline") or "baseline", comparison.get("candidate") or "candidate"
        lines = [describe(prompt, baseline, candidate) for prompt in parity_prompts(parity)]
        message = parity.get("failure") or parity_summary(parity)
        builder.add(suite, "parity", parity.get("status"), message=message, stdout="\n".join(lines))

    performance = comparison.get("performance")
    if not performance:
        return
    metrics = performance.get("metrics") or []
    if not metrics:  # nothing to compare: the gate's own status says why (a failed side carries it on its case)
        builder.add(suite, "performance", performance.get("status"), message=performance.get("failure"))
    control = bool(performance.get("control"))
    skipped = outcome(performance.get("status")) is Outcome.SKIP
    for metric in metrics:
        summary = _metric_line(comparison, metric, control=control)
        status = _metric_status(metric, control=control, skipped=skipped)
        builder.add(suite, f"performance {metric.get('key')}", status, message=summary, stdout=summary)


def _metric_status(metric: dict, *, control: bool, skipped: bool) -> str:
    """A metric's testcase fails only when it is worse and its profile says ``on_worse: fail``; ``warn`` passes
    with a warning; a control run's metrics are shown, never judged."""
    if skipped:
        return "skipped"
    if control or metric.get("verdict") != "worse":
        return "passed"
    return {"fail": "failed", "warn": "warn"}.get(metric.get("on_worse") or "warn", "passed")


def _metric_line(comparison: dict, metric: dict, *, control: bool) -> str:
    unit = metric.get("unit") or ""
    base, cand = metric.get("baseline") or {}, metric.get("candidate") or {}
    baseline = formatting.measure(base.get("mean"), base.get("std"), unit)
    candidate = formatting.measure(cand.get("mean"), cand.get("std"), unit)
    return (
        f"{metric.get('name')}: {comparison.get('baseline_label')} {baseline}, "
        f"{comparison.get('candidate_label')} {candidate}, "
        f"delta {formatting.percent(metric.get('delta_pct'))}, 95% CI {formatting.interval(metric.get('ci95_pct'))}, "
        f"{metric.get('verdict')}" + (" (control run, not headline evidence)" if control else "")
    )


def _add_verdict(builder: _Builder, results: dict) -> None:
    verdict = results.get("verdict") or {}
    reasons = "; ".join(str(reason) for reason in verdict.get("reasons") or [])
    status = results.get("status") if run_is_partial(results) else verdict.get("status")
    builder.add("run", "verdict", status, message=reasons, stdout=reasons)


def _chunks(items: list[_Recorded], size: int) -> Iterator[list[_Recorded]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _suites(chunk: list[_Recorded], results: dict) -> list[TestSuite]:
    """Consecutive testcases of one suite form one <testsuite>; a suite split across files appears in each."""
    properties = {"profile": results.get("profile"), "platform": results.get("platform")}
    properties["smoke_only"] = str(bool(results.get("smoke_only"))).lower()
    hostname = (results.get("environment") or {}).get("hostname")
    suites: list[TestSuite] = []
    for item in chunk:
        if not suites or suites[-1].name != item.suite:
            suites.append(
                TestSuite(
                    item.suite,
                    [],
                    hostname=xml_text(hostname) if hostname else None,
                    timestamp=results.get("started_at"),
                    properties={k: xml_text(v) for k, v in properties.items()},
                )
            )
        suites[-1].test_cases.append(item.case)
    return suites


def write_junit(results: dict[str, Any], junit_dir: Path, per_file: int = MAX_TESTCASES_PER_FILE) -> tuple[Path, ...]:
    """Write the files, replacing any from an earlier render of the same folder."""
    junit_dir.mkdir(parents=True, exist_ok=True)
    for stale in junit_dir.glob("*.xml"):
        stale.unlink()
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", str(results.get("profile") or "results"))
    paths = []
    for number, chunk in enumerate(_chunks(build_testcases(results), per_file), 1):
        path = junit_dir / f"{stem}-{number}.xml"
        path.write_text(to_xml_report_string(_suites(chunk, results), encoding="utf-8"), encoding="utf-8")
        paths.append(path)
    return tuple(paths)
