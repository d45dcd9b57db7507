#!/usr/bin/env bats
# A profile set's agent pool: one step whose profile option lists several profiles; each has its own gates,
# preflight, run (in its own folder below out-dir) with the cases chosen for it in the block step, cleanup and report.

load bats/helpers

setup() {
  setup_stubs
  unset BUILDKITE_PLUGIN_AFD_E2E_PROFILE
  export BUILDKITE_PLUGIN_AFD_E2E_PROFILE_0=tiny-gpu-1a1f BUILDKITE_PLUGIN_AFD_E2E_PROFILE_1=tiny-gpu-features
}

@test "environment: the gates of each profile are checked" {
  run source_hook environment
  assert_success
  assert_line "AFD_E2E_SKIPPED=<unset>"
  run calls
  assert_line --index 0 "afd-e2e gates --profile tiny-gpu-1a1f"
  assert_line --index 1 "afd-e2e gates --profile tiny-gpu-features"
}

@test "every profile closed: the job is skipped, naming them all" {
  export STUB_AFD_E2E_GATES_EXIT=3
  run source_hook environment
  assert_success
  assert_line "AFD_E2E_SKIPPED=the opt-in gates of profile tiny-gpu-1a1f, tiny-gpu-features are closed on gpu-agent-1"
}

@test "command: the closed profile is left out, the open one runs into its own folder" {
  export AFD_E2E_CLOSED=$'tiny-gpu-1a1f\n' AFD_E2E_SKIPPED_JOB=job-1
  run "$(hook command)"
  assert_success
  assert_equal "$(calls)" "afd-e2e run --profile tiny-gpu-features --out afd-e2e-out/tiny-gpu-features"
}

@test "command: each profile runs the cases chosen for it; one with none chosen is not run" {
  export BUILDKITE_PLUGIN_AFD_E2E_CASES_META_DATA=afd-e2e-cases-set-afd-plugin-gpu
  export STUB_BUILDKITE_AGENT_META_DATA_OUTPUT=$'tiny-gpu-features/eager\ntiny-gpu-features/graph\ndeepseek-v2-lite-2a2f/afd-2a2f'
  run "$(hook command)"
  assert_success
  run calls
  assert_line --partial "buildkite-agent annotate --style info --context afd-e2e-job-1-not-chosen-tiny-gpu-1a1f **afd-e2e tiny-gpu-1a1f** on gpu-agent-1: none of its cases was chosen in the block step, not run."
  assert_line "afd-e2e run --profile tiny-gpu-features --out afd-e2e-out/tiny-gpu-features --case eager --case graph"
  refute_line --partial "afd-e2e run --profile tiny-gpu-1a1f"
}

@test "command: a failing profile fails the job, and the next profile still runs" {
  export STUB_AFD_E2E_RUN_EXIT=1
  run "$(hook command)"
  assert_failure 1
  run calls
  assert_line --index 0 "afd-e2e run --profile tiny-gpu-1a1f --out afd-e2e-out/tiny-gpu-1a1f"
  assert_line --index 1 "afd-e2e run --profile tiny-gpu-features --out afd-e2e-out/tiny-gpu-features"
}

@test "pre-command: preflight for each open profile, after the GPUs are printed once" {
  run "$(hook pre-command)"
  assert_success
  run calls
  assert_line --index 0 "nvidia-smi"
  assert_line --index 2 "afd-e2e preflight --profile tiny-gpu-1a1f"
  assert_line --index 3 "afd-e2e preflight --profile tiny-gpu-features"
}

@test "pre-exit: every profile's folder is cleaned up first, then each report" {
  mkdir -p afd-e2e-out/tiny-gpu-1a1f afd-e2e-out/tiny-gpu-features
  echo '{}' >afd-e2e-out/tiny-gpu-features/results.json
  run "$(hook pre-exit)"
  assert_success
  assert_output --partial "no afd-e2e-out/tiny-gpu-1a1f/results.json, nothing to report"
  run calls
  assert_line --index 0 "afd-e2e cleanup --out afd-e2e-out/tiny-gpu-1a1f"
  assert_line --index 1 "afd-e2e cleanup --out afd-e2e-out/tiny-gpu-features"
  assert_line --index 2 "afd-e2e report afd-e2e-out/tiny-gpu-features --publish"
}

@test "a pool of one profile in a set: its own items of the choice, into out-dir itself" {
  unset BUILDKITE_PLUGIN_AFD_E2E_PROFILE_0 BUILDKITE_PLUGIN_AFD_E2E_PROFILE_1
  export BUILDKITE_PLUGIN_AFD_E2E_PROFILE=tiny-gpu-1a1f BUILDKITE_PLUGIN_AFD_E2E_CASES_META_DATA=afd-e2e-cases-set-x
  export STUB_BUILDKITE_AGENT_META_DATA_OUTPUT=$'deepseek-v2-lite-2a2f/afd-2a2f\ntiny-gpu-1a1f/native-dp1'
  run "$(hook command)"
  assert_success
  run calls
  assert_line "afd-e2e run --profile tiny-gpu-1a1f --out afd-e2e-out --case native-dp1"
}
