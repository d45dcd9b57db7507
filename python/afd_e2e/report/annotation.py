"""The Buildkite annotation, ``annotation.md``: what a reviewer reads first.

Order: headline verdict (with a SMOKE banner for smoke profiles, and what did not finish for partial runs),
correctness table, one performance table per comparison laid out like the seed PR's (with its plot), hygiene table,
environment, artifact links; then failure details, log tails and model output. Everything that comes from the model,
logs or the machine is escaped. Buildkite caps an annotation at 1 MiB: past that, the annotation is a summary
(the sections above the details) pointing at the full text, uploaded as ``annotation-full.md``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from afd_e2e import __version__
from afd_e2e.report import formatting
from afd_e2e.report.escape import markdown_text, preformatted
from afd_e2e.report.status import ICONS, Outcome, outcome, run_is_partial
from afd_e2e.workloads.parity import CLOSE, DIFFERENT, IDENTICAL, parity_prompts

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
    context: str  # stable per profile, so a re-run replaces the annotation


@dataclass(frozen=True)
class _Section:
    text: str
    essential: bool  # kept in the summary that replaces an over-size annotation


def annotation_context(profile: str | None) -> str:
    return "afd-e2e-" + re.sub(r"[^A-Za-z0-9._-]", "_", profile or "unknown")


def performance_warnings(results: dict[str, Any]) -> list[str]:
    """Warned metrics (worse, ``on_worse: warn``) of every comparison: they turn a passed run's style to warning."""
    return [
        f"{comparison_id}: {warning}"
        for comparison_id, comparison in (results.get("comparisons") or {}).items()
        for warning in (comparison.get("performance") or {}).get("warnings") or []
    ]


def annotation_style(results: dict[str, Any]) -> str:
    verdict = (results.get("verdict") or {}).get("status")
    if results.get("status") == "crashed" or (not run_is_partial(results) and verdict == "failed"):
        return "error"
    if not run_is_partial(results) and verdict == "passed" and not performance_warnings(results):
        return "success"
    return "warning"


def artifact_link(path: str, text: str | None = None) -> str:
    """An HTML link Buildkite resolves to an artifact of this job (paths relative to the results folder)."""
    return f'<a href="artifact://{quote(path, safe="/._-")}">{markdown_text(text or path)}</a>'


def _label(case_id: str, case: dict | None) -> str:
    label = (case or {}).get("label")
    return (
        f"{markdown_text(label)} (<code>{markdown_text(case_id)}</code>)"
        if label
        else f"<code>{markdown_text(case_id)}</code>"
    )


def _status_cell(status: str | None, detail: str = "") -> str:
    text = f"{ICONS[outcome(status)]} {markdown_text(status or 'not started')}"
    return f"{text}: {detail}" if detail else text


def _planned(results: dict, case_id: str) -> dict | None:
    """The plan's record of a case (it has the label) for cases the results do not hold yet."""
    return next((c for c in (results.get("plan") or {}).get("cases") or [] if c.get("id") == case_id), None)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


def _case_order(results: dict) -> list[str]:
    """Plan order first (so cases that never started still show), then any others the results hold."""
    planned = [case.get("id") for case in (results.get("plan") or {}).get("cases") or [] if case.get("id")]
    return planned + [case_id for case_id in results.get("cases") or {} if case_id not in planned]


# ---- headline -----------------------------------------------------------------------------------------------------


