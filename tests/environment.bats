#!/usr/bin/env bats
# hooks/environment: options are checked, then the gates; closed gates end the job quietly with an explanation.

load bats/helpers

@test "open gates: afd-e2e gates is asked with the profile and the job goes on" {
  run source_hook environment
  assert_success
  assert_line "AFD_E2E_SKIPPED=<unset>"
  assert_equal "$(calls)" "afd-e2e gates --profile qwen3.5-122b-a10b"
}

@test "devices and model options reach afd-e2e gates" {
  export BUILDKITE_PLUGIN_AFD_E2E_DEVICES=0,2,4,6,1,3,5,7 BUILDKITE_PLUGIN_AFD_E2E_MODEL=/models/qwen
  run "$(hook environment)"
  assert_success
  assert_equal "$(calls)" "afd-e2e gates --profile qwen3.5-122b-a10b --devices 0,2,4,6,1,3,5,7 --model /models/qwen"
}

@test "closed gates: the job is marked skipped, passes, and an info annotation says why" {
  export STUB_AFD_E2E_GATES_EXIT=3
  export STUB_AFD_E2E_GATES_OUTPUT="AFD_E2E_LARGE_MODEL is not set; set AFD_E2E_LARGE_MODEL=1 to opt in"
  run source_hook environment
  assert_success
  assert_line "AFD_E2E_SKIPPED=the opt-in gates of profile qwen3.5-122b-a10b are closed on gpu-agent-1"
  assert_line "AFD_E2E_SKIPPED_JOB=job-1"
  run calls
  assert_line --index 1 --partial "buildkite-agent annotate --style info --context afd-e2e-job-1-gates"
  assert_line --index 1 --partial "did not run: its opt-in gates are closed"
  assert_line --index 1 --partial "AFD_E2E_LARGE_MODEL is not set"
}

@test "malformed gates fail the job with an error annotation" {
  export STUB_AFD_E2E_GATES_EXIT=2 STUB_AFD_E2E_GATES_OUTPUT="AFD_E2E_DEVICES='0,0' repeats [0] (fix: list each GPU once)"
  run "$(hook environment)"
  assert_failure 2
  assert_output --partial "repeats [0]"
  run calls
  assert_line --index 1 --partial "buildkite-agent annotate --style error"
  assert_line --index 1 --partial "list each GPU once"
}

@test "afd-e2e missing from the agent fails the job" {
  rm "$STUB_BIN/afd-e2e"
  run -127 "$(hook environment)"
  assert_output --partial "afd-e2e: command not found"
  run calls
  assert_line --index 0 --partial "buildkite-agent annotate --style error"
  assert_line --index 0 --partial "\`afd-e2e gates\` exited 127"
}

@test "a missing profile option fails before afd-e2e is called" {
  unset BUILDKITE_PLUGIN_AFD_E2E_PROFILE
  run "$(hook environment)"
  assert_failure 2
  assert_output --partial "the profile option is missing; fix: set profile: <name>"
  assert_equal "$(calls)" ""
}

@test "a misspelt option fails instead of being ignored" {
  export BUILDKITE_PLUGIN_AFD_E2E_CASE_0=afd-eager-4a4f
  run "$(hook environment)"
  assert_failure 2
  assert_output --partial "unknown option CASE_0"
  assert_equal "$(calls)" ""
}

@test "list options and the meta-data key are known options" {
  export BUILDKITE_PLUGIN_AFD_E2E_CASES_0=afd-eager-4a4f BUILDKITE_PLUGIN_AFD_E2E_CASES_1=baseline-eager
  export BUILDKITE_PLUGIN_AFD_E2E_CASES_META_DATA=afd-e2e-cases-qwen
  run "$(hook environment)"
  assert_success
}

@test "a timeout that is not a whole number fails" {
  export BUILDKITE_PLUGIN_AFD_E2E_REPORT_TIMEOUT=5m
  run "$(hook environment)"
  assert_failure 2
  assert_output --partial "option REPORT_TIMEOUT=5m is not a whole number"
}

@test "the venv option puts its bin/ first on PATH for the later hooks" {
  mkdir -p venv/bin
  ln -s "$REPO_ROOT/tests/stubs/record-call" venv/bin/afd-e2e
  export BUILDKITE_PLUGIN_AFD_E2E_VENV="$PWD/venv"
  run source_hook environment
  assert_success
  assert_line --regexp "^PATH=$PWD/venv/bin:"
}

@test "a venv without afd-e2e fails with the fix" {
  mkdir -p venv/bin
  export BUILDKITE_PLUGIN_AFD_E2E_VENV="$PWD/venv"
  run "$(hook environment)"
  assert_failure 2
  assert_output --partial "has no bin/afd-e2e; fix: install afd-e2e into it"
}

@test "a profile from the checkout does not exist yet: its gates wait for pre-command" {
  export BUILDKITE_PLUGIN_AFD_E2E_PROFILE=ci/profiles/qwen.yaml
  run source_hook environment
  assert_success
  assert_line "AFD_E2E_SKIPPED=<unset>"
  assert_output --partial "comes with the checkout; pre-command checks its gates"
  assert_equal "$(calls)" ""
}

@test "the hooks' annotations are one per step: a retry of a keyed step replaces its own" {
  export STUB_AFD_E2E_GATES_EXIT=3 BUILDKITE_STEP_KEY=gpu-qwen
  source_hook environment
  export BUILDKITE_JOB_ID=job-2 # the retry: a new job of the same step
  source_hook environment
  run calls
  assert_line --index 1 --partial "buildkite-agent annotate --style info --context afd-e2e-gpu-qwen-gates "
  assert_line --index 3 --partial "buildkite-agent annotate --style info --context afd-e2e-gpu-qwen-gates "
}
