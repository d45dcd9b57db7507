"""Where a run ran (the Buildkite build, job and agent) and what its processes got, secrets redacted by name."""

from __future__ import annotations

from afd_e2e.buildkite.env import describe_build
from afd_e2e.report.annotation import render_annotation
from afd_e2e.results.codec import to_json
from afd_e2e.results.model import BuildInfo
from afd_e2e.results.redaction import REDACTED, redact_argv, redact_env
from results_docs import load_fixture, typed

JOB_ENV = {
    "BUILDKITE": "true",
    "BUILDKITE_BUILD_NUMBER": "4242",
    "BUILDKITE_BUILD_ID": "0190-build",
    "BUILDKITE_BUILD_URL": "https://buildkite.com/vllm/afd-e2e/builds/4242",
    "BUILDKITE_JOB_ID": "0190-job",
    "BUILDKITE_PIPELINE_SLUG": "afd-e2e",
    "BUILDKITE_ORGANIZATION_SLUG": "vllm",
    "BUILDKITE_BRANCH": "main",
    "BUILDKITE_COMMIT": "0123456789abcdef0123456789abcdef01234567",
    "BUILDKITE_SOURCE": "schedule",
    "BUILDKITE_PULL_REQUEST": "false",
    "BUILDKITE_AGENT_NAME": "gpu-agent-7",
    "BUILDKITE_AGENT_META_DATA_QUEUE": "large-model",
    "BUILDKITE_AGENT_META_DATA_GPUS": "8",
    "BUILDKITE_AGENT_ACCESS_TOKEN": "not-for-results",
}


def test_the_build_job_and_agent_come_from_the_job_environment():
    assert describe_build(JOB_ENV) == BuildInfo(
        build_number=4242,
        build_id="0190-build",
        build_url="https://buildkite.com/vllm/afd-e2e/builds/4242",
        job_id="0190-job",
        pipeline_slug="afd-e2e",
        organization_slug="vllm",
        branch="main",
        commit="0123456789abcdef0123456789abcdef01234567",
        source="schedule",
        pull_request=None,
        agent_name="gpu-agent-7",
        agent_tags={"gpus": "8", "queue": "large-model"},
    )
    assert "not-for-results" not in str(to_json(describe_build(JOB_ENV)))
    assert describe_build({**JOB_ENV, "BUILDKITE_PULL_REQUEST": "17"}).pull_request == "17"


def test_outside_buildkite_there_is_no_build():
    assert describe_build({"HOME": "/root"}) is None


def test_the_annotation_names_the_build_and_agent():
    results = typed(load_fixture("seed"))
    results.build = describe_build(JOB_ENV)
    body = render_annotation(results).body
    assert (
        '- **Build**: <a href="https://buildkite.com/vllm/afd-e2e/builds/4242">#4242</a> · afd\\-e2e · main · 0123456789ab'
        in body
    )
    assert "- **Agent**: gpu\\-agent\\-7" in body


def test_secret_values_are_redacted_by_name_and_the_rest_kept():
    env = {"HF_TOKEN": "hf_x", "AWS_SECRET_ACCESS_KEY": "s", "OPENAI_API_KEY": "k", "DB_PASSWORD": "p", "PATH": "/bin"}
    assert redact_env(env) == {
        "AWS_SECRET_ACCESS_KEY": REDACTED,
        "DB_PASSWORD": REDACTED,
        "HF_TOKEN": REDACTED,
        "OPENAI_API_KEY": REDACTED,
        "PATH": "/bin",
    }
    argv = ["vllm", "serve", "/m", "--api-key", "k1", "--hf-token=t1", "--port", "8000"]
    assert redact_argv(argv) == [
        "vllm",
        "serve",
        "/m",
        "--api-key",
        REDACTED,
        f"--hf-token={REDACTED}",
        "--port",
        "8000",
    ]


def test_a_flag_or_variable_that_counts_tokens_is_kept():
    """Issue 42: the 12-06 H100 run recorded its DBO thresholds as redacted; a token is a name's last word."""
    argv = ["--dbo-decode-token-threshold=2", "--max-num-batched-tokens", "8192", "--tokenizer", "/t", "--token", "x"]
    assert redact_argv(argv) == [*argv[:5], "--token", REDACTED]
    env = {"VLLM_MAX_TOKENS_PER_BATCH": "8", "BUILDKITE_AGENT_ACCESS_TOKEN": "a", "GH_TOKEN": "g", "TOKEN": "t"}
    assert redact_env(env) == {
        "BUILDKITE_AGENT_ACCESS_TOKEN": REDACTED,
        "GH_TOKEN": REDACTED,
        "TOKEN": REDACTED,
        "VLLM_MAX_TOKENS_PER_BATCH": "8",
    }


def test_a_real_run_records_each_server_exactly_with_nothing_secret():
    results = typed(load_fixture("tiny-cpu"))
    server = results.cases["cpu-tp1"].processes[0]
    planned = results.plan.cases[0].processes[0]
    assert server.argv[1:] == list(planned.argv[1:]) and server.argv[0].endswith("vllm")
    assert {k: server.env[k] for k in planned.env_set} == planned.env_set
    assert server.env["AFD_E2E_CASE"] == "cpu-tp1" and server.log == "logs/cpu-tp1/server.log"