def _headline(results: dict) -> str:
    verdict = results.get("verdict") or {}
    run_status = results.get("status")
    if run_status in (None, "running"):
        icon, word = "⚠️", "incomplete: the run stopped before its verdict (partial results)"
    elif run_status == "cancelled":
        icon, word = "⚠️", "cancelled (partial results)"
    elif run_status == "crashed":
        icon, word = "❌", "crashed (partial results)"
    else:
        status = verdict.get("status")
        icon = {"passed": "⚠️" if performance_warnings(results) else "✅", "failed": "❌"}.get(status, "⚠️")
        word = markdown_text(status or "no verdict")
    smoke = "SMOKE " if results.get("smoke_only") else ""
    lines = [f"## {icon} {smoke}afd-e2e {markdown_text(results.get('profile'))}: {word}", ""]
    if results.get("smoke_only"):
        lines += [
            "> **SMOKE profile**: it proves the harness end to end on a tiny model; its accuracy and performance "
            "numbers are not meaningful.",
            "",
        ]
    cases = results.get("cases") or {}
    facts = [
        markdown_text(results.get("platform") or "unknown platform"),
        _count(len(_case_order(results)), "case"),
        _count(len(results.get("comparisons") or {}), "comparison"),
    ]
    started, finished = (
        formatting.parse_time(results.get("started_at")),
        formatting.parse_time(results.get("finished_at")),
    )
    if started:
        facts.append(f"started {formatting.clock(started)}")
    if started and finished:
        facts.append(f"took {formatting.duration((finished - started).total_seconds())}")
    lines += [" · ".join(facts), ""]
    if run_is_partial(results):
        unfinished = [case_id for case_id, case in cases.items() if outcome(case.get("status")) is Outcome.UNFINISHED]
        not_started = [case_id for case_id in _case_order(results) if case_id not in cases]
        for title, ids in (("Did not finish", unfinished), ("Not started", not_started)):
            if ids:
                names = ", ".join(f"<code>{markdown_text(i)}</code>" for i in ids[:MAX_REASONS])
                more = f" and {len(ids) - MAX_REASONS} more" if len(ids) > MAX_REASONS else ""
                lines += [f"{title}: {names}{more}", ""]
    reasons = [str(reason) for reason in verdict.get("reasons") or []]
    lines += [f"- ⚠️ {markdown_text(warning)}" for warning in performance_warnings(results)[:MAX_REASONS]]
    lines += [f"- {markdown_text(reason)}" for reason in reasons[:MAX_REASONS]]
    if len(reasons) > MAX_REASONS:
        lines.append(f"- … and {len(reasons) - MAX_REASONS} more (see results.json)")
    return "\n".join(lines).rstrip() + "\n"


# ---- preflight ----------------------------------------------------------------------------------------------------


def _preflight(results: dict) -> str:
    preflight = results.get("preflight")
    if not preflight:
        return ""
    checks = preflight.get("checks") or []
    counts: dict[Outcome, int] = {}
    for check in checks:
        counts[outcome(check.get("status"))] = counts.get(outcome(check.get("status")), 0) + 1
    tally = " · ".join(f"{ICONS[result]} {count} {result.value}" for result, count in counts.items())
    lines = [f"**Preflight** {_status_cell(preflight.get('status'))}: {tally or 'no checks'}"]
    notable = [check for check in checks if outcome(check.get("status")) is not Outcome.PASS]
    if notable:
        lines += ["", "| Check | Status | Measured | Wanted | Fix |", "| --- | --- | --- | --- | --- |"]
        lines += [
            f"| {markdown_text(c.get('name'))} | {_status_cell(c.get('status'))} "
            f"| {markdown_text(c.get('measured'), 120)} | {markdown_text(c.get('wanted'), 120)} "
            f"| {markdown_text(c.get('fix') or '', 200)} |"
            for c in notable
        ]
    return "\n".join(lines) + "\n"


# ---- correctness --------------------------------------------------------------------------------------------------


def _gsm8k_cell(gsm8k: dict | None) -> str:
    if not gsm8k:
        return formatting.MISSING
    result = outcome(gsm8k.get("status"))
    if gsm8k.get("total") is None:  # never scored: skipped, unfinished or broken
        return _status_cell(gsm8k.get("status"), markdown_text(gsm8k.get("failure") or "", 120))
    cell = f"{ICONS[result]} {markdown_text(gsm8k.get('correct'))}/{markdown_text(gsm8k.get('total'))}"
    if not gsm8k.get("accuracy_meaningful", True):
        cell += " (not meaningful)"
    elif result is Outcome.FAIL:
        cell += f" (at least {markdown_text(gsm8k.get('min_correct'))} needed)"
    return cell


def _parity_cell(case_id: str, comparisons: dict) -> str:
    cells = []
    for comparison in comparisons.values():
        parity = comparison.get("parity")
        if not parity or comparison.get("candidate") != case_id:
            continue
        result = outcome(parity.get("status"))
        if result in (Outcome.PASS, Outcome.FAIL):
            counts = [f"{markdown_text(parity.get('identical'))}/{markdown_text(parity.get('total'))} identical"]
            counts += [f"{markdown_text(parity[v])} {v}" for v in (CLOSE, DIFFERENT) if parity.get(v)]
            baseline = markdown_text(comparison.get("baseline_label") or comparison.get("baseline"))
            cells.append(f"{ICONS[result]} {', '.join(counts)} vs {baseline}")
        else:  # not compared: say why
            cells.append(_status_cell(parity.get("status"), markdown_text(parity.get("failure") or "", 120)))
    return "; ".join(cells) or formatting.MISSING


