"""Whether the installed AFD plugin accepts every AFD process's config, asked where it is installed: the profile
reader applies a copy of the plugin's rules (``profile/connectors.py``: each connector's topology rule, for the
plugin the profile targets), but the plugin that will run the roles is the authority. Its own
``afd_plugin.config.parse_afd_config`` is CPU-safe, so the ``vllm`` executable's interpreter runs it on each
process's ``--additional-config`` (``plugin_config_script.py``, one subprocess for all), before any model loads.

What is asked and what is concluded are pure (``config_queries``, ``read_answer``, ``judge_plugin_answer``); only
``ask_installed_plugin`` runs anything.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from afd_e2e.plan import RunPlan
from afd_e2e.plan.vllm_versions import flag_value
from afd_e2e.preflight.checks import PreflightCheck, failed, passed, skipped
from afd_e2e.preflight.software import InstalledSoftware
from afd_e2e.profile import Profile

PLUGIN_CONFIG = "afd plugin config"
CONFIG_FLAG = "--additional-config"
SCRIPT = Path(__file__).with_name("plugin_config_script.py")
# Imports the plugin's config module only (no vLLM, no torch): well under a second; bounded all the same.
ASK_TIMEOUT_S = 60.0
WANTED = "every AFD process's --additional-config accepted by the installed plugin's afd_plugin.config.parse_afd_config"


@dataclass(frozen=True)
class ConfigQuery:
    """One AFD process's config as its argv passes it, and the role it must name."""

    case_id: str
    process: str  # the process's name (its log file's stem)
    role: str  # "attention" | "ffn"
    additional_config: Mapping[str, Any] | None  # None: its --additional-config is not a JSON object
    unreadable: str | None = None  # why additional_config is None


@dataclass(frozen=True)
class PluginAnswer:
    """What the installed plugin said: a verdict per query sent (None: accepted, else its exception), or why it
    could not judge (its config module cannot be imported, or the interpreter did not answer)."""

    verdicts: tuple[str | None, ...] = ()
    import_error: str | None = None
    problem: str | None = None


Ask = Callable[[str, Sequence[ConfigQuery]], PluginAnswer]


def _additional_config(argv: Sequence[str]) -> tuple[Mapping[str, Any] | None, str | None]:
    """The last ``--additional-config`` of ``argv`` (as vLLM's parser keeps the last), parsed; an AFD process
    without one is asked as ``{}``, which the plugin refuses in its own words."""
    text = flag_value(argv, CONFIG_FLAG)
    if text is None:
        return {}, None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, f"its {CONFIG_FLAG} is not JSON ({exc.msg} at character {exc.pos})"
    if not isinstance(value, dict):
        return None, f"its {CONFIG_FLAG} is not a JSON object"
    return value, None


def config_queries(plan: RunPlan) -> list[ConfigQuery]:
    """One query per AFD process of the plan, in the plan's order."""
    queries = []
    for case in plan.cases:
        for process in case.processes:
            if process.role in ("attention", "ffn"):
                config, unreadable = _additional_config(process.argv)
                queries.append(ConfigQuery(case.id, process.name, process.role, config, unreadable))
    return queries


def read_answer(returncode: int, stdout: str, stderr: str, asked: int) -> PluginAnswer:
    """The script's last stdout line, or why there is no usable one."""
    lines = stdout.strip().splitlines()
    try:
        found = json.loads(lines[-1]) if returncode == 0 and lines else None
    except json.JSONDecodeError:
        found = None
    if isinstance(found, dict) and isinstance(found.get("import_error"), str):
        return PluginAnswer(import_error=found["import_error"])
    verdicts = found.get("verdicts") if isinstance(found, dict) else None
    if not isinstance(verdicts, list):
        tail = (stderr.strip().splitlines() or ["no output"])[-1]
        return PluginAnswer(problem=f"the check exited {returncode}: {tail[:200]}")
    if len(verdicts) != asked:
        return PluginAnswer(problem=f"the check answered {len(verdicts)} verdicts for {asked} configs")
    return PluginAnswer(verdicts=tuple(v if isinstance(v, str) else None for v in verdicts))


