#!/usr/bin/env bats
# A cancelled job within the agent's cancel-grace-period (10 s): the agent SIGTERMs the job's process group, the
# command hook passes the cancel on, and pre-exit ends what the run left (real processes holding real ports, in a
# session of their own, ignoring SIGTERM) before the grace period ends, when the agent would SIGKILL the job.
# The report runs only in the time left. buildkite-agent is stubbed; afd-e2e cleanup is the real one.

load bats/helpers

PORT_BASE=21600 # this test's ports (the Buildkite unit tests use 21000-21499)

setup() {
  local python="${AFD_E2E_VENV:-$REPO_ROOT/.venv}/bin/python"
  [[ -x "$python" ]] || fail "no $python: run scripts/test, which installs it (or set AFD_E2E_VENV)"
  setup_stubs
  # afd-e2e: `run` is the stand-in runner above, `cleanup` the real command, anything else the recording stub.
  rm "$STUB_BIN/afd-e2e"
  cat >"$STUB_BIN/afd-e2e" <<WRAPPER
#!/bin/bash
export PYTHONPATH="$REPO_ROOT/python"
case "\$1" in
  run) exec "$python" "$REPO_ROOT/tests/bats/cancel/run-leaving-servers.py" "\$@" ;;
  cleanup) exec "$python" -m afd_e2e "\$@" ;;
  *) exec "$BATS_TEST_TMPDIR/recorded/afd-e2e" "\$@" ;;
esac
WRAPPER
  chmod +x "$STUB_BIN/afd-e2e"
  mkdir "$BATS_TEST_TMPDIR/recorded"
  ln -s "$REPO_ROOT/tests/stubs/record-call" "$BATS_TEST_TMPDIR/recorded/afd-e2e"
  export PORT_BASE SERVERS_FILE="$BATS_TEST_TMPDIR/servers"
  export BUILDKITE_CANCEL_GRACE_PERIOD=10
}

teardown() {
  local pid port
  [[ -f "$SERVERS_FILE" ]] || return 0
  while read -r pid port; do
    kill -KILL "$pid" 2>/dev/null || true
  done <"$SERVERS_FILE"
}

# running PID: alive and not a zombie (an orphan whose new parent has not reaped it yet holds nothing).
running() {
  local state
  state="$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" || return 1
  [[ -n "$state" && "$state" != Z ]]
}

listening() {
  (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

# start_job: the command hook in a process group of its own (as the agent runs a job), once its servers listen.
start_job() {
  setsid "$(hook command)" >"$BATS_TEST_TMPDIR/command.log" 2>&1 &
  JOB_PID=$!
  local pid port tries=0
  until [[ -s "$SERVERS_FILE" ]]; do
    ((tries++ < 200)) || fail "the stand-in run did not start: $(cat "$BATS_TEST_TMPDIR/command.log")"
    sleep 0.05
  done
  while read -r pid port; do
    until listening "$port"; do sleep 0.05; done
  done <"$SERVERS_FILE"
}

# cancel: what the agent does: SIGTERM to the job's process group; then the job's hooks go on with
# BUILDKITE_JOB_CANCELLED=true. CANCELLED_AT is the moment, in milliseconds.
cancel() {
  CANCELLED_AT=$(date +%s%3N)
  kill -TERM -- "-$JOB_PID"
  wait "$JOB_PID" || true
  export BUILDKITE_JOB_CANCELLED=true
}

# assert_clean_before_the_grace_ends [GRACE_S]: pre-exit ended within the grace period (default the agent's 10 s),
# and what the run left is gone.
assert_clean_before_the_grace_ends() {
  local pid port grace_ms=$((${1:-10} * 1000))
  (($(date +%s%3N) - CANCELLED_AT < grace_ms)) || fail "pre-exit ended $(($(date +%s%3N) - CANCELLED_AT)) ms after the cancel"
  while read -r pid port; do
    ! running "$pid" || fail "server pid $pid is still running"
    ! listening "$port" || fail "port $port is still held"
  done <"$SERVERS_FILE"
}

@test "cancelled with a 10 s grace: servers gone and ports free before it ends, then the report in the time left" {
  export TEARDOWN_S=1
  start_job
  mkdir -p afd-e2e-out && echo '{}' >afd-e2e-out/results.json
  cancel
  run "$(hook pre-exit)"
  assert_clean_before_the_grace_ends
  assert_success
  assert_output --regexp "the job was cancelled: [0-9]\.[0-9]{3} s left of the grace period"
  assert_output --partial "cleanup leftovers: warned - ended 1 processes of run"
  assert_output --partial "some needed SIGKILL"
  assert_output --partial "cleanup ports: passed - free: $PORT_BASE"
  assert_equal "$(calls)" "afd-e2e report afd-e2e-out --publish"
  [[ ! -e "$TMPDIR/afd-e2e-cancelled-job-1" ]]
}

@test "a slow teardown leaves little of the grace: the cleanup still fits, the report is left for later" {
  export TEARDOWN_S=6
  start_job
  mkdir -p afd-e2e-out && echo '{}' >afd-e2e-out/results.json
  cancel
  run "$(hook pre-exit)"
  assert_clean_before_the_grace_ends
  assert_success
  assert_output --partial "cleanup ports: passed"
  assert_output --partial "no time left in the cancel grace period for the report; render it later with afd-e2e report afd-e2e-out"
  assert_equal "$(calls)" ""
}

@test "the grace period option replaces the agent's" {
  # Longer than the agent's 10 s, so more than 10 s left can only come from the option; a shorter one left the
  # cleanup under 2 s, which a loaded machine missed (the check is of the option, not of the machine's speed).
  export TEARDOWN_S=0 BUILDKITE_PLUGIN_AFD_E2E_CANCEL_GRACE_PERIOD=30
  start_job
  cancel
  run "$(hook pre-exit)"
  assert_clean_before_the_grace_ends 30
  assert_output --regexp "the job was cancelled: (1[0-9]|2[0-9])\.[0-9]{3} s left of the grace period"
  assert_output --partial "no afd-e2e-out/results.json, nothing to report"
}

@test "a SIGTERM the agent did not call a cancel (a timeout, an agent stop) gets the same budget" {
  export TEARDOWN_S=0
  start_job
  cancel
  unset BUILDKITE_JOB_CANCELLED
  run "$(hook pre-exit)"
  assert_clean_before_the_grace_ends
  assert_output --partial "the job was cancelled"
}
