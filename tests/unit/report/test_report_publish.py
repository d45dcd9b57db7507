"""Unit tier: publishing: buildkite-agent calls (a recording stub on PATH), Test Engine uploads (a local HTTP server)
and their budget (read on an injected clock: a slow server is one held until the client gave up)."""

from __future__ import annotations

from pathlib import Path

import pytest

from afd_e2e.buildkite.test_engine_upload import upload_junit
from afd_e2e.cli import main
from afd_e2e.report import ReportPaths
from afd_e2e.report.annotation import annotation_context
from afd_e2e.report.publish import publish
from unit.timing import FakeClock

BUILDKITE_ENV = {
    "BUILDKITE": "true",
    "BUILDKITE_BUILD_ID": "0190-build",
    "BUILDKITE_BUILD_URL": "https://buildkite.com/org/afd/builds/7",
    "BUILDKITE_BRANCH": "main",
    "BUILDKITE_COMMIT": "934ccaf288eb2d40b0b5241af98df1dce31bee9f",
    "BUILDKITE_BUILD_NUMBER": "7",
    "BUILDKITE_JOB_ID": "0190-job",
    "BUILDKITE_MESSAGE": "nightly",
}
TOKEN = "bkua_secret_suite_token_123"


def test_inside_buildkite_annotates_and_uploads_from_the_results_folder(rendered: ReportPaths, agent_stub) -> None:
    paths = rendered
    assert publish(paths, env=BUILDKITE_ENV) == []
    annotate, summary, *uploads = agent_stub.calls
    assert annotate["argv"] == ["annotate", "--style", "warning", "--context", "afd-e2e-qwen3.5-122b-a10b-0190-job"]
    assert annotate["stdin"] == paths.annotation.read_text(encoding="utf-8")
    assert summary["argv"] == ["annotate", "--style", "info", "--context", "afd-e2e-summary", "--append"]
    assert [call["argv"] for call in uploads] == [
        ["artifact", "upload", pattern]
        for pattern in ("results.json", "annotation*.md", "junit/*.xml", "plots/*.png", "logs/**/*")  # what exists
    ]
    assert {call["cwd"] for call in agent_stub.calls} == {str(paths.out_dir)}


def test_outside_buildkite_nothing_is_published(rendered: ReportPaths, agent_stub) -> None:
    warnings = publish(rendered, env={"BUILDKITE": "false"})
    assert warnings == ["not inside a Buildkite job (BUILDKITE is not 'true'): nothing published"]
    assert agent_stub.calls == []


