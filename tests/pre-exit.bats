#!/usr/bin/env bats
# hooks/pre-exit: cleanup, then report and publish; time-bounded, and it never changes the job's outcome.

load bats/helpers

with_results() {
  mkdir -p "${1:-afd-e2e-out}"
  echo '{}' >"${1:-afd-e2e-out}/results.json"
}

@test "after a run: cleanup, then the report is published" {
  with_results
  export BUILDKITE_COMMAND_EXIT_STATUS=0
  run "$(hook pre-exit)"
  assert_success
  assert_output --partial "the job's exit status 0 stands"
  run calls
  assert_line --index 0 "afd-e2e cleanup --out afd-e2e-out"
  assert_line --index 1 "afd-e2e report afd-e2e-out --publish"
}

@test "a failed job keeps its status: pre-exit still cleans up and reports, and exits 0" {
  with_results
  export BUILDKITE_COMMAND_EXIT_STATUS=3 STUB_AFD_E2E_CLEANUP_EXIT=1 STUB_AFD_E2E_REPORT_EXIT=1
  run "$(hook pre-exit)"
  assert_success
  assert_output --partial "the job's exit status 3 stands"
  assert_output --partial "warning: the report was not fully published"
  run calls
  assert_line --index 1 --partial "buildkite-agent annotate --style warning --context afd-e2e-job-1-cleanup"
  assert_line --index 2 "afd-e2e report afd-e2e-out --publish"
}

@test "a failed upload never fails a passing job" {
  with_results
  export BUILDKITE_COMMAND_EXIT_STATUS=0 STUB_AFD_E2E_REPORT_EXIT=1 STUB_BUILDKITE_AGENT_ANNOTATE_EXIT=1
  run "$(hook pre-exit)"
  assert_success
}

@test "a hanging cleanup is cut off at cleanup-timeout and the report still runs" {
  with_results
  export BUILDKITE_PLUGIN_AFD_E2E_CLEANUP_TIMEOUT=1 STUB_AFD_E2E_CLEANUP_SLEEP=600
  SECONDS=0
  run "$(hook pre-exit)"
  assert_success
  [ "$SECONDS" -lt 300 ] # not the hanging command's 600 s: a guard, no machine's speed judged
  assert_output --partial "ran out of its 1.000 s"
  run calls
  assert_line --index 2 "afd-e2e report afd-e2e-out --publish"
}

@test "a hanging report is cut off at report-timeout" {
  with_results
  export BUILDKITE_PLUGIN_AFD_E2E_REPORT_TIMEOUT=1 STUB_AFD_E2E_REPORT_SLEEP=600
  SECONDS=0
  run "$(hook pre-exit)"
  assert_success
  [ "$SECONDS" -lt 300 ] # not the hanging command's 600 s: a guard, no machine's speed judged
  assert_output --partial "afd-e2e report afd-e2e-out --publish ran out of its 1.000 s"
}

@test "publish false renders locally; the Test Engine token is passed by name, never printed" {
  with_results out
  export BUILDKITE_PLUGIN_AFD_E2E_OUT_DIR=out BUILDKITE_PLUGIN_AFD_E2E_PUBLISH=false
  export BUILDKITE_PLUGIN_AFD_E2E_TEST_ENGINE_TOKEN_ENV=SUITE_TOKEN SUITE_TOKEN=secret-token-value
  run "$(hook pre-exit)"
  assert_success
  refute_output --partial "secret-token-value"
  run calls
  assert_line --index 1 "afd-e2e report out --test-engine-token-env SUITE_TOKEN"
}

@test "no results.json: cleanup only" {
  run "$(hook pre-exit)"
  assert_success
  assert_output --partial "no afd-e2e-out/results.json, nothing to report"
  assert_equal "$(calls)" "afd-e2e cleanup --out afd-e2e-out"
}

@test "closed gates: nothing to clean up or report" {
  with_results
  skipped_by_this_job
  run "$(hook pre-exit)"
  assert_success
  assert_equal "$(calls)" ""
}
