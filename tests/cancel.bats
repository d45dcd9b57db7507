#!/usr/bin/env bats
# A cancelled job within the agent's cancel-grace-period: the agent SIGTERMs the job's process group, the command
# hook passes the cancel on and notes its moment, and pre-exit ends what the run left (real processes holding real
# ports, in a session of their own, ignoring SIGTERM) inside what is left of the grace, then reports only in the time
# left after that. buildkite-agent is stubbed.
#
# What pre-exit hands out is arithmetic on time, so it is read on the test's clock (tests/stubs/date: the hooks'
# `date +%s%3N` returns the milliseconds the test set, and the job's teardown is the test moving them): each
# budget is exact, however busy the machine. The real cleanup of real leftovers runs where ending them is the
# point, with a grace long enough that no load can run it out; how fast it is within the agent's 10 s is measured
# by benchmarks/cancel_cleanup.py, not asserted here.

load bats/helpers

PORT_BASE=21600 # this test's ports (the Buildkite unit tests use 21000-21499)
GUARD_S=120     # a stand-in not up by then hangs; a loaded machine is slow, never this slow

setup() {
  local python="${AFD_E2E_VENV:-$REPO_ROOT/.venv}/bin/python"
  [[ -x "$python" ]] || fail "no $python: run scripts/test, which installs it (or set AFD_E2E_VENV)"
  setup_stubs
  # afd-e2e: `run` is the stand-in runner above, `cleanup` the real command where a test asks for it (REAL_CLEANUP),
  # anything else (and a cleanup otherwise) the recording stub.
  rm "$STUB_BIN/afd-e2e"
  cat >"$STUB_BIN/afd-e2e" <<WRAPPER
#!/bin/bash
export PYTHONPATH="$REPO_ROOT/python"
case "\$1" in
  run) exec "$python" "$REPO_ROOT/tests/bats/cancel/run-leaving-servers.py" "\$@" ;;
  cleanup) [[ -z "\${REAL_CLEANUP:-}" ]] || exec "$python" -m afd_e2e "\$@" ;;
esac
exec "$BATS_TEST_TMPDIR/recorded/afd-e2e" "\$@"
WRAPPER
  chmod +x "$STUB_BIN/afd-e2e"
  mkdir "$BATS_TEST_TMPDIR/recorded"
  ln -s "$REPO_ROOT/tests/stubs/record-call" "$BATS_TEST_TMPDIR/recorded/afd-e2e"
  ln -s "$REPO_ROOT/tests/stubs/date" "$STUB_BIN/date"
  export STUB_NOW_MS_FILE="$BATS_TEST_TMPDIR/now_ms"
  echo 1767225600000 >"$STUB_NOW_MS_FILE"
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