def _smoke_cell(smoke: dict | None) -> str:
    if not smoke:
        return formatting.MISSING
    if smoke.get("failure"):
        return _status_cell(smoke.get("status"), markdown_text(smoke["failure"], 120))
    latency = smoke.get("latency_s")
    tokens = markdown_text(smoke.get("completion_tokens"))
    timing = f"{tokens} tokens in {latency:.2f} s" if isinstance(latency, (int, float)) else ""
    return f"{ICONS[outcome(smoke.get('status'))]} {timing}".rstrip()


_PARITY_ICONS = {IDENTICAL: "✅", CLOSE: "🟰"}


def _token_cell(side: dict | None) -> str:
    """``188 ' the'`` with its logprob and the logprob it gave the other side's token."""
    if not side:
        return formatting.MISSING
    if side.get("token_id") is None:
        return "ended"
    cell = f"{markdown_text(side['token_id'])} <code>{markdown_text(repr(side.get('text')), 40)}</code>"
    mine = side.get("logprob")
    other = side.get("other_logprob")
    cell += f" ({mine:.4f}" if isinstance(mine, (int, float)) else " (not in top-k"
    cell += f"; other's {other:.4f})" if isinstance(other, (int, float)) else "; other's not in top-k)"
    return cell


def _parity_details(comparison_id: str, comparison: dict, prompts: list[dict]) -> str:
    """Per prompt: identical / close / different, where the outputs part and both tokens with logprobs."""
    baseline = markdown_text(comparison.get("baseline_label") or comparison.get("baseline"))
    candidate = markdown_text(comparison.get("candidate_label") or comparison.get("candidate"))
    rows = [
        f"| Prompt | Parity | First differing token | {baseline} | {candidate} |",
        "| --- | --- | ---: | --- | --- |",
    ]
    for p in prompts:
        icon = _PARITY_ICONS.get(p["verdict"], "❌")
        position = formatting.MISSING if p.get("position") is None else markdown_text(p["position"])
        rows.append(
            f"| {markdown_text(p.get('prompt'), 120)} | {icon} {markdown_text(p['verdict'])} | {position} "
            f"| {_token_cell(p.get('baseline'))} | {_token_cell(p.get('candidate'))} |"
        )
    parity = comparison.get("parity") or {}
    how = parity.get("mode")
    note = ""
    if how == "logprobs":
        note = (
            f"\n\nClose: at the first differing token each side's token is within the other's top-"
            f"{markdown_text(parity.get('top_logprobs'))} logprobs (a near-tie), as vLLM's own tests accept."
        )
    summary = f"Parity per prompt, <code>{markdown_text(comparison_id)}</code>: {_status_cell(parity.get('status'))}"
    opened = " open" if outcome(parity.get("status")) is Outcome.FAIL else ""
    return f"<details{opened}><summary>{summary}</summary>\n\n" + "\n".join(rows) + note + "\n\n</details>"


def _correctness(results: dict) -> str:
    cases, comparisons = results.get("cases") or {}, results.get("comparisons") or {}
    rows = [
        "### Correctness",
        "",
        "| Case | Status | Ready after | Smoke | GSM8K strict match | Parity |",
        "| --- | --- | ---: | --- | --- | --- |",
    ]
    for case_id in _case_order(results):
        case = cases.get(case_id)
        if case is None:
            rows.append(f"| {_label(case_id, _planned(results, case_id))} | {_status_cell(None)} | — | — | — | — |")
            continue
        failure = markdown_text(case["failure"], 120) if case.get("failure") else ""
        ready = formatting.duration((case.get("timings") or {}).get("launch_to_ready_s"))
        rows.append(
            f"| {_label(case_id, case)} | {_status_cell(case.get('status'), failure)} | {ready} "
            f"| {_smoke_cell(case.get('smoke'))} | {_gsm8k_cell(case.get('gsm8k'))} "
            f"| {_parity_cell(case_id, comparisons)} |"
        )
    for comparison_id, comparison in comparisons.items():
        if prompts := parity_prompts(comparison.get("parity") or {}):
            rows += ["", _parity_details(comparison_id, comparison, prompts)]
    return "\n".join(rows) + "\n"


