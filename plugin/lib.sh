#!/bin/bash
# Shared by the afd-e2e plugin's hooks (sourced): options, afd-e2e arguments, annotations, the skip flag.
#
# Options arrive as BUILDKITE_PLUGIN_AFD_E2E_<OPTION> (OPTION upper-cased, "-" -> "_"; lists as _0, _1, ...;
# booleans as true/false). When check_gates finds the profile's opt-in gates closed it exports AFD_E2E_SKIPPED
# (the reason): the later hooks then do nothing and the job passes, with an info annotation saying why, instead of
# a GPU job that fails later.

AFD_E2E_OPTION_PREFIX=BUILDKITE_PLUGIN_AFD_E2E_
# plugin.yml's configuration properties, in env var form (a test keeps the two lists equal).
AFD_E2E_OPTIONS=(PROFILE CASES CASES_META_DATA DEVICES MODEL GSM8K_DIR OUT_DIR PORT_BASE VENV CLEANUP_TIMEOUT REPORT_TIMEOUT
  PUBLISH TEST_ENGINE_TOKEN_ENV)

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
  [[ -n "$(plugin_option PROFILE)" ]] || die "the profile option is missing; fix: set profile: <name> under the plugin"
  for var in $(compgen -v "$AFD_E2E_OPTION_PREFIX"); do
    name="${var#"$AFD_E2E_OPTION_PREFIX"}"
    [[ ! "$name" =~ ^(.+)_[0-9]+$ ]] || name="${BASH_REMATCH[1]}"
    [[ " ${AFD_E2E_OPTIONS[*]} " == *" $name "* ]] ||
      die "unknown option ${var#"$AFD_E2E_OPTION_PREFIX"}; fix: use the options in plugin.yml"
  done
  for name in PORT_BASE CLEANUP_TIMEOUT REPORT_TIMEOUT; do
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

# target_args: set AFD_E2E_TARGET to the --profile/--devices/--model arguments every afd-e2e command takes.
target_args() {
  AFD_E2E_TARGET=(--profile "$(plugin_option PROFILE)")
  [[ -z "$(plugin_option DEVICES)" ]] || AFD_E2E_TARGET+=(--devices "$(plugin_option DEVICES)")
  [[ -z "$(plugin_option MODEL)" ]] || AFD_E2E_TARGET+=(--model "$(plugin_option MODEL)")
}

out_dir() {
  plugin_option OUT_DIR afd-e2e-out
}

# selected_cases: the case ids to run, one per line: the block step's choice when cases-meta-data names one,
# else the cases option, else nothing (all the profile's cases).
selected_cases() {
  local key chosen
  key="$(plugin_option CASES_META_DATA)"
  if [[ -n "$key" ]]; then
    chosen="$(buildkite-agent meta-data get "$key" --default "")" || return 1
    if [[ -n "$chosen" ]]; then
      printf '%s\n' "$chosen"
      return 0
    fi
  fi
  plugin_list CASES
}

gates_closed() {
  [[ -n "${AFD_E2E_SKIPPED:-}" ]]
}

# profile_in_checkout: the profile option is a .yaml path, which exists only once the repository is checked out
# (after the environment hook): its gates are checked in pre-command instead.
profile_in_checkout() {
  [[ "$(plugin_option PROFILE)" == *.yaml || "$(plugin_option PROFILE)" == *.yml ]]
}

# check_gates: afd-e2e gates for the target. Closed gates export AFD_E2E_SKIPPED and annotate why (info);
# malformed gates, or no afd-e2e, annotate an error and return afd-e2e's exit status.
check_gates() {
  local output status=0
  echo "--- :lock: afd-e2e gates ${AFD_E2E_TARGET[*]}"
  output="$(afd-e2e gates "${AFD_E2E_TARGET[@]}" 2>&1)" || status=$?
  printf '%s\n' "$output"
  case "$status" in
    0) ;;
    3) # afd-e2e's exit status for "not run: gates closed" (README: exit statuses)
      AFD_E2E_SKIPPED="the opt-in gates of profile $(plugin_option PROFILE) are closed on ${BUILDKITE_AGENT_NAME:-this agent}"
      export AFD_E2E_SKIPPED
      annotate info gates "$(where) did not run: its opt-in gates are closed.$(fenced "$output")"
      ;;
    *)
      annotate error gates "$(where) cannot start: \`afd-e2e gates\` exited ${status}.$(fenced "$output")"
      return "$status"
      ;;
  esac
}

# annotate STYLE WHAT BODY: best effort; an annotation that fails never fails the job.
annotate() {
  if ! command -v buildkite-agent >/dev/null 2>&1; then
    printf '%s\n' "$3"
    return 0
  fi
  buildkite-agent annotate --style "$1" --context "afd-e2e-${BUILDKITE_JOB_ID:-local}-$2" "$3" ||
    warn "could not annotate the build ($1, $2)"
}

# fenced TEXT: the last 100 lines (at most 64 KiB) of a command's output as a markdown code block.
fenced() {
  local fence='```'
  printf '\n\n%s\n%s\n%s\n' "$fence" "$(printf '%s\n' "$1" | tail -n 100 | tail -c 65536)" "$fence"
}

# where: "profile P on agent A", for annotations.
where() {
  printf '**afd-e2e %s** on %s' "$(plugin_option PROFILE)" "${BUILDKITE_AGENT_NAME:-this agent}"
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

# bounded SECONDS COMMAND...: run COMMAND, killed after SECONDS (and 10 s more if it ignores SIGTERM).
bounded() {
  local seconds=$1 status=0
  shift
  timeout --kill-after=10 "$seconds" "$@" || status=$?
  [[ $status -ne 124 && $status -ne 137 ]] || warn "$* ran out of its ${seconds} s"
  return "$status"
}
