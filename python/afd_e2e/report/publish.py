"""Publishing a rendered report. Inside Buildkite (``BUILDKITE=true``): ``buildkite-agent annotate`` with the body
on stdin (one annotation per job: ``annotation_context``), one line appended to the build's summary annotation (one
context for the whole build: every job's verdict with a link to its annotation; appended, so no job overwrites
another's), and ``buildkite-agent artifact upload`` per artifact glob, run from the results folder, then the optional
Test Engine upload. Elsewhere nothing leaves the machine. Every Buildkite-side failure is a warning, never an error:
publishing must not change a job's outcome.
"""

from __future__ import annotations

import html
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from afd_e2e.buildkite import env as buildkite_env
from afd_e2e.buildkite.test_engine_upload import BUDGET_S, TEST_ENGINE_URL, upload_junit
from afd_e2e.report.annotation import annotation_context, job_step
from afd_e2e.report.artifact_files import matching_globs
from afd_e2e.report.escape import markdown_text
from afd_e2e.report.render import ReportPaths
from afd_e2e.report.status_icons import icon

AGENT = "buildkite-agent"
AGENT_TIMEOUT_S = 600.0
SUMMARY_CONTEXT = "afd-e2e-summary"


def describe_report(paths: ReportPaths, env: Mapping[str, str]) -> list[str]:
    """The report's files, one line each, for people reading a terminal or a job log."""
    context = annotation_context(paths.profile, env)
    lines = [f"annotation: {paths.annotation} (style {paths.annotation_style}, context {context})"]
    if paths.annotation_full:
        lines.append(f"full annotation (over 1 MiB): {paths.annotation_full}")
    lines += [f"junit: {path}" for path in paths.junit]
    lines += [f"plot: {path}" for path in paths.plots]
    return lines


def _agent(what: str, args: Sequence[str], *, cwd: Path, body: str | None = None) -> str | None:
    """Run buildkite-agent with its output going to the job log; a warning naming ``what`` when it failed."""
    try:
        completed = subprocess.run(
            [AGENT, *args],
            cwd=cwd,
            input=body,
            stdin=subprocess.DEVNULL if body is None else None,
            text=True,
            timeout=AGENT_TIMEOUT_S,
            check=False,
        )
    except FileNotFoundError:
        return f"{AGENT} is not on PATH: {what} skipped"
    except subprocess.TimeoutExpired:
        return f"{AGENT} {what} did not finish within {AGENT_TIMEOUT_S:.0f} s"
    return f"{AGENT} {what} exited with code {completed.returncode}" if completed.returncode else None


def summary_line(paths: ReportPaths, env: Mapping[str, str]) -> str:
    """This job's line of the build's summary annotation: its verdict, profile and step, linked to its annotation
    (Buildkite's build page anchors each annotation as ``#annotation-<context>``)."""
    context = annotation_context(paths.profile, env)
    step = job_step(env) or "local"
    agent = buildkite_env.buildkite_agent(env) or "an agent"
    link = f'<a href="{html.escape(buildkite_env.build_url(env) or "")}#annotation-{context}">annotation</a>'
    return (
        f"- {icon(paths.verdict)} **{markdown_text(paths.verdict)}**: afd-e2e {markdown_text(paths.profile)}, "
        f"step <code>{markdown_text(step)}</code> on {markdown_text(agent)}: {link}\n"
    )


def publish(
    paths: ReportPaths,
    *,
    env: Mapping[str, str],
    test_engine_token_env: str | None = None,
    test_engine_url: str = TEST_ENGINE_URL,
    test_engine_budget_s: float = BUDGET_S,
) -> list[str]:
    """Annotate, upload artifacts and (when configured) JUnit to Test Engine; return the warnings."""
    if not buildkite_env.inside_buildkite(env):
        return [f"not inside a Buildkite job ({buildkite_env.BUILDKITE} is not 'true'): nothing published"]
    body = paths.annotation.read_text(encoding="utf-8")
    annotate = ["annotate", "--style", paths.annotation_style, "--context", annotation_context(paths.profile, env)]
    warnings = [_agent("annotate", annotate, cwd=paths.out_dir, body=body)]
    summary = ["annotate", "--style", "info", "--context", SUMMARY_CONTEXT, "--append"]
    warnings.append(_agent("annotate the build summary", summary, cwd=paths.out_dir, body=summary_line(paths, env)))
    warnings += [
        _agent(f"artifact upload {pattern}", ["artifact", "upload", pattern], cwd=paths.out_dir)
        for pattern in matching_globs(paths.out_dir)
    ]
    if test_engine_token_env:
        token = env.get(test_engine_token_env, "")
        if token:
            warnings += upload_junit(
                paths.junit, token=token, env=env, url=test_engine_url, budget_s=test_engine_budget_s
            )
        else:
            warnings.append(f"Test Engine upload skipped: ${test_engine_token_env} is empty or unset")
    return [warning for warning in warnings if warning]
