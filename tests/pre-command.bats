#!/usr/bin/env bats
# hooks/pre-command: GPUs printed first, then preflight; a misfit fails the job before any model is loaded.

load bats/helpers

@test "nvidia-smi and its topology are printed before preflight" {
  export STUB_NVIDIA_SMI_OUTPUT="| NVIDIA H200 |" STUB_NVIDIA_SMI_TOPO_OUTPUT="GPU0 X NV18"
  run "$(hook pre-command)"
  assert_success
  assert_output --partial "NVIDIA H200"
  assert_output --partial "GPU0 X NV18"
  run calls
  assert_line --index 0 "nvidia-smi"
  assert_line --index 1 "nvidia-smi topo -m"
  assert_line --index 2 "afd-e2e preflight --profile qwen3.5-122b-a10b"
}

@test "a preflight misfit is annotated as an error and fails the job" {
  export STUB_AFD_E2E_PREFLIGHT_EXIT=1
  export STUB_AFD_E2E_PREFLIGHT_OUTPUT="gpu_memory: GPU 3 has 20000 MiB free, the profile needs 90000"
  run "$(hook pre-command)"
  assert_failure 1
  run calls
  assert_line --index 3 --partial "buildkite-agent annotate --style error --context afd-e2e-job-1-preflight"
  assert_line --index 3 --partial "does not fit the profile, nothing was loaded"
  assert_line --index 3 --partial "GPU 3 has 20000 MiB free"
}

@test "an agent without nvidia-smi still runs preflight, which judges the fit" {
  rm "$STUB_BIN/nvidia-smi"
  run "$(hook pre-command)"
  assert_success
  assert_output --partial "nvidia-smi not found"
  assert_equal "$(calls)" "afd-e2e preflight --profile qwen3.5-122b-a10b"
}

@test "a failing nvidia-smi is reported, not fatal" {
  export STUB_NVIDIA_SMI_EXIT=9
  run "$(hook pre-command)"
  assert_success
  assert_output --partial "warning: nvidia-smi exited 9"
}

@test "closed gates: nothing is checked" {
  skipped_by_this_job
  run "$(hook pre-command)"
  assert_success
  assert_output --partial "no preflight: the opt-in gates"
  assert_equal "$(calls)" ""
}

@test "a profile from the checkout has its gates checked first" {
  export BUILDKITE_PLUGIN_AFD_E2E_PROFILE=ci/profiles/qwen.yaml
  run "$(hook pre-command)"
  assert_success
  run calls
  assert_line --index 0 "afd-e2e gates --profile ci/profiles/qwen.yaml"
  assert_line --index 3 "afd-e2e preflight --profile ci/profiles/qwen.yaml"
}

@test "a profile from the checkout with closed gates: skipped for the later hooks, with the reason" {
  export BUILDKITE_PLUGIN_AFD_E2E_PROFILE=ci/profiles/qwen.yml STUB_AFD_E2E_GATES_EXIT=3
  run source_hook pre-command
  assert_success
  assert_line "AFD_E2E_SKIPPED=the opt-in gates of profile ci/profiles/qwen.yml are closed on gpu-agent-1"
  run calls
  assert_line --index 1 --partial "buildkite-agent annotate --style info"
  refute_output --partial "preflight"
}

@test "a plugin pinned at another release than the agent's afd-e2e is refused with the fix, before preflight" {
  export BUILDKITE_PLUGINS='[{"github.com/vllm-project/afd-e2e#v9.9.9":{"profile":"qwen3.5-122b-a10b"}}]'
  export STUB_AFD_E2E___VERSION_OUTPUT="afd-e2e 0.1.0"
  run --separate-stderr "$(hook pre-command)"
  assert_failure 2
  [[ "$stderr" == "afd-e2e plugin: error: the step pins the afd-e2e plugin at v9.9.9, but this agent's afd-e2e is 0.1.0; fix: pin the plugin at #v0.1.0 in the pipeline, or install afd-e2e 9.9.9 on the agent (docs/provisioning.md)" ]]
  run calls
  assert_line --index 0 "afd-e2e --version"
  assert_line --index 1 --partial "buildkite-agent annotate --style error --context afd-e2e-job-1-version **afd-e2e qwen3.5-122b-a10b** on gpu-agent-1: the step pins"
  refute_output --partial "preflight"
}

@test "a plugin pinned at the agent's release runs; a branch pin is not checked" {
  export BUILDKITE_PLUGINS='[{"github.com/vllm-project/afd-e2e#v0.1.0":{"profile":"qwen3.5-122b-a10b"}}]'
  export STUB_AFD_E2E___VERSION_OUTPUT="afd-e2e 0.1.0"
  run "$(hook pre-command)"
  assert_success
  run calls
  assert_line --index 0 "afd-e2e --version"
  assert_line --partial "afd-e2e preflight --profile qwen3.5-122b-a10b"
  : >"$STUB_CALLS"
  export BUILDKITE_PLUGINS='[{"github.com/vllm-project/afd-e2e#main":{"profile":"qwen3.5-122b-a10b"}}]'
  run "$(hook pre-command)"
  assert_success
  run calls
  refute_output --partial "--version"
}