def ask_installed_plugin(python: str, queries: Sequence[ConfigQuery]) -> PluginAnswer:
    """Run ``plugin_config_script.py`` in ``python`` on ``queries`` (readable ones only), bounded."""
    payload = json.dumps([{"additional_config": q.additional_config, "role": q.role} for q in queries])
    try:
        done = subprocess.run(
            [python, str(SCRIPT)],
            input=payload,
            capture_output=True,
            text=True,
            timeout=ASK_TIMEOUT_S,
            check=False,
            cwd="/",  # not afd-e2e's checkout: a folder named afd_plugin there would answer instead
        )
    except subprocess.TimeoutExpired:
        return PluginAnswer(problem=f"{python} did not answer within {ASK_TIMEOUT_S:.0f} s")
    except OSError as exc:
        return PluginAnswer(problem=f"cannot run {python}: {exc.strerror}")
    return read_answer(done.returncode, done.stdout, done.stderr, len(queries))


def reader_rules(profile: Profile, plan: RunPlan) -> str:
    """The topology rules the profile reader applied to the planned AFD cases, one per connector."""
    rules: dict[str, str] = {}
    for planned in plan.cases:
        case = profile.case(planned.id)
        if case.connector and case.connector_traits:
            rule = case.connector_traits.topology_rule(profile.software.afd_plugin_rules)
            rules.setdefault(case.connector, f"{case.connector} {rule.text} ({rule.source})")
    return "; ".join(rules.values())


def judge_plugin_answer(
    queries: Sequence[ConfigQuery], answer: PluginAnswer, installed: InstalledSoftware, plugin_rules: str
) -> PreflightCheck:
    """The check from the plugin's answer to the readable queries (an unreadable one is refused here)."""
    python = installed.vllm_python
    if answer.problem is not None:
        return failed(
            PLUGIN_CONFIG,
            f"cannot tell: the installed plugin's config check in {python}: {answer.problem}",
            WANTED,
            f"see why on the agent: {python} -c 'import afd_plugin.config'",
        )
    if answer.import_error is not None:
        return failed(
            PLUGIN_CONFIG,
            f"afd_plugin.config cannot be imported in {python}: {answer.import_error}",
            WANTED,
            "reinstall the AFD plugin from its checkout (uv sync --extra vllm) into the Python that runs vllm",
        )
    verdicts = iter(answer.verdicts)  # one per readable query, in order
    refused = []
    for query in queries:
        why = query.unreadable or next(verdicts)
        if why is not None:
            refused.append((query, why))
    if refused:
        query, why = refused[0]
        more = f" ({len(refused) - 1} more alike)" if len(refused) > 1 else ""
        plugin = " ".join(p for p in (installed.afd_plugin, installed.afd_plugin_version) if p)
        return failed(
            PLUGIN_CONFIG,
            f"case {query.case_id} {query.process}: the installed plugin ({plugin} in {python}) refuses its AFD "
            f"config: {why}{more}",
            WANTED,
            f"change case {query.case_id}'s layout or AFD config as the plugin's message says, or install the plugin "
            f"the profile targets (software.afd_plugin_rules: {plugin_rules})",
        )
    return passed(
        PLUGIN_CONFIG, f"{len(queries)} AFD process config(s) accepted by afd_plugin.config in {python}", WANTED
    )


def check_plugin_config(
    profile: Profile, plan: RunPlan, installed: InstalledSoftware, ask: Ask = ask_installed_plugin
) -> PreflightCheck:
    """Ask the installed plugin where there is one to ask; otherwise say why not and which rules applied."""
    queries = config_queries(plan)
    if not queries:
        return skipped(PLUGIN_CONFIG, "no AFD case planned")
    applied = f"the profile reader's topology rules applied: {reader_rules(profile, plan)}"
    if installed.vllm_python is None:
        return skipped(PLUGIN_CONFIG, f"vLLM's Python could not be asked (see the vllm check); {applied}")
    if installed.afd_plugin is None:
        return skipped(
            PLUGIN_CONFIG,
            f"the AFD plugin is not installed in {installed.vllm_python} (see the afd plugin check); {applied}",
        )
    readable = [q for q in queries if q.unreadable is None]
    answer = ask(installed.vllm_python, readable) if readable else PluginAnswer()
    return judge_plugin_answer(queries, answer, installed, profile.software.afd_plugin_rules)
