"""What the reports show of a case's ``execution`` section: the per-case table's "Mode" cell (the verdict with a
tooltip-length reason), an "Execution mode" section (per role: asked, the engine's evidence, the counts per step
kind, the verdict) and a JUnit testcase per role."""

from __future__ import annotations

from collections.abc import Mapping

from afd_e2e.execution.judge import runner_name
from afd_e2e.report.escape import markdown_text
from afd_e2e.report.junit import SuiteTestcases
from afd_e2e.report.section_renderers import AnnotationPart
from afd_e2e.results.execution_records import SECTION, CaseExecution, RoleExecution
from afd_e2e.results.model import CaseResults, RunResults
from afd_e2e.results.status import Proof, Status

TOOLTIP_CHARS = 200
PROOF_ICONS = {Proof.PROVEN: "✅", Proof.UNPROVEN: "⚠️", Proof.CONTRADICTED: "❌"}


def _attribute(text: str) -> str:
    """Text safe inside a double-quoted HTML attribute, one line, at most TOOLTIP_CHARS."""
    line = " ".join(text.split())
    line = line if len(line) <= TOOLTIP_CHARS else line[: TOOLTIP_CHARS - 1] + "…"
    return line.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


def mode_cell(results: RunResults, case_id: str, case: CaseResults) -> str:
    section: CaseExecution | None = case.section(SECTION)
    if section is None:
        return "—"
    proof = section.proof
    modes = "/".join(dict.fromkeys(role.asked.mode for role in section.roles)) or "—"
    runners = "/".join(dict.fromkeys(runner_name(r.startup.model_runner if r.startup else None) for r in section.roles))
    why = "; ".join(f"{r.process}: {r.proof}, {r.reason}" for r in section.roles)
    shown = f"{modes} {proof}, model runner {runners}"
    return f'<span title="{_attribute(why)}">{PROOF_ICONS[proof]} {markdown_text(shown)}</span>'


def _row(case_id: str, role: RoleExecution) -> str:
    startup = role.startup
    shown = "<br>".join(f"<code>{markdown_text(line, 300)}</code>" for line in startup.lines) if startup else "no log"
    runtime = role.runtime
    if runtime is None:
        counts = "no trace"
    elif runtime.split:
        d, p = runtime.decode, runtime.prefill
        counts = (
            f"decode {d.steps} steps: {d.graph_launches} graph / {d.kernel_launches} kernel launches; "
            f"prefill {p.steps} steps: {p.graph_launches} graph / {p.kernel_launches} kernel launches"
        )
    else:
        t = runtime.total
        counts = f"{t.graph_launches} graph / {t.kernel_launches} kernel launches (steps not annotated)"
    verdict = f"{PROOF_ICONS[role.proof]} {role.proof}: {markdown_text(role.reason, 400)}"
    if role.would_prove:
        verdict += f" (would prove it: {markdown_text(role.would_prove)})"
    return (
        f"| <code>{markdown_text(case_id)}</code> | {markdown_text(role.process)} | {markdown_text(role.asked.text)} "
        f"| {shown} | {counts} | {verdict} |"
    )


def execution_section(results: RunResults, plots: Mapping[str, str]) -> list[AnnotationPart]:
    rows = [
        _row(case_id, role)
        for case_id, case in results.cases.items()
        if (section := case.section(SECTION)) is not None
        for role in section.roles
    ]
    if not rows:
        return []
    text = "\n".join(
        [
            "### Execution mode",
            "",
            "| Case | Role | Asked | Engine's start-up lines | Launches in the trace | Verdict |",
            "| --- | --- | --- | --- | --- | --- |",
            *rows,
        ]
    )
    return [AnnotationPart(text + "\n", title="Execution mode")]


def execution_testcases(suite: SuiteTestcases, case: CaseResults) -> None:
    section: CaseExecution | None = case.section(SECTION)
    if section is None:
        return
    for role in section.roles:
        if role.proof is Proof.CONTRADICTED or (role.proof is Proof.UNPROVEN and section.require_proof):
            status = Status.FAILED
        else:
            status = Status.WARNED if role.proof is Proof.UNPROVEN else Status.PASSED
        ran = runner_name(role.startup.model_runner if role.startup else None)
        line = f"asked {role.asked.text}: {role.proof}, {role.reason}; model runner: {ran}"
        if role.would_prove:
            line += f" (would prove it: {role.would_prove})"
        evidence = "\n".join(role.startup.lines) if role.startup else "no start-up log"
        suite.add(f"execution mode {role.process}", status, message=line, output=evidence, stdout=f"{line}\n{evidence}")
