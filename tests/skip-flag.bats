#!/usr/bin/env bats
# The skip flag (AFD_E2E_SKIPPED) is trusted only when this job's gate check set it: an inherited one (step,
# pipeline or agent environment, or another job's) never turns the hooks into a silent pass.

load bats/helpers

@test "the environment hook forgets an inherited flag and checks the gates itself" {
  export AFD_E2E_SKIPPED="set in the step's env" AFD_E2E_SKIPPED_JOB=job-1
  run source_hook environment
  assert_success
  assert_output --partial "warning: ignoring the inherited AFD_E2E_SKIPPED=set in the step's env"
  assert_line "AFD_E2E_SKIPPED=<unset>"
  assert_line "AFD_E2E_SKIPPED_JOB=<unset>"
  assert_equal "$(calls)" "afd-e2e gates --profile qwen3.5-122b-a10b"
}

@test "an inherited flag still skips nothing when the gates are closed: this job's reason replaces it" {
  export AFD_E2E_SKIPPED="set in the step's env" STUB_AFD_E2E_GATES_EXIT=3
  run source_hook environment
  assert_success
  assert_line "AFD_E2E_SKIPPED=the opt-in gates of profile qwen3.5-122b-a10b are closed on gpu-agent-1"
  assert_line "AFD_E2E_SKIPPED_JOB=job-1"
}

@test "command: a flag without this job's mark is ignored and the run goes on" {
  export AFD_E2E_SKIPPED="set in the pipeline's env"
  run "$(hook command)"
  assert_success
  assert_output --partial "warning: ignoring AFD_E2E_SKIPPED: it was not set by this job's gate check"
  assert_equal "$(calls)" "afd-e2e run --profile qwen3.5-122b-a10b --out afd-e2e-out"
}

@test "pre-command: another job's flag is ignored and preflight runs" {
  export AFD_E2E_SKIPPED="closed elsewhere" AFD_E2E_SKIPPED_JOB=job-0
  run "$(hook pre-command)"
  assert_success
  run calls
  assert_line "afd-e2e preflight --profile qwen3.5-122b-a10b"
}

@test "pre-exit: an inherited flag does not skip the cleanup" {
  export AFD_E2E_SKIPPED="set in the agent's env"
  run "$(hook pre-exit)"
  assert_success
  assert_output --partial "warning: ignoring AFD_E2E_SKIPPED"
  assert_equal "$(calls)" "afd-e2e cleanup --out afd-e2e-out"
}

@test "the flag this job's gate check set is trusted" {
  skipped_by_this_job
  run "$(hook command)"
  assert_success
  assert_output --partial "not run: the opt-in gates"
  assert_equal "$(calls)" ""
}