# ---- performance --------------------------------------------------------------------------------------------------


def _repetitions_line(label: str, performance: dict | None) -> str:
    if not performance:
        return f"- {label}: no performance runs recorded"
    reps = performance.get("repetitions") or []
    passed = sum(outcome(rep.get("status")) is Outcome.PASS for rep in reps)
    completed = [f"{markdown_text(rep.get('completed'))}/{markdown_text(rep.get('num_prompts'))}" for rep in reps]
    if not completed:
        requests = "no requests recorded"
    elif len(set(completed)) == 1:
        requests = f"{completed[0]} requests completed each"
    else:
        requests = f"requests completed {', '.join(completed)}"
    failed = sum(rep.get("failed") or 0 for rep in reps if isinstance(rep.get("failed"), int))
    warmups = _count(len(performance.get("warmups") or []), "warmup")
    line = f"- {label}: {passed}/{len(reps)} repetitions passed after {warmups}; {requests}; {failed} failed requests"
    if performance.get("failure"):
        line += f"; {markdown_text(performance['failure'], 200)}"
    return line


def _metric_verdict(metric: dict, *, control: bool) -> str:
    """The verdict cell; a worse metric also says what its gate did (fail, warn or note)."""
    verdict = metric.get("verdict") or formatting.MISSING
    if verdict != "worse":
        return markdown_text(verdict)
    if control:
        return "**worse** (control, not judged)"
    on_worse = metric.get("on_worse") or "warn"
    return "**worse** " + {"fail": "❌ fails the gate", "warn": "⚠️ warning"}.get(on_worse, "(note)")


def _performance(results: dict, comparison_id: str, comparison: dict, plot: str | None) -> str:
    performance = comparison["performance"]
    baseline = markdown_text(comparison.get("baseline_label") or comparison.get("baseline"))
    candidate = markdown_text(comparison.get("candidate_label") or comparison.get("candidate"))
    lines = [f"### Performance: {candidate} vs {baseline} (<code>{markdown_text(comparison_id)}</code>)", ""]
    if performance.get("control"):
        lines += ["> **Control run** (forced routing changes outputs): not headline performance evidence.", ""]
    metrics = performance.get("metrics") or []
    if metrics:
        lines += [
            f"| Metric | {baseline} | {candidate} | Delta | 95% CI | Verdict |",
            "| --- | ---: | ---: | ---: | ---: | --- |",
        ]
        for metric in metrics:
            unit = markdown_text(metric.get("unit") or "")
            base, cand = metric.get("baseline") or {}, metric.get("candidate") or {}
            lines.append(
                f"| {markdown_text(metric.get('name') or metric.get('key'))} "
                f"| {formatting.measure(base.get('mean'), base.get('std'), unit)} "
                f"| {formatting.measure(cand.get('mean'), cand.get('std'), unit)} "
                f"| {formatting.percent(metric.get('delta_pct'))} | {formatting.interval(metric.get('ci95_pct'))} "
                f"| {_metric_verdict(metric, control=bool(performance.get('control')))} |"
            )
        lines += [
            "",
            "Mean ± sample standard deviation over the formal repetitions; delta and its 95% confidence interval "
            "are the candidate's relative to the baseline's mean.",
            "",
        ]
    for warning in performance.get("warnings") or []:
        lines += [f"⚠️ Performance warning: {markdown_text(warning)} (<code>on_worse: warn</code>)", ""]
    failure = markdown_text(performance.get("failure") or "", 300)
    if not metrics:
        lines += [f"No metrics: {_status_cell(performance.get('status'), failure)}", ""]
    elif outcome(performance.get("status")) is not Outcome.PASS:
        lines += [f"Performance gate: {_status_cell(performance.get('status'), failure)}", ""]
    cases = results.get("cases") or {}
    for side, label in ((comparison.get("baseline"), baseline), (comparison.get("candidate"), candidate)):
        lines.append(_repetitions_line(label, (cases.get(side) or {}).get("performance")))
    if plot:
        lines += ["", f'<img src="artifact://{quote(plot, safe="/._-")}" alt="{candidate} vs {baseline}">']
    return "\n".join(lines) + "\n"


