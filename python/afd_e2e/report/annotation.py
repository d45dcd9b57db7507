"""The Buildkite annotation, ``annotation.md``: what a reviewer reads first.

Order: headline verdict (with a SMOKE banner for smoke_only profiles, and what did not finish for partial runs),
the per-case table (Correctness: each registered phase's columns), the phases' Features tables and their own
sections (the performance phase's tables per comparison with its plot, ``report/performance_report.py``), the other
case sections' (hygiene), environment, artifact links; then failure details, log tails and model output. Everything that comes from the model,
logs or the machine is escaped. Buildkite caps an annotation at 1 MiB: past that, the annotation is a summary
(the sections above the details) pointing at the full text, uploaded as ``annotation-full.md``.
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import quote

from afd_e2e import __version__
from afd_e2e.buildkite.env import job_id, step_key
from afd_e2e.plan.model import CasePlan
from afd_e2e.preflight.software import describe_software
from afd_e2e.report import formatting, section_renderers
from afd_e2e.report.escape import markdown_text, preformatted
from afd_e2e.report.section_renderers import AnnotationPart
from afd_e2e.report.status_icons import icon, status_cell
from afd_e2e.results import result_sections
from afd_e2e.results.model import LOG_TAIL_CHARS, CaseResults, GpuInfo, RunResults
from afd_e2e.results.status import Status

MAX_BYTES = 1024 * 1024
FULL_REPORT_FILE = "annotation-full.md"
MAX_REASONS = 20
HYGIENE_CHECKS = ("processes", "ports", "gpu_memory", "forced_kill", "leftover_files")
_HYGIENE_TITLES = {"gpu_memory": "GPU memory", "forced_kill": "Forced kill", "leftover_files": "Leftover files"}


@dataclass(frozen=True)
class Annotation:
    body: str  # what `buildkite-agent annotate` gets: at most MAX_BYTES
    full_body: str | None  # the complete text, when ``body`` had to be a summary
    style: str  # success | warning | error


@dataclass(frozen=True)
class _Section:
    title: str  # named in the summary when the section had to move to the full annotation
    text: str
    essential: bool  # kept in the summary that replaces an over-size annotation


def job_step(env: Mapping[str, str]) -> str | None:
    """The Buildkite step a job runs, by its key (a retry keeps it), else by the job id; None outside Buildkite."""
    return step_key(env) or job_id(env)


def annotation_context(profile: str | None, env: Mapping[str, str]) -> str:
    """The job's annotation context: the profile and the step (``job_step``), so two jobs of one profile in a build
    (a matrix over agent pools, a bisect step) keep an annotation each, and a retry of a keyed step replaces its own
    (a keyless step's retry has a new job id, so it adds one); outside Buildkite the profile alone."""
    step = job_step(env)
    parts = [profile or "unknown", *([step] if step else [])]
    return "afd-e2e-" + "-".join(re.sub(r"[^A-Za-z0-9._-]", "_", part) for part in parts)


def performance_warnings(results: RunResults) -> list[str]:
    """Every comparison measure's warnings (a worse metric or capacity under ``on_worse: warn``, a sweep cut short,
    a side measured in saturation): they turn a passed run's style to warning."""
    return [
        f"{comparison_id}: {warning}"
        for comparison_id, comparison in results.comparisons.items()
        for section in result_sections.measure_sections().values()
        for warning in result_sections.measure_warnings(comparison.section(section))
    ]


def annotation_style(results: RunResults) -> str:
    if results.status is Status.CRASHED or (not results.partial and results.verdict.status is Status.FAILED):
        return "error"
    if not results.partial and results.verdict.status is Status.PASSED and not performance_warnings(results):
        return "success"
    return "warning"


def artifact_link(path: str, text: str | None = None) -> str:
    """An HTML link Buildkite resolves to an artifact of this job (paths relative to the results folder)."""
    return f'<a href="artifact://{quote(path, safe="/._-")}">{markdown_text(text or path)}</a>'


def _label(case_id: str, case: CaseResults | CasePlan | None) -> str:
    label = case.label if case is not None else None
    return (
        f"{markdown_text(label)} (<code>{markdown_text(case_id)}</code>)"
        if label
        else f"<code>{markdown_text(case_id)}</code>"
    )


def _planned(results: RunResults, case_id: str) -> CasePlan | None:
    """The plan's record of a case (it has the label) for cases the results do not hold yet."""
    return next((c for c in results.plan.cases if c.id == case_id), None)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _case_order(results: RunResults) -> list[str]:
    """Plan order first (so cases that never started still show), then any others the results hold."""
    planned = [case.id for case in results.plan.cases]
    return planned + [case_id for case_id in results.cases if case_id not in planned]


# ---- headline -----------------------------------------------------------------------------------------------------


def _headline(results: RunResults) -> str:
    verdict = results.verdict
    if results.status is Status.RUNNING:
        headline_icon, word = "⚠️", "incomplete: the run stopped before its verdict (partial results)"
    elif results.status is Status.INTERRUPTED:
        headline_icon, word = "⚠️", "interrupted: the runner vanished before its verdict (partial results)"
    elif results.status is Status.CANCELLED:
        headline_icon, word = "⚠️", "cancelled (partial results)"
    elif results.status is Status.CRASHED:
        headline_icon, word = "❌", "crashed (partial results)"
    else:
        passed_icon = "⚠️" if performance_warnings(results) else "✅"
        headline_icon = {Status.PASSED: passed_icon, Status.FAILED: "❌"}.get(verdict.status, "⚠️")
        word = markdown_text(verdict.status)
    banner = "SMOKE " if results.smoke_only else ""
    lines = [f"## {headline_icon} {banner}afd-e2e {markdown_text(results.profile)}: {word}", ""]
    if results.smoke_only:
        lines += [
            "> **SMOKE profile**: it proves the harness end to end on a tiny model; its accuracy and performance "
            "numbers are not meaningful.",
            "",
        ]
    if results.interruption is not None:
        found = formatting.parse_time(results.interruption.found_at)
        when = formatting.clock(found) if found else markdown_text(results.interruption.found_at)
        lines += [f"> **Interrupted**: {markdown_text(results.interruption.how, 500)} (found {when}).", ""]
    if results.busy_gpus:
        busy = "; ".join(markdown_text(line, 300) for line in results.busy_gpus)
        lines += [
            f"> **Busy GPUs** (run with `--allow-busy-gpus`): {busy}. GPU memory hygiene compares against that "
            "baseline.",
            "",
        ]
    facts = [
        markdown_text(results.platform),
        _count(len(_case_order(results)), "case"),
        _count(len(results.plan.comparisons), "planned comparison")
        if results.partial and not results.comparisons
        else _count(len(results.comparisons), "comparison"),
    ]
    started, finished = formatting.parse_time(results.started_at), formatting.parse_time(results.finished_at)
    if started:
        facts.append(f"started {formatting.clock(started)}")
    if started and finished and finished >= started:
        facts.append(f"took {formatting.duration((finished - started).total_seconds())}")
    elif started and finished:  # never a negative duration: the record contradicts itself, and says so
        facts.append(
            f"⚠️ no duration: finished_at {markdown_text(results.finished_at)} is before started_at "
            f"{markdown_text(results.started_at)} (the clock went backwards, or the record is inconsistent)"
        )
    lines += [" · ".join(facts), ""]
    if results.partial:
        unfinished = [
            case_id for case_id, case in results.cases.items() if case.status in (Status.RUNNING, Status.INTERRUPTED)
        ]
        not_started = [case_id for case_id in _case_order(results) if case_id not in results.cases]
        for title, ids in (("Did not finish", unfinished), ("Not started", not_started)):
            if ids:
                names = ", ".join(f"<code>{markdown_text(i)}</code>" for i in ids[:MAX_REASONS])
                more = f" and {len(ids) - MAX_REASONS} more" if len(ids) > MAX_REASONS else ""
                lines += [f"{title}: {names}{more}", ""]
    reasons = verdict.reasons
    lines += [f"- ⚠️ {markdown_text(warning)}" for warning in performance_warnings(results)[:MAX_REASONS]]
    lines += [f"- {markdown_text(reason)}" for reason in reasons[:MAX_REASONS]]
    if len(reasons) > MAX_REASONS:
        lines.append(f"- … and {len(reasons) - MAX_REASONS} more (see results.json)")
    return "\n".join(lines).rstrip() + "\n"


# ---- preflight ----------------------------------------------------------------------------------------------------


def _preflight(results: RunResults) -> str:
    preflight = results.preflight
    if preflight is None:
        return ""
    counts: dict[Status, int] = {}
    for check in preflight.checks:
        counts[check.status] = counts.get(check.status, 0) + 1
    tally = " · ".join(f"{icon(status)} {count} {status}" for status, count in counts.items())
    seconds = f" in {preflight.seconds:.2f} s" if preflight.seconds is not None else ""
    lines = [f"**Preflight** {status_cell(preflight.status)}: {tally or 'no checks'}{seconds}"]
    notable = [check for check in preflight.checks if check.status is not Status.PASSED]
    if notable:  # the table lists these only: say so, and name the passed ones, so the tally and the table agree
        passed = [markdown_text(c.name) for c in preflight.checks if c.status is Status.PASSED]
        caption = f"Checks not passed ({len(notable)} of {len(preflight.checks)}"
        caption += f"; passed: {', '.join(passed)}):" if passed else "):"
        lines += ["", caption, "", "| Check | Status | Measured | Wanted | Fix |", "| --- | --- | --- | --- | --- |"]
        lines += [
            f"| {markdown_text(c.name)} | {status_cell(c.status)} "
            f"| {markdown_text(c.measured, 120)} | {markdown_text(c.wanted, 120)} "
            f"| {markdown_text(c.fix, 200)} |"
            for c in notable
        ]
    hardware = preflight.hardware
    if hardware is not None and len(hardware.gpus) > 1 and hardware.matrix:
        header, *rows = hardware.matrix
        lines += [
            "",
            "<details><summary>GPU links (NV# = bonded NVLinks; PIX/PXB/PHB/NODE/SYS = PCIe path)</summary>",
            "",
            "| " + " | ".join(markdown_text(cell) or " " for cell in header) + " |",
            "| --- |" + " --- |" * (len(header) - 1),
            *("| " + " | ".join(markdown_text(cell) for cell in row) + " |" for row in rows),
            "",
            "</details>",
        ]
    if preflight.software:
        lines += ["", f"Software: {markdown_text(describe_software(preflight.software))}"]
    return "\n".join(lines) + "\n"


# ---- correctness --------------------------------------------------------------------------------------------------


def _correctness(results: RunResults, parts: list[AnnotationPart]) -> str:
    """The per-case table: status and readiness, then the registered phases' and case sections' columns; then the
    phases' parts."""
    columns = list(section_renderers.case_columns())
    header = ["Case", "Status", "Ready after", *(c.header for c in columns)]
    rows = [
        "### Correctness",
        "",
        "| " + " | ".join(header) + " |",
        "| " + " | ".join(["---", "---", "---:", *(c.align for c in columns)]) + " |",
    ]
    for case_id in _case_order(results):
        case = results.case(case_id)
        if case is None:
            missing = " | ".join(["—"] * (1 + len(columns)))
            rows.append(f"| {_label(case_id, _planned(results, case_id))} | {status_cell(None)} | {missing} |")
            continue
        failure = markdown_text(case.failure, 120) if case.failure else ""
        cells = [
            _label(case_id, case),
            status_cell(case.status, failure),
            formatting.duration(case.timings.launch_to_ready_s),
            *(column.cell(results, case_id, case) for column in columns),
        ]
        rows.append("| " + " | ".join(cells) + " |")
    for part in parts:
        rows += ["", part.text]
    return "\n".join(rows) + "\n"


# ---- hygiene, environment, artifacts ------------------------------------------------------------------------------


def hygiene_section(results: RunResults, plots: Mapping[str, str]) -> list[AnnotationPart]:
    return [AnnotationPart(_hygiene(results), title="Hygiene")]


def _hygiene(results: RunResults) -> str:
    seen = {c.check for case in results.cases.values() for c in case.hygiene}
    checks = [*HYGIENE_CHECKS, *sorted(seen - set(HYGIENE_CHECKS))]
    titles = [markdown_text(_HYGIENE_TITLES.get(name, name.replace("_", " ").capitalize())) for name in checks]
    rows = ["### Hygiene", "", f"| Case | {' | '.join(titles)} |", "| --- |" + " --- |" * len(checks)]
    for case_id, agent in ((c, a) for c in _case_order(results) for a in _hygiene_agents(results.case(c))):
        case = results.case(case_id)
        by_check = {c.check: c for c in case.hygiene if c.agent == agent} if case else {}
        cells = []
        for name in checks:
            check = by_check.get(name)
            if check is None:
                cells.append(formatting.MISSING)
                continue
            detail = "" if check.status is Status.PASSED else f" {markdown_text(check.detail, 100)}"
            cells.append(f"{icon(check.status)}{detail}")
        where = f" on agent {markdown_text(agent)}" if agent else ""
        rows.append(f"| {_label(case_id, case or _planned(results, case_id))}{where} | {' | '.join(cells)} |")
    return "\n".join(rows) + "\n"


def _hygiene_agents(case: CaseResults | None) -> list[str]:
    """One hygiene row per agent that checked the case: the leader's ('') first, then each follower's."""
    return ["", *dict.fromkeys(c.agent for c in case.hygiene if c.agent)] if case else [""]


def _gpus(gpus: Sequence[GpuInfo]) -> str:
    groups: dict[tuple[str, int], int] = {}
    for gpu in gpus:
        key = (gpu.name, gpu.memory_total_mib)
        groups[key] = groups.get(key, 0) + 1
    return ", ".join(
        f"{count} × {markdown_text(name)} ({memory:,} MiB each)" for (name, memory), count in groups.items()
    )


def _size_text(gib: float | None) -> str:
    if gib is None:
        return ""
    return f"{gib:.1f} GiB" if gib >= 1 else f"{gib * 1024:.0f} MiB"


def _environment(results: RunResults) -> str:
    env = results.environment
    checkpoint = env.checkpoint
    checkpoint_text = " · ".join(
        part
        for part in (
            markdown_text(checkpoint.path if checkpoint else results.plan.model_path),
            markdown_text(", ".join(checkpoint.architectures) if checkpoint else ""),
            markdown_text(checkpoint.model_type or "" if checkpoint else ""),
            _size_text(checkpoint.size_gib if checkpoint else None),
        )
        if part
    )
    build = results.build
    build_text = ""
    if build is not None:
        number = f"#{build.build_number}" if build.build_number is not None else "build"
        url = build.build_url or ""
        link = f'<a href="{html.escape(url, quote=True)}">{number}</a>' if url.startswith("https://") else number
        parts = [link, markdown_text(build.pipeline_slug or ""), markdown_text(build.branch or "")]
        parts += [markdown_text((build.commit or "")[:12]), markdown_text(build.source or "")]
        build_text = " · ".join(part for part in parts if part)
    items = [
        ("Build", build_text),
        ("Agent", markdown_text(build.agent_name or "") if build else ""),
        ("GPUs", _gpus(env.gpus) or ("none (CPU)" if results.platform == "cpu" else "")),
        ("Driver", markdown_text(env.driver or "")),
        ("CUDA", markdown_text(env.cuda or "")),
        ("vLLM", markdown_text(env.vllm or "")),
        ("torch", markdown_text(env.torch or "")),
        ("Python", markdown_text(env.python or "")),
        ("Host", markdown_text(env.hostname or "")),
        ("Topology", markdown_text(env.topology or "", 500)),
        ("Devices", markdown_text(",".join(str(d) for d in results.plan.devices))),
        ("Checkpoint", checkpoint_text),
    ]
    lines = ["### Environment", ""] + [f"- **{name}**: {value}" for name, value in items if value]
    if env.hostname is None:
        lines.append("- not recorded (the run stopped before probing the environment)")
    return "\n".join(lines) + "\n"


def _artifacts(artifacts: Sequence[str]) -> str:
    if not artifacts:
        return ""
    return "### Artifacts\n\n" + "\n".join(f"- {artifact_link(path)}" for path in artifacts) + "\n"


# ---- details: failures, log tails, model output -------------------------------------------------------------------


def _failures(results: RunResults) -> str:
    blocks = []
    for case_id, case in results.cases.items():
        parts = [("case", case.status, case.failure)]
        parts += [
            (name, part.status, part.failure)
            for name in result_sections.written_sections()
            if (part := case.section(name)) is not None and hasattr(part, "failure")
        ]
        failures = [
            f"- {phase}: {markdown_text(failure, 1000)}"
            for phase, status, failure in parts
            if failure and status not in (Status.PASSED, Status.SKIPPED, Status.CANCELLED)
        ]
        if not failures and not case.log_tail:
            continue
        lines = [f"**{_label(case_id, case)}**", "", *failures]
        for process in case.processes:
            if process.exit_code not in (0, None) or process.forced_kill:
                forced = ", forced kill" if process.forced_kill else ""
                agent = f" on agent {markdown_text(process.agent)}" if process.agent else ""
                lines.append(
                    f"- process {markdown_text(process.name)}{agent} (pid {markdown_text(process.pid)}): "
                    f"exit code {markdown_text(process.exit_code)}{forced}"
                )
        if case.log_tail:
            logs = ", ".join(p.log for p in case.processes if p.log) or "logs/"
            tail = preformatted(case.log_tail, LOG_TAIL_CHARS, whole=logs)
            lines += ["", "<details><summary>log tail</summary>", "", tail, "", "</details>"]
        blocks.append("\n".join(lines))
    return "### Failures\n\n" + "\n\n".join(blocks) + "\n" if blocks else ""


def _model_output(results: RunResults) -> str:
    """Each case's block: the registered phases' lines of what the model said."""
    blocks = []
    for case_id, case in results.cases.items():
        lines = [
            line
            for report in section_renderers.PHASES.values()
            if report.model_output
            for line in report.model_output(case)
        ]
        if lines:
            blocks.append(
                f"<details><summary>{_label(case_id, case)}</summary>\n\n" + "\n".join(lines) + "\n\n</details>"
            )
    return "### Model output\n\n" + "\n\n".join(blocks) + "\n" if blocks else ""


# ---- assembly -----------------------------------------------------------------------------------------------------


def _sections(results: RunResults, plots: Mapping[str, str], artifacts: Sequence[str]) -> list[_Section]:
    """The headline and preflight; the per-case table with its parts and the Features tables; every other part
    of the registered phases, then of the other case sections; failures, environment, artifacts, model output."""
    phase_parts = [
        part
        for phase in section_renderers.PHASES.values()
        if phase.annotation
        for part in phase.annotation(results, plots)
    ]
    section_parts = [
        part
        for section in section_renderers.CASE_SECTIONS.values()
        if section.annotation
        for part in section.annotation(results, plots)
    ]
    features = [part.text for part in phase_parts if part.group == "Features"]
    sections = [
        _Section("Verdict", _headline(results), True),
        _Section("Preflight", _preflight(results), True),
        _Section("Correctness", _correctness(results, [p for p in phase_parts if p.group == "Correctness"]), True),
        _Section("Features", "### Features\n\n" + "\n\n".join(features) + "\n" if features else "", True),
    ]
    sections += [_Section(p.title, p.text, p.essential) for p in [*phase_parts, *section_parts] if p.group is None]
    sections += [
        _Section("Failures", _failures(results), False),
        _Section("Environment", _environment(results), True),
        _Section("Artifacts", _artifacts(artifacts), True),
        _Section("Model output", _model_output(results), False),
        _Section(
            "Footer",
            f"<sub>afd-e2e {__version__} · {markdown_text(results.schema)} · rendered from results.json</sub>\n",
            True,
        ),
    ]
    return [section for section in sections if section.text]


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def render_annotation(
    results: RunResults,
    *,
    plots: Mapping[str, str] | None = None,
    artifacts: Sequence[str] = (),
    max_bytes: int = MAX_BYTES,
) -> Annotation:
    """``plots``: comparison id -> PNG path and ``artifacts``: paths, both relative to the results folder."""
    sections = _sections(results, plots or {}, artifacts)
    full = "\n".join(section.text for section in sections)
    style = annotation_style(results)
    if _size(full) <= max_bytes:
        return Annotation(full, None, style)
    kept = [sections[0], *(s for s in sections[1:] if s.essential)]
    if _size("\n".join(s.text for s in kept)) > max_bytes - 4096:
        kept = sections[:1]  # so many cases that even the tables overflow: headline and pointer only
    moved = [s.title for s in sections if s not in kept]
    pointer = (
        f"> The full report is over Buildkite's {max_bytes:,}-byte annotation limit: this is its summary. "
        f"Moved to {artifact_link(FULL_REPORT_FILE)}: {markdown_text(', '.join(moved), 2000)}. "
        "Everything is also in results.json.\n"
    )
    summary = "\n".join([kept[0].text, pointer, *(s.text for s in kept[1:])])
    return Annotation(summary, full, style)
