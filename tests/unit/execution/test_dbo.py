"""Unit tier: DBO proven from a role's own log (``execution/dbo.py``; issue 42 part 2).

The real text: ``tests/fixtures/execution/gpu-dbo`` is the 12-06 H100 run of ``tests/gpu/test_dbo_gpu.py``
(``dbo-dp1``: vLLM 0.26 from the GPU kit, the tiny DeepSeek-V2, native DP1 with ``--enable-dbo`` and DEBUG logging,
a smoke and a bench of 24 prompts at 12 at a time), trimmed by ``trim.py``: 84 steps after ``Application startup
complete.``, every one ``ubatch_slices: None``, and two dummy-run steps before it. A split step's line is that run's
line with the micro-batches vLLM 0.26 prints for a split (``vllm/v1/worker/gpu_model_runner.py``: ``logger.debug(
"ubatch_slices: %s, ubatch_slices_padded: %s", ...)`` of a list of the ``UBatchSlice`` dataclass of
``vllm/v1/worker/ubatch_utils.py``): no 2-GPU machine was lent on 12-06, so no real run split a batch yet.
"""

from __future__ import annotations

import json

from afd_e2e.execution.dbo import judge_microbatches, read_microbatches
from afd_e2e.execution.judge import judge_case
from afd_e2e.plan.build import build_plan
from afd_e2e.plan.model import RunPlan
from afd_e2e.plan.serve_argv import child_env
from afd_e2e.profile import load_profile
from afd_e2e.results.codec import from_json
from afd_e2e.results.status import Proof, Status
from repo_paths import FIXTURES

RUN = FIXTURES / "execution" / "gpu-dbo"
LOG = RUN / "dbo-dp1" / "server.log"
UNSPLIT = "ubatch_slices: None, ubatch_slices_padded: None"
# vLLM 0.26's repr of a two-micro-batch split of 12 decode requests (UBatchSlice is a plain dataclass of two slices)
SPLIT = (
    "ubatch_slices: [UBatchSlice(request_slice=slice(0, 6, None), token_slice=slice(0, 6, None)), "
    "UBatchSlice(request_slice=slice(6, 12, None), token_slice=slice(6, 12, None))], ubatch_slices_padded: "
    "[UBatchSlice(request_slice=slice(0, 6, None), token_slice=slice(0, 6, None)), "
    "UBatchSlice(request_slice=slice(6, 12, None), token_slice=slice(6, 12, None))]"
)


def _real() -> str:
    return LOG.read_text(encoding="utf-8")


def _as_dp2(text: str, split_on: tuple[str, ...]) -> str:
    """The real log's steps after start-up, as two DP ranks would log them: each step once per rank, split on the
    ranks in ``split_on``."""
    ready, _, after = text.partition("Application startup complete.")
    lines = []
    for line in after.splitlines():
        if UNSPLIT not in line:
            lines.append(line)
            continue
        for rank in ("EngineCore_DP0", "EngineCore_DP1"):
            step = line.replace("(EngineCore pid=1287)", f"({rank} pid=1287)")
            lines.append(step.replace(UNSPLIT, SPLIT) if rank in split_on else step)
    return ready + "Application startup complete." + "\n".join(lines)


def test_the_real_dp1_run_ran_every_step_after_start_up_unsplit_and_is_contradicted():
    found = read_microbatches(_real())
    assert found.started and found.unsplit == {"EngineCore": 84} and found.split == {"EngineCore": 0}
    assert found.split_line is None and found.unsplit_line.endswith(UNSPLIT)
    assert "[v1/worker/gpu_model_runner.py:4246]" in found.unsplit_line  # execute_model's line, not a dummy run's
    proof, reason, would = judge_microbatches(found)
    assert proof is Proof.CONTRADICTED and would is None
    assert reason == f"DBO: ran unsplit after start-up on EngineCore (steps split: EngineCore 0 of 84): '{UNSPLIT}'"


