"""JUnit XML for Buildkite Test Engine and JUnit viewers, written to ``junit/<profile>-<n>.xml``.

Suites: ``afd-e2e.<profile>.preflight``, one ``.case.<id>`` per case (launch/readiness, then each registered phase's
testcases: the performance runs, ...; then each hygiene check), one ``.comparison.<id>`` per comparison (each
measure's: each performance metric, ...) and ``.run`` (the verdict). The phases' renderers are registered by
``afd_e2e.phases.rendering`` (the performance phase's in ``report/performance_report.py``); a phase that registers
none gets one testcase per section it writes. At most 5000 testcases per file, as Test Engine requires.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from afd_e2e.profile import catalogue
from afd_e2e.report import section_renderers
from afd_e2e.report.escape import cut_head, one_line, xml_text
from afd_e2e.results import result_sections
from afd_e2e.results.model import CaseResults, PreflightRecord, RunResults
from afd_e2e.results.status import Status

MAX_TESTCASES_PER_FILE = 5000
OUTPUT_CHARS = 64 * 1024  # the end of a log is what explains a failure; keep files small
_OUTCOME_TAGS = ("failure", "error", "skipped")


@dataclass(frozen=True)
class Testcase:
    """One ``<testcase>``: ``suite`` is its classname and its ``<testsuite>``'s name, the same text in both."""

    suite: str
    name: str
    seconds: float
    outcome: str | None = None  # failure | error | skipped; None when it passed
    message: str = ""
    output: str = ""  # the outcome element's text
    stdout: str = ""


@dataclass
class _Builder:
    """Collects testcases in report order; every testcase gets a classname (its suite), a name and a time."""

    prefix: str
    run_status: str
    items: list[Testcase] = field(default_factory=list)

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
        whole: str = "results.json",
    ) -> None:
        """``whole``: where the complete text of ``output`` lives, named when it has to be cut."""
        status = status or Status.RUNNING
        line = one_line(message) or one_line(f"{name}: {status}")
        bounded_output, bounded_stdout = _bounded(output, whole), _bounded(stdout, "results.json")
        outcome, text = None, ""
        if status is Status.FAILED:
            outcome, text = "failure", bounded_output or line
        elif status is Status.CRASHED:
            outcome, text = "error", bounded_output or line
        elif status in (Status.RUNNING, Status.INTERRUPTED):
            outcome, line, text = "error", f"did not finish (run status {self.run_status})", bounded_output
        elif status in (Status.SKIPPED, Status.CANCELLED):
            outcome, line = "skipped", one_line(message) or str(status)
        elif status is Status.WARNED:
            bounded_stdout = _bounded(f"warning: {line}\n{stdout}".strip(), "results.json")
        self.items.append(
            Testcase(
                suite=xml_text(f"{self.prefix}.{suite}"),
                name=xml_text(name),
                seconds=max(elapsed or 0.0, 0.0),
                outcome=outcome,
                message=line if outcome else "",
                output=text,
                stdout=bounded_stdout,
            )
        )

    def suite(self, suite: str, case: CaseResults | None = None) -> SuiteTestcases:
        return SuiteTestcases(self, suite, case.log_tail or "" if case else "", _logs(case) if case else "logs/")

    def reported_a_problem(self, suite: str) -> bool:
        classname = xml_text(f"{self.prefix}.{suite}")
        return any(item.suite == classname and item.outcome in ("failure", "error") for item in self.items)


@dataclass(frozen=True)
class SuiteTestcases:
    """What a phase's JUnit renderer adds to: one suite (a case's or a comparison's), and for a case the end of its
    failing log and where the whole logs are, for the testcases a failure explains."""

    builder: _Builder
    name: str
    log_tail: str = ""
    logs: str = "logs/"

    def add(self, name: str, status: Status | None, **details: object) -> None:
        """A testcase; ``details`` as ``_Builder.add`` takes them (message, output, stdout, elapsed, whole)."""
        self.builder.add(self.name, name, status, **details)  # type: ignore[arg-type]


def _bounded(value: object, whole: str) -> str:
    """Text for system-out or a failure body: its last OUTPUT_CHARS, saying what was cut and where the whole is."""
    return cut_head(xml_text(value), OUTPUT_CHARS, whole) if value else ""


def _logs(case: CaseResults) -> str:
    return ", ".join(process.log for process in case.processes if process.log) or "logs/"


def build_testcases(results: RunResults) -> list[Testcase]:
    """Preflight, then each case (its phases' testcases in phase order, then its other sections'), each comparison
    (its measures in phase order) and the verdict."""
    builder = _Builder(prefix=f"afd-e2e.{results.profile}", run_status=str(results.status))
    _add_preflight(builder, results.preflight)
    for case_id, case in results.cases.items():
        _add_case(builder.suite(f"case.{case_id}", case), case)
    for comparison_id, comparison in results.comparisons.items():
        suite = builder.suite(f"comparison.{comparison_id}")
        if (runners := comparison.model_runners) is not None:
            suite.add("model runners", runners.status, message=runners.text, stdout=runners.text)
        testcases = section_renderers.MEASURES
        for measure, name in result_sections.measure_sections().items():
            if (junit := testcases.get(measure)) is not None and (section := comparison.section(name)) is not None:
                junit(suite, comparison, section)
    _add_verdict(builder, results)
    return builder.items


