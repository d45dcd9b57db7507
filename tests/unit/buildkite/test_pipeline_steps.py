"""Typed steps -> the dicts Buildkite reads; rendering keeps every string literal through upload interpolation."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import yaml

from afd_e2e.pipeline.steps import (
    STEP_MARGIN,
    STEP_OVERHEAD_MINUTES,
    BlockStep,
    CommandStep,
    GroupStep,
    Pipeline,
    SelectField,
    SelectOption,
    render,
    step_timeout_minutes,
)
from afd_e2e.profile import catalogue, load_profile


def test_unset_fields_are_left_out_but_zero_stays():
    step = CommandStep(label="x", key="x", command="true", priority=0)
    assert step.to_dict() == {"label": "x", "key": "x", "command": "true", "priority": 0, "depends_on": None}


def test_dependencies_are_always_explicit():
    assert CommandStep(label="x", key="x", depends_on=("a", "b")).to_dict()["depends_on"] == ["a", "b"]
    assert BlockStep(block="b", key="b", prompt="p").to_dict()["depends_on"] is None
    assert "depends_on: null" in render(Pipeline((CommandStep(label="x", key="x"),)))


def test_concurrency_needs_its_group():
    with pytest.raises(ValueError, match="concurrency and concurrency_group go together"):
        CommandStep(label="x", key="x", concurrency=1)


def test_retry_is_only_on_agent_loss():
    step = CommandStep(label="x", key="x", retry_on_agent_lost=True)
    assert step.to_dict()["retry"] == {"automatic": [{"exit_status": -1, "limit": 1}]}


def test_plugins_render_as_a_list_of_single_key_maps():
    step = CommandStep(label="x", key="x", plugins={"org/afd-e2e#v1.2.3": {"profile": "p"}})
    assert step.to_dict()["plugins"] == [{"org/afd-e2e#v1.2.3": {"profile": "p"}}]


def test_block_with_a_multiple_select_field(valid_pipeline):
    field = SelectField(
        key="cases",
        select="Cases",
        options=(SelectOption("a: A", "a"), SelectOption("b: B", "b")),
        multiple=True,
        default=("a", "b"),
    )
    block = BlockStep(block="Run?", key="approve", prompt="Sure?", fields=(field,), allowed_teams=("gpu-team",))
    data = block.to_dict()
    assert data["fields"][0]["default"] == ["a", "b"]
    assert data["allowed_teams"] == ["gpu-team"]
    assert data["blocked_state"] == "passed"
    valid_pipeline(Pipeline((block,)).to_dict())


def test_render_writes_every_string_literally_for_an_upload_without_interpolation():
    step = CommandStep(label="cost $5", key="x", command="true", env={"MODEL": "/m/$x", "B": r"rel\${S}"})
    (out,) = yaml.safe_load(render(Pipeline((step,))))["steps"]
    assert out["label"] == "cost $5"
    assert out["env"] == {"MODEL": "/m/$x", "B": r"rel\${S}"}


def test_yaml_and_json_carry_the_same_pipeline():
    inner = CommandStep(label="a", key="a", command="printf 'one\\ntwo'\nexit 0")
    pipeline = Pipeline((GroupStep("g", "g", (inner,)),))
    assert yaml.safe_load(render(pipeline, "yaml")) == json.loads(render(pipeline, "json"))


def test_multi_line_strings_are_yaml_blocks():
    step = CommandStep(label="a", key="a", command="line one\nline two")
    assert "command: |-\n" in render(Pipeline((step,)))


def test_the_gpu_step_timeout_comes_from_the_profiles_budgets_unless_given():
    seed, tiny = load_profile("qwen3.5-122b-a10b"), load_profile("tiny-gpu-1a1f")
    seconds = sum(catalogue.case_budget_s(seed, case.phases) for case in seed.cases)
    assert step_timeout_minutes([seed]) == math.ceil(seconds * STEP_MARGIN / 60) + STEP_OVERHEAD_MINUTES
    assert step_timeout_minutes([seed, tiny]) > step_timeout_minutes([seed])
    longer = dataclasses.replace(seed, budgets=dataclasses.replace(seed.budgets, startup_s=2 * seed.budgets.startup_s))
    assert step_timeout_minutes([longer]) > step_timeout_minutes([seed])  # a bigger budget, a longer step
