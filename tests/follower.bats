#!/usr/bin/env bats
# A follower job (the follow option, uploaded by a multi-agent case's leader): it joins only a leader that still waits
# for it; a leader that has ended leaves nothing to join, and the job passes at once with the later hooks idle.

load bats/helpers

setup() {
  setup_stubs
  export BUILDKITE_PLUGIN_AFD_E2E_PROFILE=tiny-cpu-two-agents BUILDKITE_PLUGIN_AFD_E2E_FOLLOW=cpu-tp1-remote/server
  export AFD_E2E_LEADER_JOB=leader-7
}

@test "a waiting leader: afd-e2e join is asked first, then the gates, and the job goes on" {
  export STUB_AFD_E2E_JOIN_OUTPUT="afd-e2e join: leader job leader-7 is waiting: joining its rendezvous"
  run source_hook environment
  assert_success
  assert_line "AFD_E2E_SKIPPED=<unset>"
  run calls
  assert_line --index 0 "afd-e2e join --leader-job leader-7"
  assert_line --index 1 "afd-e2e gates --profile tiny-cpu-two-agents"
}

@test "an ended leader: nothing to join, the job passes and the later hooks do nothing" {
  export STUB_AFD_E2E_JOIN_EXIT=3
  export STUB_AFD_E2E_JOIN_OUTPUT="afd-e2e join: leader job leader-7 has already ended (failed): nothing to join"
  run source_hook environment
  assert_success
  assert_output --partial "nothing to join"
  assert_line "AFD_E2E_SKIPPED=follower cpu-tp1-remote/server: leader job leader-7 has already ended (failed): nothing to join"
  assert_line "AFD_E2E_SKIPPED_JOB=job-1"
  assert_equal "$(calls)" "afd-e2e join --leader-job leader-7"

  # What the environment hook exported carries on: pre-command, command and pre-exit run nothing.
  : >"$STUB_CALLS"
  skipped_by_this_job
  export AFD_E2E_CLOSED=$'tiny-cpu-two-agents\n'
  for name in pre-command command pre-exit; do
    run "$(hook "$name")"
    assert_success
  done
  assert_equal "$(calls)" ""
}

@test "a follow option without its leader's job id is refused" {
  unset AFD_E2E_LEADER_JOB
  run "$(hook environment)"
  assert_failure 2
  assert_output --partial "option follow=cpu-tp1-remote/server without AFD_E2E_LEADER_JOB"
  assert_equal "$(calls)" ""
}

@test "afd-e2e join failing on bad input fails the job" {
  export STUB_AFD_E2E_JOIN_EXIT=2 STUB_AFD_E2E_JOIN_OUTPUT="afd-e2e join: error: buildkite-agent meta-data get: not found"
  run "$(hook environment)"
  assert_failure 2
  assert_output --partial "meta-data get"
}

@test "a joined follower's command hosts its process: afd-e2e join --follow into the folder named for its leader" {
  export BUILDKITE_PLUGIN_AFD_E2E_MODEL=/models/tiny BUILDKITE_PLUGIN_AFD_E2E_PORT_BASE=19800
  run "$(hook command)"
  assert_success
  assert_equal "$(calls)" "afd-e2e join --leader-job leader-7 --follow cpu-tp1-remote/server --profile tiny-cpu-two-agents --model /models/tiny --out afd-e2e-out/follower-leader-7-cpu-tp1-remote-server --port-base 19800"
}

@test "a follower whose process failed fails its job; one whose leader ended meanwhile passes" {
  export STUB_AFD_E2E_JOIN_EXIT=1
  run "$(hook command)"
  assert_failure 1
  export STUB_AFD_E2E_JOIN_EXIT=3 STUB_AFD_E2E_JOIN_OUTPUT="afd-e2e join: leader job leader-7 has already ended (passed): nothing to join"
  run "$(hook command)"
  assert_success
  assert_output --partial "nothing to join"
}

@test "a follower's pre-exit cleans up its own folder and renders its report without publishing it" {
  mkdir -p afd-e2e-out/follower-leader-7-cpu-tp1-remote-server
  echo '{}' >afd-e2e-out/follower-leader-7-cpu-tp1-remote-server/results.json
  export BUILDKITE_COMMAND_EXIT_STATUS=0
  run "$(hook pre-exit)"
  assert_success
  run calls
  assert_line --index 0 "afd-e2e cleanup --out afd-e2e-out/follower-leader-7-cpu-tp1-remote-server"
  assert_line --index 1 "afd-e2e report afd-e2e-out/follower-leader-7-cpu-tp1-remote-server"
}
