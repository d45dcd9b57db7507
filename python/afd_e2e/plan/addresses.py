"""Addresses of a case whose roles run on several agents: where each process listens, and where the others find it.

The two are split. A process listens only on its own agent's interface (the profile names it: ``engine.interface``
for the leader, ``placement.<role>.interface`` for a follower pool), never on every interface; that address is
known only on the agent, so the plan says ``${AFD_E2E_LISTEN_HOST}`` and the agent fills it in (a literal
``placement.<role>.listen`` is used as written). A process on another agent reaches it at its rendezvous
address, which its agent publishes in this build's meta-data at run time; the plan says
``${AFD_E2E_HOST_<PROCESS>}`` and names the meta-data key (``CasePlan.rendezvous``). Both placeholders are shell
variables, so ``afd-e2e plan``'s text stays paste-able on each agent once they are set.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import replace

from afd_e2e.errors import UsageError
from afd_e2e.plan.model import CasePlan, ProcessPlan

LISTEN_HOST = "AFD_E2E_LISTEN_HOST"  # on every agent: the address of its own interface
LEADER = "leader"  # the agent of the job that runs the workloads
_PLACEHOLDER = re.compile(r"\$\{(AFD_E2E_(?:LISTEN_HOST|HOST_[A-Z0-9_]+))\}")


def placeholder(variable: str) -> str:
    return "${" + variable + "}"


def rendezvous_variable(process: str) -> str:
    """``ffn-node1`` -> ``AFD_E2E_HOST_FFN_NODE1``: where the other agents find that process."""
    return "AFD_E2E_HOST_" + re.sub(r"[^A-Z0-9]", "_", process.upper())


def rendezvous_key(case_id: str, process: str) -> str:
    """The meta-data key (below the leader job's prefix, ``meta_data_key``) of a process's rendezvous address."""
    return f"{case_id}/{process}/host"


def meta_data_key(leader_job: str, key: str) -> str:
    """A key of one leader's rendezvous: every key of a build's multi-agent case sits below its leader's job id,
    so a retried leader, or another profile's leader in the same build, never reads a stale address."""
    return f"afd-e2e/{leader_job}/{key}"


def placeholders(text: str) -> tuple[str, ...]:
    """The address variables ``text`` names, in order."""
    return tuple(dict.fromkeys(_PLACEHOLDER.findall(text)))


def fill_addresses(text: str, values: Mapping[str, str]) -> str:
    """``text`` with each address placeholder replaced; one without a value is a one-line error naming it."""
    missing = [name for name in placeholders(text) if name not in values]
    if missing:
        raise UsageError(
            f"no address for {', '.join(missing)} (in {text[:80]!r})",
            "a follower publishes its address in build meta-data before the leader starts its roles",
        )
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], text)


def resolve_case(case: CasePlan, values: Mapping[str, str], hosted: Collection[str]) -> CasePlan:
    """``case`` with every address placeholder of the processes this agent launches (``hosted``) and of its URLs
    filled in from ``values``; the other agents' processes are left as planned (their agents fill them in)."""

    def process(p: ProcessPlan) -> ProcessPlan:
        if p.name not in hosted:
            return p
        placement = p.placement and replace(p.placement, listen_host=fill_addresses(p.placement.listen_host, values))
        argv = tuple(fill_addresses(arg, values) for arg in p.argv)
        env = {name: fill_addresses(value, values) for name, value in p.env_set.items()}
        return replace(p, argv=argv, env_set=env, placement=placement)

    return replace(
        case,
        processes=tuple(process(p) for p in case.processes),
        base_url=fill_addresses(case.base_url, values),
        ready_url=fill_addresses(case.ready_url, values),
    )
