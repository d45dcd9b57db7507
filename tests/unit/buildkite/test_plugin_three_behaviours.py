"""The three behaviours end to end: the generator's output, run by a fake agent through the plugin's real hooks, with
buildkite-agent, nvidia-smi and afd-e2e stubbed: nothing + why; block then run; nightly run."""

from __future__ import annotations

import pytest
import yaml
from bk_support import AGENTS_LIST, BUILD, REPO, FakeAgent, agent
from bk_support import QWEN_OPT_IN as OPT_IN

from afd_e2e.pipeline.decide import GATES_CLOSED, NO_AGENT

GPU_AGENT = agent("gpu-1", "queue=large-model", "gpus=8")
CPU_AGENT = agent("cpu-1", "queue=default")
# What the GPU agent runs before the verdict: the gates, the GPUs, the preflight.
PREPARED = [
    "afd-e2e gates --profile qwen3.5-122b-a10b",
    "nvidia-smi",
    "nvidia-smi topo -m",
    "afd-e2e preflight --profile qwen3.5-122b-a10b",
]


@pytest.fixture
def generate(pipeline_cli, agents_api, valid_pipeline):
    """The bootstrap step: ``afd-e2e pipeline --profile qwen3.5-122b-a10b`` under ``variables``, with ``agents`` up."""

    def run(variables: dict[str, str], agents: list[dict]) -> list[dict]:
        agents_api.serve(AGENTS_LIST, agents)
        code, out, err = pipeline_cli({**BUILD, **variables}, "--profile", "qwen3.5-122b-a10b")
        assert code == 0, err
        pipeline = yaml.safe_load(out)
        valid_pipeline(pipeline)
        (group,) = pipeline["steps"]
        return group["steps"]

    return run


@pytest.fixture
def gpu_agent(tmp_path):
    return FakeAgent(tmp_path / "gpu-agent")


@pytest.fixture
def light_agent(tmp_path):
    return FakeAgent(tmp_path / "light-agent", name="cpu-1")


@pytest.mark.parametrize(
    ("variables", "agents", "cause", "why"),
    [
        (
            {"BUILDKITE_SOURCE": "webhook", "BUILDKITE_PULL_REQUEST": "7"},
            [GPU_AGENT],
            GATES_CLOSED,
            "AFD_E2E_LARGE_MODEL is not set; set AFD_E2E_LARGE_MODEL=1 to opt in to large-model runs",
        ),
        (
            {"BUILDKITE_SOURCE": "schedule", **OPT_IN},
            [CPU_AGENT],
            NO_AGENT,
            "no connected agent has gpus=8, queue=large-model (1 connected agents checked)",
        ),
    ],
    ids=["gates closed", "no agent"],
)
def test_nothing_and_why(generate, light_agent, variables, agents, cause, why):
    (step,) = generate(variables, agents)
    assert "plugins" not in step and "agents" not in step

    assert light_agent.run_command(step) == 0

    (annotate,) = light_agent.calls()
    assert annotate.startswith("buildkite-agent annotate --style info --context afd-e2e-qwen3-5-122b-a10b-info ")
    assert "**afd-e2e qwen3.5-122b-a10b** is not run (" in annotate and f"): {cause}" in annotate
    assert why in annotate


def test_block_then_run(generate, gpu_agent):
    block, gpu = generate({"BUILDKITE_SOURCE": "ui", **OPT_IN}, [GPU_AGENT, CPU_AGENT])
    assert gpu["depends_on"] == [block["key"]]
    assert gpu["agents"] == {"queue": "large-model", "gpus": "8"}

    gpu_agent.unblock(block, ["afd-eager-4a4f", "baseline-eager"])
    (gpu_agent.build_dir / "afd-e2e-out").mkdir()
    (gpu_agent.build_dir / "afd-e2e-out" / "results.json").write_text("{}")  # what the (stubbed) run leaves
    statuses = gpu_agent.run_plugin(gpu, REPO)

    assert statuses == {"environment": 0, "pre-command": 0, "command": 0, "pre-exit": 0}
    assert gpu_agent.calls() == [
        *PREPARED,
        "buildkite-agent meta-data get afd-e2e-cases-qwen3-5-122b-a10b --default ",
        "afd-e2e run --profile qwen3.5-122b-a10b --out afd-e2e-out --case afd-eager-4a4f --case baseline-eager",
        "afd-e2e cleanup --out afd-e2e-out",
        "afd-e2e report afd-e2e-out --publish",
    ]


def test_nightly_run(generate, gpu_agent):
    (gpu,) = generate({"BUILDKITE_SOURCE": "schedule", **OPT_IN}, [GPU_AGENT])
    assert gpu["agents"] == {"queue": "large-model", "gpus": "8"}
    assert gpu["depends_on"] is None
    assert gpu["env"] == OPT_IN

    statuses = gpu_agent.run_plugin(gpu, REPO)

    assert statuses == {"environment": 0, "pre-command": 0, "command": 0, "pre-exit": 0}
    assert gpu_agent.calls() == [
        *PREPARED,
        "afd-e2e run --profile qwen3.5-122b-a10b --out afd-e2e-out",
        "afd-e2e cleanup --out afd-e2e-out",
    ]


def test_nightly_on_an_agent_whose_gates_are_closed_passes_with_the_reason(generate, gpu_agent):
    (gpu,) = generate({"BUILDKITE_SOURCE": "schedule", **OPT_IN}, [GPU_AGENT])
    gpu_agent.env |= {"STUB_AFD_E2E_GATES_EXIT": "3", "STUB_AFD_E2E_GATES_OUTPUT": "AFD_GPU_E2E_MODEL is missing"}

    statuses = gpu_agent.run_plugin(gpu, REPO)

    assert statuses == {"environment": 0, "pre-command": 0, "command": 0, "pre-exit": 0}
    gates, annotate = gpu_agent.calls()
    assert gates == PREPARED[0]
    assert annotate.startswith("buildkite-agent annotate --style info --context afd-e2e-job-1-gates ")
    assert "AFD_GPU_E2E_MODEL is missing" in annotate
