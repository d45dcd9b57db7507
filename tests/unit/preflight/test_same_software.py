"""Same software on every agent of a multi-agent case: identities from the real software probe and checkpoint
folders, published as meta-data text, compared field by field; a mismatch fails naming both sides.

Unit tier; the identity built from the real software probe is in tests/engine/test_software_probe_cpu_vllm.py."""

from __future__ import annotations

import dataclasses
import json

import pytest
from preflight_fixtures import QWEN35_CONFIG

from afd_e2e.errors import UsageError
from afd_e2e.multi_agent.board import Board
from afd_e2e.multi_agent.identity import (
    AgentIdentity,
    checkpoint_fingerprint,
    checks,
    identity_mismatches,
)
from afd_e2e.preflight.checks import FAIL, PASS


def test_the_checkpoint_fingerprint_follows_config_values_and_shards_not_key_order(make_checkpoint):
    base = checkpoint_fingerprint(make_checkpoint(name="a"))
    reordered = dict(reversed(list(QWEN35_CONFIG.items())))
    assert checkpoint_fingerprint(make_checkpoint(reordered, name="b")) == base
    other = json.loads(json.dumps(QWEN35_CONFIG))
    other["text_config"]["num_experts"] = 128
    assert checkpoint_fingerprint(make_checkpoint(other, name="c")) != base
    assert checkpoint_fingerprint(make_checkpoint(name="d", shard_bytes=8192)) != base
    assert checkpoint_fingerprint(make_checkpoint(name="e", shards=3)) != base
    assert checkpoint_fingerprint(make_checkpoint("{not json", name="f")) is None


LEADER = AgentIdentity("gpu-a", "leader", "0.1.0", "0.26.0", "0.3.1", "sha256:aaaa")


def test_the_same_software_everywhere_passes():
    follower = dataclasses.replace(LEADER, agent="gpu-b", hosts="ffn")
    assert identity_mismatches([LEADER, follower]) == ()
    results = checks([LEADER, follower])
    assert [c.status for c in results] == [PASS] * 4
    assert results[1].name == "same software: vLLM"
    assert results[1].measured == "0.26.0 on agent gpu-a (leader), agent gpu-b (ffn)"


def test_a_mismatch_fails_naming_both_sides():
    ffn = dataclasses.replace(LEADER, agent="gpu-b", hosts="ffn", vllm="0.26.1")
    node = dataclasses.replace(LEADER, agent="gpu-c", hosts="attention-node1", afd_plugin=None, checkpoint="sha256:bb")
    mismatches = identity_mismatches([LEADER, ffn, node])
    assert [(m.what, m.other.agent) for m in mismatches] == [
        ("vllm", "gpu-b"),
        ("afd_plugin", "gpu-c"),
        ("checkpoint", "gpu-c"),
    ]
    assert mismatches[0].message == "vLLM differs: 0.26.1 on agent gpu-b (ffn), 0.26.0 on agent gpu-a (leader)"
    assert mismatches[1].message == (
        "AFD plugin differs: not found on agent gpu-c (attention-node1), 0.3.1 on agent gpu-a (leader)"
    )
    by_name = {c.name: c for c in checks([LEADER, ffn, node])}
    assert by_name["same software: afd-e2e"].status == PASS
    vllm = by_name["same software: vLLM"]
    assert vllm.status == FAIL and vllm.wanted == "0.26.0 on every agent" and "gpu-b (ffn)" in vllm.measured
    assert "install the same release on every agent pool" in vllm.fix
    assert by_name["same software: checkpoint"].status == FAIL


@pytest.mark.parametrize(
    "text",
    ['{"agent": "x"}', "[]", "not json", json.dumps({**dataclasses.asdict(LEADER), "vllm": 26})],
)
def test_a_published_identity_that_is_not_one_is_a_one_line_error(text):
    key = Board("job-1", "afd-8a8f").key("ffn", "identity")
    with pytest.raises(UsageError, match=r"meta-data afd-e2e/job-1/afd-8a8f/ffn/identity: not an agent identity"):
        AgentIdentity.from_meta_data(text, key)
