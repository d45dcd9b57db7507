#!/usr/bin/env bats
# hooks/command: afd-e2e run with the plugin's options; its exit status is the job's.

load bats/helpers

@test "runs the profile into the default out dir" {
  run "$(hook command)"
  assert_success
  assert_equal "$(calls)" "afd-e2e run --profile qwen3.5-122b-a10b --out afd-e2e-out"
}

@test "a step's own command is not run, and the log says so" {
  export BUILDKITE_COMMAND="make test"
  run "$(hook command)"
  assert_success
  assert_output --partial "warning: the step's own command is not run: this plugin's command is afd-e2e run"
  assert_equal "$(calls)" "afd-e2e run --profile qwen3.5-122b-a10b --out afd-e2e-out"
}

@test "a failing verdict fails the job with the same exit status" {
  export STUB_AFD_E2E_RUN_EXIT=3
  run "$(hook command)"
  assert_failure 3
}

@test "options reach afd-e2e run" {
  export BUILDKITE_PLUGIN_AFD_E2E_DEVICES=0,1 BUILDKITE_PLUGIN_AFD_E2E_MODEL=/models/m BUILDKITE_PLUGIN_AFD_E2E_OUT_DIR=out
  export BUILDKITE_PLUGIN_AFD_E2E_PORT_BASE=18500 BUILDKITE_PLUGIN_AFD_E2E_GSM8K_DIR=/data/gsm8k
  export BUILDKITE_PLUGIN_AFD_E2E_CASES_0=afd-eager-4a4f BUILDKITE_PLUGIN_AFD_E2E_CASES_1=baseline-eager
  run "$(hook command)"
  assert_success
  assert_equal "$(calls)" "afd-e2e run --profile qwen3.5-122b-a10b --devices 0,1 --model /models/m --out out --port-base 18500 --gsm8k-dir /data/gsm8k --case afd-eager-4a4f --case baseline-eager"
}

@test "a single string counts as a list of one case" {
  export BUILDKITE_PLUGIN_AFD_E2E_CASES=afd-eager-4a4f
  run "$(hook command)"
  assert_success
  assert_equal "$(calls)" "afd-e2e run --profile qwen3.5-122b-a10b --out afd-e2e-out --case afd-eager-4a4f"
}

@test "the block step's choice of cases (build meta-data) replaces the cases option" {
  export BUILDKITE_PLUGIN_AFD_E2E_CASES_META_DATA=afd-e2e-cases-qwen BUILDKITE_PLUGIN_AFD_E2E_CASES_0=native-eager-dp8
  export STUB_BUILDKITE_AGENT_META_DATA_OUTPUT=$'afd-eager-4a4f\nbaseline-eager'
  run "$(hook command)"
  assert_success
  run calls
  assert_line --index 0 "buildkite-agent meta-data get afd-e2e-cases-qwen --default "
  assert_line --index 1 "afd-e2e run --profile qwen3.5-122b-a10b --out afd-e2e-out --case afd-eager-4a4f --case baseline-eager"
}

@test "no choice in the meta-data falls back to the cases option" {
  export BUILDKITE_PLUGIN_AFD_E2E_CASES_META_DATA=afd-e2e-cases-qwen BUILDKITE_PLUGIN_AFD_E2E_CASES_0=native-eager-dp8
  run "$(hook command)"
  assert_success
  assert_line --partial "afd-e2e run --profile qwen3.5-122b-a10b --out afd-e2e-out --case native-eager-dp8"
}

@test "unreadable meta-data fails the job rather than running every case" {
  export BUILDKITE_PLUGIN_AFD_E2E_CASES_META_DATA=afd-e2e-cases-qwen STUB_BUILDKITE_AGENT_META_DATA_EXIT=1
  run "$(hook command)"
  assert_failure
  run calls
  refute_output --partial "afd-e2e run"
}

@test "closed gates: not run, and the job passes" {
  skipped_by_this_job
  run "$(hook command)"
  assert_success
  assert_output --partial "not run: the opt-in gates"
  assert_equal "$(calls)" ""
}
