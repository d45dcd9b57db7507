"""Plans as text a person can paste into a shell to reproduce a case by hand."""

from __future__ import annotations

import re
import shlex

from afd_e2e.plan.addresses import LISTEN_HOST, meta_data_key, placeholders
from afd_e2e.plan.model import CasePlan, ProcessPlan, RunPlan


def _quote(arg: str) -> str:
    """Quote for a shell, leaving an unset-model placeholder like ``${AFD_GPU_E2E_MODEL}`` and the address
    placeholders (plan/addresses.py, also inside the AFD config's JSON) expandable."""
    if arg.startswith("${") and arg.endswith("}") and "$" not in arg[1:]:
        return f'"{arg}"'
    if placeholders(arg):
        return '"' + re.sub(r'(["\\`]|\$(?!\{AFD_E2E_))', r"\\\1", arg) + '"'
    return shlex.quote(arg)


def _where(process: ProcessPlan) -> str:
    """Which agent runs the process: the leader's (the job that runs the workloads) or a follower job's pool."""
    placement = process.placement
    if placement is None:
        return "on the leader's agent"
    node = f", node {placement.node + 1} of {placement.nodes}" if placement.nodes > 1 else ""
    return f"in a follower job on an agent with {placement.pool} (interface {placement.interface}{node})"


def _addresses(case: CasePlan) -> list[str]:
    if not case.rendezvous and not any(LISTEN_HOST in a for p in case.processes for a in p.argv):
        return []
    lines = [f"# roles on several agents: ${{{LISTEN_HOST}}} is each agent's own interface address (it listens there)"]
    lines += [
        f"# ${{{variable}}}: the address published in build meta-data {meta_data_key('<leader job>', key)}"
        for variable, key in sorted(case.rendezvous.items())
    ]
    return lines


def _uses_out_dir(plan: RunPlan) -> bool:
    return any(process.out_dir_env for case in plan.cases for process in case.processes)


def render_text(plan: RunPlan) -> str:
    lines = [
        f"# profile {plan.profile} ({plan.platform}){'  SMOKE profile: accuracy not meaningful' if plan.smoke_only else ''}",
        f"# model {plan.model_path}",
        f"# for vLLM {plan.vllm_version}: the flags that depend on its version follow it (plan/vllm_versions.py)"
        if plan.vllm_version
        else "# vLLM version not known: flags that exist only from some vLLM version (--shutdown-timeout) left out",
        *(["# OUT: the run's results folder (afd-e2e run --out)"] if _uses_out_dir(plan) else []),
        f"# devices {','.join(map(str, plan.devices)) or '(cpu)'}; {len(plan.cases)} cases, {plan.model_loads} model loads",
    ]
    for case in plan.cases:
        lines += ["", f"## case {case.id}: {case.label} — phases {', '.join(case.phases)}"]
        if case.description:
            lines.append(f"# {case.description}")
        lines.append(f"# ready when GET {case.ready_url} answers 200; ports {', '.join(map(str, case.ports))}")
        lines += _addresses(case)
        for order, process in enumerate(case.processes, 1):
            devices = ",".join(map(str, process.devices)) or "cpu"
            where = f", {_where(process)}" if case.remote_processes else ""
            lines.append(f"# {order}. {process.name} (devices {devices}{where})")
            unset = " ".join(f"-u {shlex.quote(v)}" for v in process.env_unset)
            env = " ".join(f"{k}={shlex.quote(v)}" for k, v in sorted(process.env_set.items()))
            env += "".join(f' {k}="$OUT"/{shlex.quote(v)}' for k, v in sorted(process.out_dir_env.items()))
            command = " ".join(_quote(a) for a in process.argv)
            background = " &" if order < len(case.processes) else ""
            lines.append(f"env {unset} {env} \\\n  setsid {command}{background}".replace("env  ", "env "))
    if plan.comparisons:
        lines += ["", "## comparisons"]
        lines += [
            f"# {c.id}: {c.baseline} vs {c.candidate} ({', '.join(c.measures)})"
            + (" - control, not in the verdict" if c.control else "")
            for c in plan.comparisons
        ]
    if plan.series:
        lines += ["", "## series (ranged comparisons: repetitions added until decided)"]
        lines += [f"# {s.comparison}: {s.describe()}" for s in plan.series]
    return "\n".join(lines) + "\n"