def _add_preflight(builder: _Builder, preflight: PreflightRecord | None) -> None:
    for check in preflight.checks if preflight else []:
        detail = f"measured {check.measured}, wanted {check.wanted or 'anything'}"
        fix = f"; fix: {check.fix}" if check.fix else ""
        builder.add("preflight", check.name, check.status, message=detail + fix, stdout=detail)


def _add_case(suite: SuiteTestcases, case: CaseResults) -> None:
    ready_s = case.timings.launch_to_ready_s
    if ready_s is not None:
        suite.add("launch and readiness", Status.PASSED, elapsed=ready_s, stdout=f"ready after {ready_s:.1f} s")
    else:
        suite.add("launch and readiness", case.status, message=case.failure, output=suite.log_tail, whole=suite.logs)
    for phase in catalogue.phase_names():
        if (report := section_renderers.PHASES.get(phase)) is None:
            _section_testcases(suite, case, phase)
        elif report.junit is not None:
            report.junit(suite, case)
    if case.status.is_failure and not suite.builder.reported_a_problem(suite.name):
        # The case broke between phases (a harness error, say): no phase above carries it, so this testcase does.
        suite.add("case", case.status, message=case.failure, output=suite.log_tail, whole=suite.logs)
    for section in section_renderers.CASE_SECTIONS.values():
        if section.junit is not None:
            section.junit(suite, case)


def _section_testcases(suite: SuiteTestcases, case: CaseResults, phase: str) -> None:
    """A phase that registered no renderer: one testcase per section it wrote, from its status and failure."""
    for name in result_sections.phase_sections(phase):
        if isinstance(status := getattr(part := case.section(name), "status", None), Status):
            suite.add(name, status, message=getattr(part, "failure", None))


# ---- each phase's and section's testcases (registered by ``afd_e2e.phases.rendering``) ----------------------------


def hygiene_testcases(suite: SuiteTestcases, case: CaseResults) -> None:
    for check in case.hygiene:
        where = f" on agent {check.agent}" if check.agent else ""
        suite.add(f"hygiene {check.check}{where}", check.status, message=check.detail)


def _add_verdict(builder: _Builder, results: RunResults) -> None:
    reasons = "; ".join(results.verdict.reasons)
    status = results.status if results.partial else results.verdict.status
    builder.add("run", "verdict", status, message=reasons, stdout=reasons)


def _chunks(items: list[Testcase], size: int) -> Iterator[list[Testcase]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _counts(cases: list[Testcase]) -> dict[str, str]:
    return {
        "tests": str(len(cases)),
        "failures": str(sum(c.outcome == "failure" for c in cases)),
        "errors": str(sum(c.outcome == "error" for c in cases)),
        "skipped": str(sum(c.outcome == "skipped" for c in cases)),
        "time": f"{sum(c.seconds for c in cases):.3f}",
    }


def _testcase(parent: ET.Element, case: Testcase) -> None:
    element = ET.SubElement(
        parent, "testcase", {"classname": case.suite, "name": case.name, "time": f"{case.seconds:.3f}"}
    )
    if case.outcome:
        outcome = ET.SubElement(element, case.outcome, {"type": case.outcome, "message": case.message})
        outcome.text = case.output or None
    if case.stdout:
        ET.SubElement(element, "system-out").text = case.stdout


def testsuites_document(
    name: str, chunk: list[Testcase], properties: dict[str, str], *, timestamp: str | None, hostname: str | None
) -> bytes:
    """One file: consecutive testcases of one suite form one <testsuite>; a suite split across files is in each."""
    totals = {k: v for k, v in _counts(chunk).items() if k != "skipped"}  # the common XSD has no skipped up here
    root = ET.Element("testsuites", {"name": xml_text(name), **totals})
    groups: list[list[Testcase]] = []
    for case in chunk:
        if not groups or groups[-1][0].suite != case.suite:
            groups.append([])
        groups[-1].append(case)
    for group in groups:
        attributes = {"name": group[0].suite, **_counts(group)}
        if timestamp:
            attributes["timestamp"] = xml_text(timestamp)
        if hostname:
            attributes["hostname"] = xml_text(hostname)
        suite = ET.SubElement(root, "testsuite", attributes)
        listed = ET.SubElement(suite, "properties")
        for key, value in properties.items():
            ET.SubElement(listed, "property", {"name": key, "value": xml_text(value)})
        for case in group:
            _testcase(suite, case)
    ET.indent(root)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True) + b"\n"


def junit_document(chunk: list[Testcase], results: RunResults) -> bytes:
    properties = {
        "profile": results.profile,
        "platform": results.platform,
        "smoke_only": str(results.smoke_only).lower(),
    }
    return testsuites_document(
        f"afd-e2e {results.profile}",
        chunk,
        properties,
        timestamp=results.started_at,
        hostname=results.environment.hostname,
    )


def write_junit(results: RunResults, junit_dir: Path, per_file: int = MAX_TESTCASES_PER_FILE) -> tuple[Path, ...]:
    """Write the files, replacing any from an earlier render of the same folder."""
    junit_dir.mkdir(parents=True, exist_ok=True)
    for stale in junit_dir.glob("*.xml"):
        stale.unlink()
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", results.profile or "results")
    paths = []
    for number, chunk in enumerate(_chunks(build_testcases(results), per_file), 1):
        path = junit_dir / f"{stem}-{number}.xml"
        path.write_bytes(junit_document(chunk, results))
        paths.append(path)
    return tuple(paths)