# ---- hygiene, environment, artifacts ------------------------------------------------------------------------------


def _hygiene(results: dict) -> str:
    cases = results.get("cases") or {}
    extra = sorted({c.get("check") for case in cases.values() for c in case.get("hygiene") or []} - set(HYGIENE_CHECKS))
    checks = [*HYGIENE_CHECKS, *(str(name) for name in extra)]
    titles = [markdown_text(_HYGIENE_TITLES.get(name, name.replace("_", " ").capitalize())) for name in checks]
    rows = ["### Hygiene", "", f"| Case | {' | '.join(titles)} |", "| --- |" + " --- |" * len(checks)]
    for case_id in _case_order(results):
        by_check = {c.get("check"): c for c in (cases.get(case_id) or {}).get("hygiene") or []}
        cells = []
        for name in checks:
            check = by_check.get(name)
            if check is None:
                cells.append(formatting.MISSING)
                continue
            result = outcome(check.get("status"))
            detail = "" if result is Outcome.PASS else f" {markdown_text(check.get('detail') or '', 100)}"
            cells.append(f"{ICONS[result]}{detail}")
        rows.append(f"| {_label(case_id, cases.get(case_id) or _planned(results, case_id))} | {' | '.join(cells)} |")
    return "\n".join(rows) + "\n"


def _gpus(gpus: list[dict]) -> str:
    groups: dict[tuple, int] = {}
    for gpu in gpus:
        key = (gpu.get("name"), gpu.get("memory_total_mib"))
        groups[key] = groups.get(key, 0) + 1
    return ", ".join(
        f"{count} × {markdown_text(name)}" + (f" ({memory:,} MiB each)" if isinstance(memory, int) else "")
        for (name, memory), count in groups.items()
    )


def _size_text(gib: object) -> str:
    if not isinstance(gib, (int, float)):
        return ""
    return f"{gib:.1f} GiB" if gib >= 1 else f"{gib * 1024:.0f} MiB"


def _environment(results: dict) -> str:
    env = results.get("environment") or {}
    checkpoint = env.get("checkpoint") or {}
    plan = results.get("plan") or {}
    size = checkpoint.get("size_gib")
    checkpoint_text = " · ".join(
        part
        for part in (
            markdown_text(checkpoint.get("path") or plan.get("model_path") or ""),
            markdown_text(", ".join(checkpoint.get("architectures") or [])),
            markdown_text(checkpoint.get("model_type") or ""),
            _size_text(size),
        )
        if part
    )
    items = [
        ("GPUs", _gpus(env.get("gpus") or []) or ("none (CPU)" if results.get("platform") == "cpu" else "")),
        ("Driver", markdown_text(env.get("driver") or "")),
        ("CUDA", markdown_text(env.get("cuda") or "")),
        ("vLLM", markdown_text(env.get("vllm") or "")),
        ("torch", markdown_text(env.get("torch") or "")),
        ("Python", markdown_text(env.get("python") or "")),
        ("Host", markdown_text(env.get("hostname") or "")),
        ("Topology", markdown_text(env.get("topology") or "", 500)),
        ("Devices", markdown_text(",".join(str(d) for d in plan.get("devices") or []))),
        ("Checkpoint", checkpoint_text),
    ]
    lines = ["### Environment", ""] + [f"- **{name}**: {value}" for name, value in items if value]
    if not env:
        lines.append("- not recorded (the run stopped before probing the environment)")
    return "\n".join(lines) + "\n"


def _artifacts(artifacts: Sequence[str]) -> str:
    if not artifacts:
        return ""
    return "### Artifacts\n\n" + "\n".join(f"- {artifact_link(path)}" for path in artifacts) + "\n"


# ---- details: failures, log tails, model output -------------------------------------------------------------------


