# Shared setup for the hook tests (tests/*.bats, where Buildkite's plugin tester runs `bats tests/`): bats
# libraries, stubbed commands on PATH, a clean plugin configuration.
# shellcheck shell=bash

bats_require_minimum_version 1.5.0

bats_load_library bats-support
bats_load_library bats-assert
bats_load_library bats-file

REPO_ROOT="$(cd "$BATS_TEST_DIRNAME/.." && pwd)"

# Every test starts in an empty build directory with buildkite-agent, nvidia-smi and afd-e2e stubbed
# (tests/stubs/record-call) and only the profile option set.
setup() {
  setup_stubs
}

setup_stubs() {
  local name var
  for var in $(compgen -v BUILDKITE_PLUGIN_AFD_E2E_) $(compgen -v STUB_) AFD_E2E_SKIPPED AFD_E2E_SKIPPED_JOB AFD_E2E_CLOSED AFD_E2E_LEADER_JOB BUILDKITE_PLUGINS BUILDKITE_STEP_KEY BUILDKITE_JOB_CANCELLED BUILDKITE_CANCEL_GRACE_PERIOD BUILDKITE_COMMAND BUILDKITE_COMMAND_EXIT_STATUS; do
    unset "$var"
  done
  STUB_BIN="$BATS_TEST_TMPDIR/bin"
  mkdir -p "$STUB_BIN"
  for name in buildkite-agent nvidia-smi afd-e2e; do
    ln -s "$REPO_ROOT/tests/stubs/record-call" "$STUB_BIN/$name"
  done
  export PATH="$STUB_BIN:/usr/bin:/bin"  # only the stubs and the system: no afd-e2e from a developer's env
  export STUB_CALLS="$BATS_TEST_TMPDIR/calls.log"
  : >"$STUB_CALLS"
  export BUILDKITE_JOB_ID=job-1 BUILDKITE_AGENT_NAME=gpu-agent-1 TMPDIR="$BATS_TEST_TMPDIR"
  export BUILDKITE_PLUGIN_AFD_E2E_PROFILE=qwen3.5-122b-a10b
  cd "$BATS_TEST_TMPDIR" || return
}

hook() {
  printf '%s/hooks/%s' "$REPO_ROOT" "$1"
}

# source_hook NAME: source the hook the way the agent does (so its exports carry on to later hooks), then print
# what it exported for them.
source_hook() {
  # shellcheck disable=SC2016 # expanded by the inner shell
  bash -c 'trap '\''echo "AFD_E2E_SKIPPED=${AFD_E2E_SKIPPED-<unset>}"; echo "AFD_E2E_SKIPPED_JOB=${AFD_E2E_SKIPPED_JOB-<unset>}"; echo "PATH=$PATH"'\'' EXIT; source "$1"' _ "$(hook "$1")"
}

# skipped_by_this_job: the state this job's environment hook leaves when the profile's gates are closed.
skipped_by_this_job() {
  export AFD_E2E_SKIPPED="the opt-in gates of profile qwen3.5-122b-a10b are closed on gpu-agent-1"
  export AFD_E2E_SKIPPED_JOB="$BUILDKITE_JOB_ID"
}

# calls: the recorded calls, one per line ("afd-e2e gates --profile ...").
calls() {
  cat "$STUB_CALLS"
}
