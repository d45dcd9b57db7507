#!/bin/bash
# Shared by the afd-e2e plugin's hooks (sourced): options, afd-e2e arguments, annotations, the skip flag.
#
# Options arrive as BUILDKITE_PLUGIN_AFD_E2E_<OPTION> (OPTION upper-cased, "-" -> "_"; lists as _0, _1, ...;
# booleans as true/false). When check_gates finds the profile's opt-in gates closed it exports AFD_E2E_SKIPPED
# (the reason) with AFD_E2E_SKIPPED_JOB (this job's id): the later hooks then do nothing and the job passes, with an
# info annotation saying why, instead of a GPU job that fails later. A flag the job inherited (step, pipeline or
# agent environment) is never trusted: the environment hook forgets it, and a flag of another job is ignored.

AFD_E2E_OPTION_PREFIX=BUILDKITE_PLUGIN_AFD_E2E_
# plugin.yml's configuration properties, in env var form (a test keeps the two lists equal).
AFD_E2E_OPTIONS=(PROFILE CASES CASES_META_DATA DEVICES MODEL GSM8K_DIR OUT_DIR PORT_BASE VENV CLEANUP_TIMEOUT REPORT_TIMEOUT
  CANCEL_GRACE_PERIOD PUBLISH FOLLOW TEST_ENGINE_TOKEN_ENV)
# After a cancel: what the agent needs, of its grace period, to end the job once pre-exit is done.
AFD_E2E_CANCEL_RESERVE_MS=1000

die() {
  echo "afd-e2e plugin: error: $*" >&2
  exit 2
}

warn() {
  echo "afd-e2e plugin: warning: $*" >&2
}

# plugin_option NAME [DEFAULT]: the option's value, or DEFAULT when unset or empty.
plugin_option() {
  local var="${AFD_E2E_OPTION_PREFIX}$1"
  printf '%s' "${!var:-${2:-}}"
}

# plugin_list NAME: a list option's items, one per line (a single string counts as a list of one).
plugin_list() {
  local i=0 var="${AFD_E2E_OPTION_PREFIX}$1"
  if [[ -n "${!var:-}" ]]; then
    printf '%s\n' "${!var}"
    return 0
  fi
  while var="${AFD_E2E_OPTION_PREFIX}$1_${i}" && [[ -n "${!var+set}" ]]; do
    printf '%s\n' "${!var}"
    i=$((i + 1))
  done
}

# check_options: fail on a missing profile, a misspelt option or a malformed value, before anything runs.
check_options() {
  local var name value
  [[ -n "$(profiles)" ]] || die "the profile option is missing; fix: set profile: <name> under the plugin"
  for var in $(compgen -v "$AFD_E2E_OPTION_PREFIX"); do
    name="${var#"$AFD_E2E_OPTION_PREFIX"}"
    [[ ! "$name" =~ ^(.+)_[0-9]+$ ]] || name="${BASH_REMATCH[1]}"
    [[ " ${AFD_E2E_OPTIONS[*]} " == *" $name "* ]] ||
      die "unknown option ${var#"$AFD_E2E_OPTION_PREFIX"}; fix: use the options in plugin.yml"
  done
  for name in PORT_BASE CLEANUP_TIMEOUT REPORT_TIMEOUT CANCEL_GRACE_PERIOD; do
    value="$(plugin_option "$name")"
    [[ -z "$value" || "$value" =~ ^[0-9]+$ ]] || die "option $name=$value is not a whole number; fix: give an integer"
  done
  value="$(plugin_option PUBLISH true)"
  [[ "$value" == true || "$value" == false ]] || die "option publish=$value; fix: use true or false"
}

# use_venv: put the venv option's bin/ first on PATH (returns 2, with the error, when it has no afd-e2e).
use_venv() {
  local venv
  venv="$(plugin_option VENV)"
  [[ -n "$venv" ]] || return 0
  if [[ ! -x "$venv/bin/afd-e2e" ]]; then
    echo "afd-e2e plugin: error: venv $venv has no bin/afd-e2e; fix: install afd-e2e into it or drop the venv option" >&2
    return 2
  fi
  case ":$PATH:" in
    *":$venv/bin:"*) ;;
    *) export PATH="$venv/bin:$PATH" ;;
  esac
}