def test_agent_failures_are_warnings(rendered: ReportPaths, agent_stub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENT_STUB_EXIT", "3")
    warnings = publish(rendered, env=BUILDKITE_ENV)
    assert warnings[0] == "buildkite-agent annotate exited with code 3"
    assert "buildkite-agent artifact upload junit/*.xml exited with code 3" in warnings


def test_missing_agent_is_a_warning(rendered: ReportPaths, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    warnings = publish(rendered, env=BUILDKITE_ENV)
    assert warnings[0] == "buildkite-agent is not on PATH: annotate skipped"


def test_test_engine_gets_each_junit_file_with_run_env(
    rendered: ReportPaths, agent_stub, upload_server, capsys
) -> None:
    env = {**BUILDKITE_ENV, "SUITE_TOKEN": TOKEN}
    paths = rendered
    warnings = publish(paths, env=env, test_engine_token_env="SUITE_TOKEN", test_engine_url=upload_server.url)
    assert warnings == []
    (request,) = upload_server.requests
    assert request["path"] == "/v1/uploads"
    assert request["headers"]["Authorization"] == f'Token token="{TOKEN}"'
    assert request["headers"]["Content-Type"].startswith("multipart/form-data")
    body = request["body"]
    for name, value in [
        ("format", "junit"),
        ("run_env[CI]", "buildkite"),
        ("run_env[key]", "0190-build"),
        ("run_env[commit_sha]", BUILDKITE_ENV["BUILDKITE_COMMIT"]),
        ("run_env[job_id]", "0190-job"),
    ]:
        assert f'name="{name}"\r\n\r\n{value}\r\n'.encode() in body
    assert b'name="data"; filename="qwen3.5-122b-a10b-1.xml"' in body
    assert paths.junit[0].read_bytes() in body
    assert TOKEN not in capsys.readouterr().out


def test_a_failed_test_engine_upload_is_a_warning(rendered: ReportPaths, agent_stub, upload_server, capsys) -> None:
    """Within the default budget: the server's 500 is what is judged, however late a loaded machine reads it."""
    upload_server.status = 500
    env = {**BUILDKITE_ENV, "SUITE_TOKEN": TOKEN}
    warnings = publish(rendered, env=env, test_engine_token_env="SUITE_TOKEN", test_engine_url=upload_server.url)
    assert len(warnings) == 1 and "answered HTTP 500" in warnings[0]
    captured = capsys.readouterr()
    assert TOKEN not in warnings[0] + captured.out + captured.err


def junit_files(folder: Path, *names: str) -> list[Path]:
    for name in names:
        (folder / name).write_text("<testsuites/>\n", encoding="utf-8")
    return [folder / name for name in names]


def test_a_slow_test_engine_is_cut_off_by_the_budget(tmp_path: Path, upload_server) -> None:
    """The held server answers only once released, after the client gave up; the budget is read on a clock that does
    not move, so all of its 1 s is the request's timeout: a ReadTimeout warning, never a verdict on this machine's
    speed."""
    upload_server.held = True
    try:
        warnings = upload_junit(
            junit_files(tmp_path, "a.xml"),
            token=TOKEN,
            env=BUILDKITE_ENV,
            url=upload_server.url,
            budget_s=1.0,
            clock=FakeClock(),
        )
    finally:
        upload_server.release()
    assert len(warnings) == 1 and "ReadTimeout" in warnings[0] and TOKEN not in warnings[0]


def test_the_budget_bounds_all_the_uploads_together(tmp_path: Path, upload_server) -> None:
    """The first upload takes the whole budget (the server moves the test's clock past it as the file arrives): the
    second file is not sent."""
    clock = FakeClock()
    upload_server.on_post = lambda: clock.advance(30.0)
    warnings = upload_junit(
        junit_files(tmp_path, "a.xml", "b.xml"),
        token=TOKEN,
        env=BUILDKITE_ENV,
        url=upload_server.url,
        budget_s=30.0,
        clock=clock,
    )
    assert warnings == ["Test Engine upload stopped after its 30 s budget: b.xml not sent"]
    assert [b'filename="a.xml"' in request["body"] for request in upload_server.requests] == [True]


def test_unset_token_variable_skips_test_engine_with_a_warning(
    rendered: ReportPaths, agent_stub, upload_server
) -> None:
    warnings = publish(
        rendered, env=BUILDKITE_ENV, test_engine_token_env="SUITE_TOKEN", test_engine_url=upload_server.url
    )
    assert warnings == ["Test Engine upload skipped: $SUITE_TOKEN is empty or unset"]
    assert upload_server.requests == []


def test_report_command_publishes_inside_buildkite(seed_dir: Path, agent_stub, monkeypatch, capsys) -> None:
    for name, value in BUILDKITE_ENV.items():
        monkeypatch.setenv(name, value)
    assert main(["report", str(seed_dir), "--publish"]) == 0
    out = capsys.readouterr().out
    context = "afd-e2e-qwen3.5-122b-a10b-0190-job"
    assert f"annotation: {seed_dir / 'annotation.md'} (style warning, context {context})" in out
    assert [call["argv"][:2] for call in agent_stub.calls][:3] == [["annotate", "--style"]] * 2 + [
        ["artifact", "upload"]
    ]


def test_report_command_without_publish_only_prints_paths(seed_dir: Path, agent_stub, monkeypatch, capsys) -> None:
    monkeypatch.setenv("BUILDKITE", "true")
    assert main(["report", str(seed_dir)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1:] == [
        f"junit: {seed_dir / 'junit' / 'qwen3.5-122b-a10b-1.xml'}",
        f"plot: {seed_dir / 'plots' / 'performance.png'}",
    ]
    assert agent_stub.calls == []


def test_report_command_errors_are_one_line_and_never_echo_a_token(tmp_path: Path, capsys) -> None:
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert main(["report", str(tmp_path), "--test-engine-token-env", "SUITE_TOKEN"]) == 2
    assert "add --publish" in capsys.readouterr().err
    assert main(["report", str(tmp_path), "--publish", "--test-engine-token-env", TOKEN + "-x"]) == 2
    err = capsys.readouterr().err
    assert "not an environment variable name" in err and TOKEN not in err


def test_two_jobs_of_one_profile_keep_an_annotation_each_and_a_retry_replaces_its_own(
    rendered: ReportPaths, agent_stub
) -> None:
    """A matrix over agent pools (two step keys), then a retry of the first step (same key, new job id): three
    publishes, two job contexts; the summary context is one for the build and only ever appended to."""
    jobs = [
        {
            **BUILDKITE_ENV,
            "BUILDKITE_STEP_KEY": "gpu-pool-a",
            "BUILDKITE_JOB_ID": "job-1",
            "BUILDKITE_AGENT_NAME": "a1",
        },
        {
            **BUILDKITE_ENV,
            "BUILDKITE_STEP_KEY": "gpu-pool-b",
            "BUILDKITE_JOB_ID": "job-2",
            "BUILDKITE_AGENT_NAME": "b1",
        },
        {
            **BUILDKITE_ENV,
            "BUILDKITE_STEP_KEY": "gpu-pool-a",
            "BUILDKITE_JOB_ID": "job-3",
            "BUILDKITE_AGENT_NAME": "a2",
        },
    ]
    for env in jobs:
        assert publish(rendered, env=env) == []
    annotations = [c["argv"] for c in agent_stub.calls if c["argv"][0] == "annotate"]
    contexts = [argv[argv.index("--context") + 1] for argv in annotations]
    assert contexts == [
        "afd-e2e-qwen3.5-122b-a10b-gpu-pool-a",
        "afd-e2e-summary",
        "afd-e2e-qwen3.5-122b-a10b-gpu-pool-b",
        "afd-e2e-summary",
        "afd-e2e-qwen3.5-122b-a10b-gpu-pool-a",  # the retry: the same context, so it replaces the first job's
        "afd-e2e-summary",
    ]
    assert all("--append" in argv for argv in annotations if "afd-e2e-summary" in argv)
    assert not any("--append" in argv for argv in annotations if "afd-e2e-summary" not in argv)
    lines = [c["stdin"] for c in agent_stub.calls if "afd-e2e-summary" in c["argv"]]
    assert lines[1] == (
        "- ✅ **passed**: afd-e2e qwen3\\.5\\-122b\\-a10b, step <code>gpu\\-pool\\-b</code> on b1: "
        '<a href="https://buildkite.com/org/afd/builds/7#annotation-afd-e2e-qwen3.5-122b-a10b-gpu-pool-b">annotation</a>\n'
    )


def test_a_step_without_a_key_is_named_by_its_job_and_outside_buildkite_by_the_profile_alone() -> None:
    assert annotation_context("tiny-cpu", {"BUILDKITE_JOB_ID": "0190-abc"}) == "afd-e2e-tiny-cpu-0190-abc"
    assert annotation_context("tiny-cpu", {"BUILDKITE_JOB_ID": "j", "BUILDKITE_STEP_KEY": "k"}) == "afd-e2e-tiny-cpu-k"
    assert annotation_context("a b/c", {}) == "afd-e2e-a_b_c"