def _failures(results: dict) -> str:
    blocks = []
    for case_id, case in (results.get("cases") or {}).items():
        failures = [("case", case)] + [(phase, case.get(phase) or {}) for phase in ("smoke", "gsm8k", "performance")]
        failures = [
            f"- {phase}: {markdown_text(part['failure'], 1000)}"
            for phase, part in failures
            if part.get("failure") and outcome(part.get("status")) not in (Outcome.PASS, Outcome.SKIP)
        ]
        if not failures and not case.get("log_tail"):
            continue
        lines = [f"**{_label(case_id, case)}**", "", *failures]
        for process in case.get("processes") or []:
            if process.get("exit_code") not in (0, None) or process.get("forced_kill"):
                forced = ", forced kill" if process.get("forced_kill") else ""
                lines.append(
                    f"- process {markdown_text(process.get('name'))} (pid {markdown_text(process.get('pid'))}): "
                    f"exit code {markdown_text(process.get('exit_code'))}{forced}"
                )
        if case.get("log_tail"):
            lines += ["", "<details><summary>log tail</summary>", "", preformatted(case["log_tail"]), "", "</details>"]
        blocks.append("\n".join(lines))
    return "### Failures\n\n" + "\n\n".join(blocks) + "\n" if blocks else ""


def _model_output(results: dict) -> str:
    blocks = []
    for case_id, case in (results.get("cases") or {}).items():
        lines = []
        smoke = case.get("smoke") or {}
        if smoke.get("completion") is not None:
            lines += [
                f"Smoke prompt: {markdown_text(smoke.get('prompt'), 500)}  ",
                f"Completion: {markdown_text(smoke['completion'], 2000)}",
                "",
            ]
        questions = (case.get("gsm8k") or {}).get("questions") or []
        if questions:
            lines += [
                "| GSM8K question | Extracted | Flexible | Gold | Strict match |",
                "| ---: | --- | --- | --- | --- |",
            ]
            lines += [
                f"| {markdown_text(q.get('index'))} | {markdown_text(q.get('extracted'), 80)} "
                f"| {markdown_text(q.get('flexible'), 80)} | {markdown_text(q.get('gold'), 80)} "
                f"| {'✅' if q.get('correct') else '❌'} |"
                for q in questions
            ]
        if lines:
            blocks.append(
                f"<details><summary>{_label(case_id, case)}</summary>\n\n" + "\n".join(lines) + "\n\n</details>"
            )
    return "### Model output\n\n" + "\n\n".join(blocks) + "\n" if blocks else ""


# ---- assembly -----------------------------------------------------------------------------------------------------


def _sections(results: dict, plots: Mapping[str, str], artifacts: Sequence[str]) -> list[_Section]:
    sections = [
        _Section(_headline(results), True),
        _Section(_preflight(results), True),
        _Section(_correctness(results), True),
    ]
    for comparison_id, comparison in (results.get("comparisons") or {}).items():
        if comparison.get("performance"):
            sections.append(_Section(_performance(results, comparison_id, comparison, plots.get(comparison_id)), True))
    sections += [
        _Section(_hygiene(results), True),
        _Section(_failures(results), False),
        _Section(_environment(results), True),
        _Section(_artifacts(artifacts), True),
        _Section(_model_output(results), False),
        _Section(
            f"<sub>afd-e2e {__version__} · {markdown_text(results.get('schema'))} · rendered from results.json</sub>\n",
            True,
        ),
    ]
    return [section for section in sections if section.text]


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def render_annotation(
    results: dict[str, Any],
    *,
    plots: Mapping[str, str] | None = None,
    artifacts: Sequence[str] = (),
    max_bytes: int = MAX_BYTES,
) -> Annotation:
    """``plots``: comparison id -> PNG path and ``artifacts``: paths, both relative to the results folder."""
    sections = _sections(results, plots or {}, artifacts)
    full = "\n".join(section.text for section in sections)
    style, context = annotation_style(results), annotation_context(results.get("profile"))
    if _size(full) <= max_bytes:
        return Annotation(full, None, style, context)
    pointer = (
        f"> The full report is over Buildkite's {max_bytes:,}-byte annotation limit: this is its summary. "
        f"Read everything in {artifact_link(FULL_REPORT_FILE)} (and results.json).\n"
    )
    summary = "\n".join([sections[0].text, pointer, *(s.text for s in sections[1:] if s.essential)])
    if _size(summary) > max_bytes:  # so many cases that even the tables overflow: headline and pointer only
        summary = "\n".join([sections[0].text, pointer])
    return Annotation(summary, full, style, context)