# check_pinned_version: a step that pins this plugin at a release (`afd-e2e#vX.Y.Z` in BUILDKITE_PLUGINS) runs only
# with that release of afd-e2e on the agent: hooks and harness are released together, and one release's hooks driving
# another's harness fail in ways nobody can read. A mismatch is annotated and returns 2 with the fix in one line; a
# step pinned to a branch or a commit is not checked.
check_pinned_version() {
  local pinned installed problem
  pinned="$(printf '%s' "${BUILDKITE_PLUGINS:-}" | grep -oE '(^|[/"])afd-e2e(-buildkite-plugin)?(\.git)?#v[0-9]+\.[0-9]+\.[0-9]+' | head -n 1)" || true
  [[ -n "$pinned" ]] || return 0
  pinned="${pinned##*#v}"
  installed="$(afd-e2e --version 2>/dev/null)" || installed=""
  installed="${installed#afd-e2e }"
  [[ "$installed" != "$pinned" ]] || return 0
  problem="the step pins the afd-e2e plugin at v${pinned}, but this agent's afd-e2e is ${installed:-not installed}"
  annotate error version "$(where): ${problem}."
  echo "afd-e2e plugin: error: ${problem}; fix: pin the plugin at #v${installed:-X.Y.Z of the agent} in the pipeline, or install afd-e2e ${pinned} on the agent (docs/provisioning.md)" >&2
  return 2
}

# profiles: the profile option's items, one per line (a list: the GPU step of a profile set's agent pool, which runs
# them one after another, each in its own folder below out-dir).
profiles() {
  plugin_list PROFILE
}

several_profiles() {
  (($(profiles | wc -l) > 1))
}

# use_profile P: the profile the functions below act on (AFD_E2E_PROFILE), with its afd-e2e arguments.
use_profile() {
  AFD_E2E_PROFILE="$1"
  target_args
}

# profile_slug P: P as the generator spells it in a profile set's case choices and folder names (step_slug).
profile_slug() {
  local slug
  slug="$(printf '%s' "$1" | sed -E 's/[^A-Za-z0-9_-]+/-/g; s/^-+//; s/-+$//')"
  slug="${slug:0:60}"
  printf '%s' "${slug:-profile}"
}

# target_args: set AFD_E2E_TARGET to the --profile/--devices/--model arguments every afd-e2e command takes.
target_args() {
  AFD_E2E_TARGET=(--profile "$AFD_E2E_PROFILE")
  [[ -z "$(plugin_option DEVICES)" ]] || AFD_E2E_TARGET+=(--devices "$(plugin_option DEVICES)")
  [[ -z "$(plugin_option MODEL)" ]] || AFD_E2E_TARGET+=(--model "$(plugin_option MODEL)")
}

out_dir() {
  plugin_option OUT_DIR afd-e2e-out
}

# run_dir: where the current profile's run writes: out-dir, or its own folder below it when there are several; a
# follower job's records go to their own folder below out-dir, named as afd-e2e join names it (its artifacts' path,
# unique in the build).
run_dir() {
  local follow
  follow="$(plugin_option FOLLOW)"
  if [[ -n "$follow" ]]; then
    printf '%s/follower-%s-%s' "$(out_dir)" "${AFD_E2E_LEADER_JOB:-}" "${follow//\//-}"
  elif several_profiles; then
    printf '%s/%s' "$(out_dir)" "$(profile_slug "$AFD_E2E_PROFILE")"
  else
    out_dir
  fi
}

