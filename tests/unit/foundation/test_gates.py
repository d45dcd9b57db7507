"""Gates: unset gates close with every reason; malformed ones are errors with a fix; all set opens."""

from __future__ import annotations

import pytest

from afd_e2e.plan.gates import CLOSED, INVALID, OPEN, evaluate_gates, parse_devices
from afd_e2e.profile import load_profile

SEED = load_profile("qwen3.5-122b-a10b")


def seed_env(tmp_path, **overrides):
    env = {
        "AFD_E2E_BACKEND": "gpu",
        "AFD_E2E_LARGE_MODEL": "1",
        "AFD_GPU_E2E_MODEL": str(tmp_path),
        "AFD_E2E_DEVICES": "0,2,4,6,1,3,5,7",
    }
    env.update(overrides)
    return {k: v for k, v in env.items() if v is not None}


def test_all_gates_set_opens(tmp_path):
    decision = evaluate_gates(SEED, seed_env(tmp_path))
    assert decision.status == OPEN and decision.exit_code == 0
    assert decision.devices == (0, 2, 4, 6, 1, 3, 5, 7) and decision.model_path == str(tmp_path.resolve())


def test_nothing_set_closes_with_every_reason():
    decision = evaluate_gates(SEED, {})
    assert decision.status == CLOSED and decision.exit_code == 3
    text = "\n".join(decision.reasons)
    for variable in ("AFD_E2E_BACKEND", "AFD_E2E_LARGE_MODEL", "AFD_GPU_E2E_MODEL", "AFD_E2E_DEVICES"):
        assert variable in text


def test_other_backend_closes(tmp_path):
    decision = evaluate_gates(SEED, seed_env(tmp_path, AFD_E2E_BACKEND="cpu"))
    assert decision.status == CLOSED and "runs on gpu" in decision.reasons[0]


def test_large_model_opt_out_closes(tmp_path):
    assert evaluate_gates(SEED, seed_env(tmp_path, AFD_E2E_LARGE_MODEL="0")).status == CLOSED


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"AFD_E2E_DEVICES": "0,2,x,6,1,3,5,7"}, "'x' is not an integer"),
        ({"AFD_E2E_DEVICES": "0,2,-4,6,1,3,5,7"}, "-4 is negative"),
        ({"AFD_E2E_DEVICES": "0,2,4,6,1,3,5,5"}, "repeats [5]"),
        ({"AFD_E2E_DEVICES": "0,1,2,3"}, "lists 4 devices (fix: this profile needs exactly 8)"),
        ({"AFD_E2E_DEVICES": "0,,1"}, "empty entry"),
        ({"AFD_E2E_LARGE_MODEL": "yes"}, "is not 0 or 1"),
        ({"AFD_E2E_BACKEND": "tpu"}, "is not a backend"),
    ],
)
def test_malformed_gates_are_errors_with_a_fix(tmp_path, overrides, expected):
    decision = evaluate_gates(SEED, seed_env(tmp_path, **overrides))
    assert decision.status == INVALID and decision.exit_code == 2
    assert any(expected in reason and "fix: " in reason for reason in decision.reasons), decision.reasons


def test_model_path_must_be_a_directory(tmp_path):
    file = tmp_path / "config.json"
    file.write_text("{}")
    decision = evaluate_gates(SEED, seed_env(tmp_path, AFD_GPU_E2E_MODEL=str(file)))
    assert decision.status == INVALID and "is a file, not a directory" in decision.reasons[0]
    missing = evaluate_gates(SEED, seed_env(tmp_path, AFD_GPU_E2E_MODEL=str(tmp_path / "nope")))
    assert "is missing, not a directory" in missing.reasons[0]


def test_explicit_flags_override_env(tmp_path):
    decision = evaluate_gates(SEED, seed_env(tmp_path, AFD_E2E_DEVICES="bad"), devices="7,6,5,4,3,2,1,0")
    assert decision.status == OPEN and decision.devices == (7, 6, 5, 4, 3, 2, 1, 0)


def test_tiny_cpu_needs_no_devices(tmp_path):
    tiny = load_profile("tiny-cpu")
    decision = evaluate_gates(tiny, {"AFD_E2E_BACKEND": "cpu", "AFD_E2E_TINY_MODEL": str(tmp_path)})
    assert decision.status == OPEN and decision.devices == ()


def test_parse_devices_accepts_spaces():
    assert parse_devices(" 1, 0 ", 2, "X") == (1, 0)


def test_malformed_gates_render_one_fix_each_never_nested(tmp_path):
    decision = evaluate_gates(SEED, seed_env(tmp_path, AFD_E2E_DEVICES="0,0,1,2,3,4,5,6", AFD_E2E_BACKEND="tpu"))
    error = decision.usage_error("profile qwen3.5-122b-a10b")
    assert str(error).count("(fix: ") == 1 and "; fix" not in str(error)
    assert error.problem.startswith("profile qwen3.5-122b-a10b: AFD_E2E_BACKEND='tpu' is not a backend; ")
    assert error.fix == "set it to gpu or cpu; list each GPU once"
