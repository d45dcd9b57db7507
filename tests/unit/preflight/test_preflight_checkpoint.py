"""Checkpoint checks on folders made here: good, wrong experts, nested text_config, key aliases, missing shard, bad
config, missing tokenizer, too small, and the children's hub-offline setting."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from preflight_fixtures import QWEN35_CONFIG

from afd_e2e.plan import build_plan
from afd_e2e.preflight.checkpoint import check_checkpoint
from afd_e2e.preflight.checks import FAIL, PASS, SKIP
from afd_e2e.profile import load_profile

SEED = load_profile("qwen3.5-122b-a10b")
SEED_PLAN = build_plan(SEED, model_path="/m")


def run(path, profile=SEED, plan=SEED_PLAN, **spec_changes):
    spec = replace(profile.model.checkpoint, **spec_changes)
    return {c.name: c for c in check_checkpoint(spec, str(path) if path else None, "AFD_GPU_E2E_MODEL", plan)}


def statuses(checks):
    return {name: c.status for name, c in checks.items()}


def test_a_good_qwen35_checkpoint_passes_with_experts_found_under_text_config(make_checkpoint):
    checks = run(make_checkpoint(shards=3), min_size_gib=0)
    assert set(statuses(checks).values()) == {PASS}, checks
    assert checks["checkpoint experts"].measured == "text_config.num_experts=256, text_config.num_experts_per_tok=8"
    assert checks["checkpoint model"].measured == (
        "architectures Qwen3_5MoeForConditionalGeneration; model_type qwen3_5_moe / qwen3_5_moe_text"
    )
    assert checks["checkpoint weights"].measured == "3 shards, all present"
    assert checks["tokenizer"].measured == "tokenizer.json"
    assert checks["hub offline"].measured == "HF_HUB_OFFLINE=1 on all 7 children"


@pytest.mark.parametrize(
    ("key", "profile_name", "config"),
    [
        # transformers 5 writes num_local_experts for Qwen3-MoE (the tiny model's config.json)
        (
            "num_local_experts",
            "tiny-cpu",
            {
                "architectures": ["Qwen3MoeForCausalLM"],
                "model_type": "qwen3_moe",
                "num_local_experts": 8,
                "num_experts_per_tok": 2,
            },
        ),
        # DeepSeek names them n_routed_experts
        (
            "n_routed_experts",
            "deepseek-v2-lite-2a2f",
            {
                "architectures": ["DeepseekV2ForCausalLM"],
                "model_type": "deepseek_v2",
                "n_routed_experts": 64,
                "num_experts_per_tok": 6,
            },
        ),
    ],
)
def test_expert_count_aliases_of_real_checkpoints(make_checkpoint, key, profile_name, config):
    profile = load_profile(profile_name)
    plan = build_plan(profile, model_path="/m")
    checks = run(make_checkpoint(config, shards=1), profile=profile, plan=plan, min_size_gib=0)
    assert checks["checkpoint experts"].status == PASS
    assert checks["checkpoint experts"].measured.startswith(f"{key}=")
    assert checks["checkpoint weights"].measured == "model.safetensors"


def test_a_wrong_expert_count_fails_showing_both(make_checkpoint):
    config = json.loads(json.dumps(QWEN35_CONFIG))
    config["text_config"]["num_experts"] = 128
    check = run(make_checkpoint(config), min_size_gib=0)["checkpoint experts"]
    assert check.status == FAIL
    assert check.measured == "text_config.num_experts=128, text_config.num_experts_per_tok=8"
    assert check.wanted == "256 experts, 8 per token"


def test_another_model_fails_the_model_check(make_checkpoint):
    config = {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}
    checks = run(make_checkpoint(config), min_size_gib=0)
    assert checks["checkpoint model"].status == FAIL
    assert checks["checkpoint experts"].status == FAIL
    assert checks["checkpoint experts"].measured.startswith("no num_experts / num_local_experts / n_routed_experts")


def test_a_missing_shard_fails_naming_it_and_skips_the_size(make_checkpoint):
    folder = make_checkpoint(shards=4)
    (folder / "model-00003-of-00004.safetensors").unlink()
    checks = run(folder, min_size_gib=0)
    assert checks["checkpoint weights"].status == FAIL
    assert checks["checkpoint weights"].measured == "1 of 4 shards missing: model-00003-of-00004.safetensors"
    assert checks["checkpoint size"].status == SKIP


@pytest.mark.parametrize(
    ("config", "measured"),
    [("{not json", "config.json unreadable: Expecting property name"), ("[1, 2]", "config.json holds a list")],
)
def test_an_unparsable_config_fails_and_skips_what_needs_it(make_checkpoint, config, measured):
    checks = run(make_checkpoint(config), min_size_gib=0)
    assert checks["checkpoint config"].status == FAIL
    assert checks["checkpoint config"].measured.startswith(measured)
    assert checks["checkpoint model"].status == SKIP and checks["checkpoint experts"].status == SKIP
    assert checks["checkpoint weights"].status == PASS


def test_an_unreadable_config_fails(make_checkpoint):
    folder = make_checkpoint()
    (folder / "config.json").unlink()
    (folder / "config.json").mkdir()  # reading it raises IsADirectoryError, even for root
    assert run(folder, min_size_gib=0)["checkpoint config"].measured.startswith("config.json unreadable")
    (folder / "config.json").rmdir()
    assert run(folder, min_size_gib=0)["checkpoint config"].measured == "config.json missing"


def test_no_tokenizer_fails_and_a_sentencepiece_one_passes(make_checkpoint):
    folder = make_checkpoint(tokenizer=False)
    assert run(folder, min_size_gib=0)["tokenizer"].status == FAIL
    (folder / "tokenizer.model").write_bytes(b"\0")
    assert run(folder, min_size_gib=0)["tokenizer"].measured == "tokenizer.model"


def test_size_below_the_profile_minimum_or_the_index_declaration_fails(make_checkpoint):
    folder = make_checkpoint(shards=2, shard_bytes=1024)
    assert run(folder, min_size_gib=200)["checkpoint size"].status == FAIL
    assert run(folder, min_size_gib=0)["checkpoint size"].status == PASS
    truncated = make_checkpoint(name="truncated", shards=2, shard_bytes=1024, declared_size=10_000)
    check = run(truncated, min_size_gib=0)["checkpoint size"]
    assert check.status == FAIL and "less than the" in check.measured


def test_no_path_or_a_missing_folder_fails_and_skips_the_rest(tmp_path):
    checks = run(None)
    assert checks["checkpoint folder"].status == FAIL
    assert checks["checkpoint folder"].fix == "set AFD_GPU_E2E_MODEL=/path/to/checkpoint or pass --model"
    assert {checks[n].status for n in checks if n not in ("checkpoint folder", "hub offline")} == {SKIP}
    assert run(tmp_path / "nope")["checkpoint folder"].measured.endswith("does not exist")
    (tmp_path / "file").write_text("x")
    assert run(tmp_path / "file")["checkpoint folder"].measured.endswith("is not a folder")


def test_a_profile_that_lets_children_reach_the_hub_fails(make_checkpoint):
    online = replace(SEED, engine=replace(SEED.engine, env_set={**SEED.engine.env_set, "HF_HUB_OFFLINE": "0"}))
    plan = build_plan(online, model_path="/m", case_ids=["baseline-eager"])
    check = run(make_checkpoint(), profile=online, plan=plan, min_size_gib=0)["hub offline"]
    assert check.status == FAIL and check.measured == "HF_HUB_OFFLINE not 1 for baseline-eager/server"