# selected_cases: the current profile's case ids to run, one per line: the block step's choice when cases-meta-data
# names one, else the cases option, else nothing (all the profile's cases). An item is a case id, or, in a profile
# set, "<profile slug>/<case id>" (items of other profiles are not this one's). Returns 3 when a choice was made and
# none of it is this profile's: the profile is not run.
selected_cases() {
  local key chosen="" item prefix found=0
  key="$(plugin_option CASES_META_DATA)"
  if [[ -n "$key" ]]; then
    chosen="$(buildkite-agent meta-data get "$key" --default "")" || return 1
  fi
  [[ -n "$chosen" ]] || chosen="$(plugin_list CASES)"
  [[ -n "$chosen" ]] || return 0
  prefix="$(profile_slug "$AFD_E2E_PROFILE")/"
  while IFS= read -r item; do
    if [[ -n "$item" && "$item" != */* ]]; then
      printf '%s\n' "$item"
      found=1
    elif [[ "$item" == "$prefix"* ]]; then
      printf '%s\n' "${item#"$prefix"}"
      found=1
    fi
  done <<<"$chosen"
  ((found)) || return 3
}

# forget_inherited_skip: the environment hook's first act; only this job's own gate check may skip it.
forget_inherited_skip() {
  if [[ -n "${AFD_E2E_SKIPPED+set}${AFD_E2E_SKIPPED_JOB+set}${AFD_E2E_CLOSED+set}" ]]; then
    warn "ignoring the inherited AFD_E2E_SKIPPED=${AFD_E2E_SKIPPED:-}: only this job's gate check may skip it"
  fi
  unset AFD_E2E_SKIPPED AFD_E2E_SKIPPED_JOB AFD_E2E_CLOSED
}

# open_profiles: the profiles whose gates this job's gate checks did not find closed, one per line.
open_profiles() {
  local profile closed=""
  [[ -z "${BUILDKITE_JOB_ID:-}" || "${AFD_E2E_SKIPPED_JOB:-}" != "$BUILDKITE_JOB_ID" ]] || closed="${AFD_E2E_CLOSED:-}"
  while IFS= read -r profile; do
    [[ $'\n'"$closed" == *$'\n'"$profile"$'\n'* ]] || printf '%s\n' "$profile"
  done < <(profiles)
}

# gates_closed: this job's gate check found the gates closed (a flag set for another job does not count).
gates_closed() {
  [[ -n "${AFD_E2E_SKIPPED:-}" ]] || return 1
  if [[ -z "${BUILDKITE_JOB_ID:-}" || "${AFD_E2E_SKIPPED_JOB:-}" != "$BUILDKITE_JOB_ID" ]]; then
    warn "ignoring AFD_E2E_SKIPPED: it was not set by this job's gate check"
    return 1
  fi
}

# profile_in_checkout: the current profile is a .yaml path, which exists only once the repository is checked out
# (after the environment hook): its gates are checked in pre-command instead.
profile_in_checkout() {
  [[ "$AFD_E2E_PROFILE" == *.yaml || "$AFD_E2E_PROFILE" == *.yml ]]
}

# check_gates: afd-e2e gates for the current profile. Closed gates add it to AFD_E2E_CLOSED (exported with this
# job's id) and annotate why (info); when every profile is closed, AFD_E2E_SKIPPED says why the job runs nothing.
# Malformed gates, or no afd-e2e, annotate an error and return afd-e2e's exit status.
check_gates() {
  local output status=0
  echo "--- :lock: afd-e2e gates ${AFD_E2E_TARGET[*]}"
  output="$(afd-e2e gates "${AFD_E2E_TARGET[@]}" 2>&1)" || status=$?
  printf '%s\n' "$output"
  case "$status" in
    0) ;;
    3) # afd-e2e's exit status for "not run: gates closed" (docs/reference.md: exit statuses)
      AFD_E2E_CLOSED="${AFD_E2E_CLOSED:-}${AFD_E2E_PROFILE}"$'\n'
      AFD_E2E_SKIPPED_JOB="${BUILDKITE_JOB_ID:-}"
      export AFD_E2E_CLOSED AFD_E2E_SKIPPED_JOB
      if [[ -z "$(open_profiles)" ]]; then
        AFD_E2E_SKIPPED="the opt-in gates of profile $(profiles | paste -sd, - | sed 's/,/, /g') are closed on ${BUILDKITE_AGENT_NAME:-this agent}"
        export AFD_E2E_SKIPPED
      fi
      annotate info gates "$(where) did not run: its opt-in gates are closed.$(fenced "$output")"
      ;;
    *)
      annotate error gates "$(where) cannot start: \`afd-e2e gates\` exited ${status}.$(fenced "$output")"
      return "$status"
      ;;
  esac
}

# check_leader: a follower job (the follow option, set by its leader's upload) first asks afd-e2e join whether its
# leader (AFD_E2E_LEADER_JOB) still waits for it. A leader that has ended leaves nothing to join: the skip flag is
# exported for this job, so the later hooks do nothing and the job passes at once, holding no agent for a leader that
# is gone. Returns afd-e2e join's status otherwise (2: bad input).
check_leader() {
  local follow output status=0
  follow="$(plugin_option FOLLOW)"
  [[ -n "$follow" ]] || return 0
  [[ -n "${AFD_E2E_LEADER_JOB:-}" ]] ||
    die "option follow=$follow without AFD_E2E_LEADER_JOB; fix: follower steps come from their leader's upload, not by hand"
  echo "--- :handshake: afd-e2e join ${follow} (leader job ${AFD_E2E_LEADER_JOB})"
  output="$(afd-e2e join --leader-job "$AFD_E2E_LEADER_JOB" 2>&1)" || status=$?
  printf '%s\n' "$output"
  case "$status" in
    0) ;;
    3) # afd-e2e's exit status for "not run" (docs/reference.md: exit statuses)
      AFD_E2E_SKIPPED="follower ${follow}: ${output#afd-e2e join: }"
      AFD_E2E_SKIPPED_JOB="${BUILDKITE_JOB_ID:-}"
      AFD_E2E_CLOSED="$(profiles)"$'\n'
      export AFD_E2E_SKIPPED AFD_E2E_SKIPPED_JOB AFD_E2E_CLOSED
      ;;
    *) return "$status" ;;
  esac
}

# annotate STYLE WHAT BODY: best effort; an annotation that fails never fails the job. One context per job and WHAT:
# the step's key (a retry of the step replaces its own), else the job id.
annotate() {
  if ! command -v buildkite-agent >/dev/null 2>&1; then
    printf '%s\n' "$3"
    return 0
  fi
  buildkite-agent annotate --style "$1" --context "afd-e2e-${BUILDKITE_STEP_KEY:-${BUILDKITE_JOB_ID:-local}}-$2" "$3" ||
    warn "could not annotate the build ($1, $2)"
}

# fenced TEXT: the last 100 lines (at most 64 KiB) of a command's output as a markdown code block.
fenced() {
  local fence='```'
  printf '\n\n%s\n%s\n%s\n' "$fence" "$(printf '%s\n' "$1" | tail -n 100 | tail -c 65536)" "$fence"
}

# where: "profile P on agent A", for annotations.
where() {
  printf '**afd-e2e %s** on %s' "$AFD_E2E_PROFILE" "${BUILDKITE_AGENT_NAME:-this agent}"
}

# print_gpus: the agent's GPUs and their topology, first in the job log.
print_gpus() {
  if ! command -v nvidia-smi >/dev/null 2>&1; then
    echo "nvidia-smi not found: no NVIDIA driver on this agent"
    return 0
  fi
  echo "--- :desktop_computer: nvidia-smi"
  nvidia-smi || warn "nvidia-smi exited $?"
  echo "--- :desktop_computer: nvidia-smi topo -m"
  nvidia-smi topo -m || warn "nvidia-smi topo -m exited $?"
}

# bounded MS KILL_AFTER COMMAND...: run COMMAND, killed after MS milliseconds (and KILL_AFTER seconds more if it
# ignores SIGTERM).
bounded() {
  local limit status=0 kill_after=$2
  limit="$(seconds "$1")"
  shift 2
  timeout --kill-after="$kill_after" "$limit" "$@" || status=$?
  [[ $status -ne 124 && $status -ne 137 ]] || warn "$* ran out of its ${limit} s"
  return "$status"
}

now_ms() {
  date +%s%3N
}

# seconds MS: milliseconds (at least 0) as the seconds timeout(1) takes ("7.250").
seconds() {
  local ms=$(($1 > 0 ? $1 : 0))
  printf '%d.%03d' $((ms / 1000)) $((ms % 1000))
}

# job_cancelled: the agent says so, or the command hook received its SIGTERM (a cancel, a timeout, an agent stop).
job_cancelled() {
  [[ "${BUILDKITE_JOB_CANCELLED:-}" == true || -e "$(cancel_mark)" ]]
}

# cancel_mark: where the command hook notes when the job was cancelled (milliseconds since the epoch).
cancel_mark() {
  printf '%s/afd-e2e-cancelled-%s' "${TMPDIR:-/tmp}" "${BUILDKITE_JOB_ID:-local}"
}

# run_noting_cancel COMMAND...: run COMMAND; on SIGTERM/SIGINT (a cancel) note the moment for pre-exit's budget,
# pass the signal on and wait for COMMAND's own teardown. Returns COMMAND's exit status.
run_noting_cancel() {
  local pid status=0
  "$@" &
  pid=$!
  trap 'now_ms >"$(cancel_mark)"; kill -TERM "$pid" 2>/dev/null || true' TERM INT
  while true; do
    status=0
    wait "$pid" || status=$?
    kill -0 "$pid" 2>/dev/null || break # a trapped signal interrupted wait: COMMAND is still tearing down
  done
  trap - TERM INT
  return "$status"
}

# cancel_deadline_ms: when the agent will SIGKILL this cancelled job: the grace period (the cancel-grace-period
# option, else the agent's BUILDKITE_CANCEL_GRACE_PERIOD, else Buildkite's 10 s) from the moment of the cancel (noted
# by the command hook; unknown: now), less what the agent needs to end the job.
cancel_deadline_ms() {
  local grace cancelled_at
  grace="$(plugin_option CANCEL_GRACE_PERIOD "${BUILDKITE_CANCEL_GRACE_PERIOD:-10}")"
  cancelled_at="$(cat "$(cancel_mark)" 2>/dev/null || now_ms)"
  printf '%d' $((cancelled_at + grace * 1000 - AFD_E2E_CANCEL_RESERVE_MS))
}

# run_profiles: afd-e2e run for each open profile, with the cases chosen for it, into its run_dir. Returns the first
# failing run's exit status (0 when every run passes); after a cancel no further profile starts.
run_profiles() {
  local profile cases chosen status verdict=0 case_id
  local -a listed args
  mapfile -t listed < <(open_profiles)
  for profile in "${listed[@]}"; do
    use_profile "$profile"
    chosen=0
    cases="$(selected_cases)" || chosen=$?
    if [[ $chosen -eq 3 ]]; then
      annotate info "not-chosen-$(profile_slug "$profile")" "$(where): none of its cases was chosen in the block step, not run."
      continue
    fi
    [[ $chosen -eq 0 ]] || return "$chosen"

    if [[ -n "$(plugin_option FOLLOW)" ]]; then
      run_follower
      return
    fi
    args=(run "${AFD_E2E_TARGET[@]}" --out "$(run_dir)")
    [[ -z "$(plugin_option PORT_BASE)" ]] || args+=(--port-base "$(plugin_option PORT_BASE)")
    [[ -z "$(plugin_option GSM8K_DIR)" ]] || args+=(--gsm8k-dir "$(plugin_option GSM8K_DIR)")
    while IFS= read -r case_id; do
      [[ -z "$case_id" ]] || args+=(--case "$case_id")
    done <<<"$cases"

    echo "--- :test_tube: afd-e2e ${args[*]}"
    status=0
    run_noting_cancel afd-e2e "${args[@]}" || status=$?
    [[ $verdict -ne 0 ]] || verdict=$status
    [[ ! -e "$(cancel_mark)" ]] || break
  done
  return "$verdict"
}

# run_follower: a follower job hosts its process of the leader's case (afd-e2e join --follow) until the leader ends
# it. A leader that ended since the environment hook asked leaves nothing to join: the job passes.
run_follower() {
  local status=0
  local -a args=(join --leader-job "$AFD_E2E_LEADER_JOB" --follow "$(plugin_option FOLLOW)" "${AFD_E2E_TARGET[@]}"
    --out "$(run_dir)")
  [[ -z "$(plugin_option PORT_BASE)" ]] || args+=(--port-base "$(plugin_option PORT_BASE)")
  echo "--- :handshake: afd-e2e ${args[*]}"
  run_noting_cancel afd-e2e "${args[@]}" || status=$?
  [[ $status -ne 3 ]] || status=0 # afd-e2e's "not run": nothing to join (docs/reference.md: exit statuses)
  return "$status"
}

# clean_up_runs DEADLINE_MS KILL_AFTER: afd-e2e cleanup of each open profile's run_dir, bounded by cleanup-timeout,
# or (DEADLINE_MS set: a cancelled job) by an equal share of what is left until DEADLINE_MS. Failures are annotated.
clean_up_runs() {
  local deadline_ms=$1 kill_after=$2 i limit_ms
  local -a listed cleanup
  mapfile -t listed < <(open_profiles)
  for ((i = 0; i < ${#listed[@]}; i++)); do
    use_profile "${listed[i]}"
    cleanup=(afd-e2e cleanup --out "$(run_dir)")
    limit_ms=$(($(plugin_option CLEANUP_TIMEOUT 120) * 1000))
    if [[ -n "$deadline_ms" ]]; then
      limit_ms=$(((deadline_ms - $(now_ms)) / (${#listed[@]} - i)))
      cleanup+=(--within "$(seconds $((limit_ms > 1100 ? limit_ms - 1000 : 100)))")
      limit_ms=$((limit_ms - 500))
    fi
    bounded "$limit_ms" "$kill_after" "${cleanup[@]}" ||
      annotate warning cleanup "$(where): \`afd-e2e cleanup\` failed or ran out of time; check the agent for leftover processes, ports or GPU memory."
  done
}

# report_runs DEADLINE_MS KILL_AFTER: afd-e2e report (and publish) of each open profile's results, bounded by
# report-timeout, or (DEADLINE_MS set) by what is left until it, and only when at least 2 s are left (a report cut
# short uploads nothing useful). Never fails.
report_runs() {
  local deadline_ms=$1 kill_after=$2 profile out limit_ms
  local -a listed args
  mapfile -t listed < <(open_profiles)
  for profile in "${listed[@]}"; do
    use_profile "$profile"
    out="$(run_dir)"
    limit_ms=$(($(plugin_option REPORT_TIMEOUT 300) * 1000))
    [[ -z "$deadline_ms" ]] || limit_ms=$((deadline_ms - 500 - $(now_ms)))
    if [[ ! -f "$out/results.json" ]]; then
      echo "afd-e2e: no ${out}/results.json, nothing to report"
    elif [[ -n "$deadline_ms" ]] && ((limit_ms < 2000)); then
      echo "afd-e2e: no time left in the cancel grace period for the report; render it later with afd-e2e report ${out}"
    else
      args=(report "$out")
      # A follower's records reach the build through its leader's merged report, never an annotation of their own.
      [[ "$(plugin_option PUBLISH true)" == false || -n "$(plugin_option FOLLOW)" ]] || args+=(--publish)
      [[ -z "$(plugin_option TEST_ENGINE_TOKEN_ENV)" ]] || args+=(--test-engine-token-env "$(plugin_option TEST_ENGINE_TOKEN_ENV)")
      echo "--- :memo: afd-e2e ${args[*]}"
      bounded "$limit_ms" "$kill_after" afd-e2e "${args[@]}" || warn "the report was not fully published"
    fi
  done
}