def test_the_dummy_runs_before_start_up_are_not_counted():
    """The run's two ``ubatch_slices`` lines before the ready line are the engine's own dummy runs (line 5923)."""
    text = _real()
    before = text.partition("Application startup complete.")[0]
    assert before.count("ubatch_slices: ") == 2 and "gpu_model_runner.py:5923" in before
    only_before = read_microbatches(before.replace(UNSPLIT, SPLIT) + "Application startup complete.\n")
    assert only_before.started and only_before.split == {} and judge_microbatches(only_before)[0] is Proof.UNPROVEN


def test_two_ranks_that_split_are_proven_with_each_ranks_count():
    found = read_microbatches(_as_dp2(_real(), ("EngineCore_DP0", "EngineCore_DP1")))
    assert found.split == {"EngineCore_DP0": 84, "EngineCore_DP1": 84} and found.unsplit == {}
    proof, reason, _ = judge_microbatches(found)
    assert proof is Proof.PROVEN
    assert reason.startswith(
        "DBO: steps split into micro-batches after start-up: EngineCore_DP0 84 of 84, EngineCore_DP1 84 of 84: "
        "'ubatch_slices: [UBatchSlice(request_slice=slice(0, 6, None)"
    )


def test_a_rank_that_never_split_contradicts_the_others():
    found = read_microbatches(_as_dp2(_real(), ("EngineCore_DP0",)))
    proof, reason, _ = judge_microbatches(found)
    assert proof is Proof.CONTRADICTED
    assert reason.startswith(
        "DBO: ran unsplit after start-up on EngineCore_DP1 (steps split: EngineCore_DP0 84 of 84, "
    )


def test_a_log_without_debug_lines_or_without_start_up_is_unproven_saying_what_would_prove_it():
    info_only = "\n".join(line for line in _real().splitlines() if " DEBUG " not in line)
    proof, reason, would = judge_microbatches(read_microbatches(info_only))
    assert (proof, reason) == (Proof.UNPROVEN, "DBO: no 'ubatch_slices' step line after start-up")
    assert "VLLM_LOGGING_LEVEL=DEBUG" in would
    never_ready = _real().replace("Application startup complete.", "Waiting for application startup.")
    proof, reason, _ = judge_microbatches(read_microbatches(never_ready))
    assert proof is Proof.UNPROVEN and "no 'Application startup complete.' line" in reason


def test_the_role_verdict_is_the_worse_of_its_mode_and_its_micro_batches():
    """The real run: eager proven by its start-up line, DBO contradicted: the role and the case fail, each part said."""
    plan = from_json(RunPlan, json.loads((RUN / "plan.json").read_text(encoding="utf-8")))
    (case,) = plan.cases
    section = judge_case(case, "cuda", RUN, {"server": "dbo-dp1/server.log"}, require_proof=False)
    (role,) = section.roles
    assert role.asked.dbo and role.proof is Proof.CONTRADICTED and section.status is Status.FAILED
    assert role.reason.startswith("eager proven: log shows 'Enforce eager set")
    assert role.reason.endswith(
        f"DBO: ran unsplit after start-up on EngineCore (steps split: EngineCore 0 of 84): '{UNSPLIT}'"
    )
    assert role.microbatches.unsplit == {"EngineCore": 84}


def test_only_a_dbo_case_s_batch_scheduling_roles_log_at_debug():
    profile = load_profile("tiny-gpu-features")
    plan = build_plan(profile, model_path="/m")
    levels = {
        (case.id, process.name): process.env_set.get("VLLM_LOGGING_LEVEL")
        for case in plan.cases
        for process in case.processes
    }
    assert levels[("afd-1a1f-dbo", "attention")] == "DEBUG"
    assert levels[("afd-1a1f-dbo", "ffn")] is None  # the FFN logs no step of its own
    assert {key for key, level in levels.items() if level} == {("afd-1a1f-dbo", "attention")}
    dbo = profile.case("afd-1a1f-dbo")
    assert child_env(profile, dbo, "attention", (0,))["VLLM_LOGGING_LEVEL"] == "DEBUG"
