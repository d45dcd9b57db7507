"""Plans as text a person can paste into a shell to reproduce a case by hand."""

from __future__ import annotations

import shlex

from afd_e2e.plan.model import RunPlan


def _quote(arg: str) -> str:
    """Quote for a shell, leaving an unset-model placeholder like ``${AFD_GPU_E2E_MODEL}`` expandable."""
    if arg.startswith("${") and arg.endswith("}"):
        return f'"{arg}"'
    return shlex.quote(arg)


def _uses_out_dir(plan: RunPlan) -> bool:
    return any(process.out_dir_env for case in plan.cases for process in case.processes)


def render_text(plan: RunPlan) -> str:
    lines = [
        f"# profile {plan.profile} ({plan.platform}){'  SMOKE profile: accuracy not meaningful' if plan.smoke_only else ''}",
        f"# model {plan.model_path}",
        *(["# OUT: the run's results folder (afd-e2e run --out)"] if _uses_out_dir(plan) else []),
        f"# devices {','.join(map(str, plan.devices)) or '(cpu)'}; {len(plan.cases)} cases, {plan.model_loads} model loads",
    ]
    for case in plan.cases:
        lines += ["", f"## case {case.id}: {case.label} — phases {', '.join(case.phases)}"]
        if case.description:
            lines.append(f"# {case.description}")
        lines.append(f"# ready when GET {case.ready_url} answers 200; ports {', '.join(map(str, case.ports))}")
        for order, process in enumerate(case.processes, 1):
            devices = ",".join(map(str, process.devices)) or "cpu"
            lines.append(f"# {order}. {process.name} (devices {devices})")
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
    return "\n".join(lines) + "\n"