# advance MS: the job's clock moves on by MS milliseconds.
advance() {
  echo $(($(<"$STUB_NOW_MS_FILE") + $1)) >"$STUB_NOW_MS_FILE"
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

# servers_listen: the stand-in run wrote its servers, and each listens.
servers_listen() {
  local pid port
  [[ -s "$SERVERS_FILE" ]] || return 1
  while read -r pid port; do
    listening "$port" || return 1
  done <"$SERVERS_FILE"
}

# start_job: the command hook in a process group of its own (as the agent runs a job), once its servers listen.
start_job() {
  local started=$SECONDS
  setsid "$(hook command)" >"$BATS_TEST_TMPDIR/command.log" 2>&1 &
  JOB_PID=$!
  until servers_listen; do
    ((SECONDS - started < GUARD_S)) || fail "the stand-in run's servers did not listen: $(cat "$BATS_TEST_TMPDIR/command.log")"
    sleep 0.05
  done
}

# cancel [TEARDOWN_MS]: what the agent does: SIGTERM to the job's process group; the runner's teardown takes
# TEARDOWN_MS (default 0) of the job's clock; then the job's hooks go on with BUILDKITE_JOB_CANCELLED=true.
cancel() {
  kill -TERM -- "-$JOB_PID"
  wait "$JOB_PID" || true
  advance "${1:-0}"
  export BUILDKITE_JOB_CANCELLED=true
}

# assert_clean: what the run left is gone: no server running, no port held.
assert_clean() {
  local pid port
  while read -r pid port; do
    ! running "$pid" || fail "server pid $pid is still running"
    ! listening "$port" || fail "port $port is still held"
  done <"$SERVERS_FILE"
}

@test "cancelled: the cleanup ends the servers the run left (SIGKILL where SIGTERM is ignored) and frees their ports, then the report" {
  export REAL_CLEANUP=1 BUILDKITE_PLUGIN_AFD_E2E_CANCEL_GRACE_PERIOD=30 # room for any load: speed is the benchmark's
  start_job
  mkdir -p afd-e2e-out && echo '{}' >afd-e2e-out/results.json
  cancel 1000
  run "$(hook pre-exit)"
  assert_success
  assert_clean
  assert_output --partial "the job was cancelled: 28.000 s left of the grace period"
  assert_output --partial "cleanup leftovers: warned - ended 1 processes of run"
  assert_output --partial "some needed SIGKILL"
  assert_output --partial "cleanup processes: passed"
  assert_output --partial "cleanup ports: passed - free: $PORT_BASE"
  assert_equal "$(calls)" "afd-e2e report afd-e2e-out --publish"
  [[ ! -e "$TMPDIR/afd-e2e-cancelled-job-1" ]]
}

@test "the agent's 10 s grace: the cleanup gets what is left less the agent's reserve and its own bound, the report the rest" {
  start_job
  mkdir -p afd-e2e-out && echo '{}' >afd-e2e-out/results.json
  cancel 1000
  run "$(hook pre-exit)"
  assert_success
  assert_output --partial "the job was cancelled: 8.000 s left of the grace period"
  run calls
  assert_line --index 0 "afd-e2e cleanup --out afd-e2e-out --within 7.000"
  assert_line --index 1 "afd-e2e report afd-e2e-out --publish"
}

@test "a slow teardown leaves little of the grace: the cleanup gets it, the report is left for later" {
  start_job
  mkdir -p afd-e2e-out && echo '{}' >afd-e2e-out/results.json
  cancel 6731
  run "$(hook pre-exit)"
  assert_success
  assert_output --partial "the job was cancelled: 2.269 s left of the grace period"
  assert_output --partial "no time left in the cancel grace period for the report; render it later with afd-e2e report afd-e2e-out"
  assert_equal "$(calls)" "afd-e2e cleanup --out afd-e2e-out --within 1.269"
}

@test "a cleanup that cannot fit the grace is cut off at its share and warned about; the report is left for later" {
  export STUB_AFD_E2E_CLEANUP_SLEEP=600 # a cleanup that hangs: no machine is fast enough to fit
  start_job
  mkdir -p afd-e2e-out && echo '{}' >afd-e2e-out/results.json
  cancel 6731
  run "$(hook pre-exit)"
  assert_success
  assert_output --partial "afd-e2e cleanup --out afd-e2e-out --within 1.269 ran out of its 1.769 s"
  assert_output --partial "no time left in the cancel grace period for the report"
  run calls
  assert_line --index 0 "afd-e2e cleanup --out afd-e2e-out --within 1.269"
  assert_line --index 1 --partial "buildkite-agent annotate --style warning --context afd-e2e-job-1-cleanup"
  assert_line --index 1 --partial "\`afd-e2e cleanup\` failed or ran out of time"
  refute_line --partial "afd-e2e report"
}

@test "the grace period option replaces the agent's" {
  export BUILDKITE_PLUGIN_AFD_E2E_CANCEL_GRACE_PERIOD=30
  start_job
  cancel
  run "$(hook pre-exit)"
  assert_success
  assert_output --partial "the job was cancelled: 29.000 s left of the grace period"
  assert_output --partial "no afd-e2e-out/results.json, nothing to report"
  assert_equal "$(calls)" "afd-e2e cleanup --out afd-e2e-out --within 28.000"
}

@test "a SIGTERM the agent did not call a cancel (a timeout, an agent stop) gets the same budget" {
  start_job
  cancel
  unset BUILDKITE_JOB_CANCELLED
  run "$(hook pre-exit)"
  assert_success
  assert_output --partial "the job was cancelled: 9.000 s left of the grace period"
  assert_equal "$(calls)" "afd-e2e cleanup --out afd-e2e-out --within 8.000"
}
