"""Same software on every agent of a case: each agent publishes what it runs, and any difference fails the case.

Parity between a case spread over agents and its single-agent twin means nothing when the agents run different
code or weights. At the rendezvous every agent (the leader and each follower) publishes an ``AgentIdentity`` in
build meta-data (``to_meta_data``; key ``<case>/<process>/identity``, ``board.py``); the leader reads them all and ``identity_mismatches`` names every
field that differs, with both sides. ``checks`` turns that into preflight checks (the one status vocabulary), so
the mismatch reaches results.json, JUnit and the annotation as every other agent check does.

What is compared: afd-e2e's version, vLLM's version (as its own interpreter reports it: the software probe),
the AFD plugin's distribution version, and the checkpoint's fingerprint (config.json, canonical, plus each
safetensors file's name and size: a stat per shard, no weights read).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from afd_e2e import __version__
from afd_e2e.errors import UsageError
from afd_e2e.preflight.checks import failed, passed
from afd_e2e.preflight.software import InstalledSoftware
from afd_e2e.results.model import PreflightCheck

SAME_SOFTWARE = "same software"  # the preflight check's name prefix


@dataclass(frozen=True)
class AgentIdentity:
    """What one agent of a multi-agent case runs. ``None``: not found there (a difference like any other)."""

    agent: str  # BUILDKITE_AGENT_NAME
    hosts: str  # what it runs: "leader", or the process it hosts ("ffn", "attention-node1")
    afd_e2e: str
    vllm: str | None
    afd_plugin: str | None
    checkpoint: str | None

    def to_meta_data(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_meta_data(cls, text: str, key: str) -> AgentIdentity:
        """The identity another agent published; anything else is a one-line error naming the key."""
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or set(data) != {f.name for f in fields(cls)}:
                raise ValueError(f"fields {sorted(data) if isinstance(data, dict) else type(data).__name__}")
            if not all(isinstance(v, str) or (v is None and f not in ("agent", "hosts")) for f, v in data.items()):
                raise ValueError("a value is not text")
            return cls(**data)
        except ValueError as exc:
            raise UsageError(
                f"meta-data {key}: not an agent identity ({exc})", "every agent of the case must run this afd-e2e"
            ) from exc

    @property
    def side(self) -> str:
        return f"agent {self.agent} ({self.hosts})"


COMPARED = {"afd_e2e": "afd-e2e", "vllm": "vLLM", "afd_plugin": "AFD plugin", "checkpoint": "checkpoint"}


@dataclass(frozen=True)
class IdentityMismatch:
    """One thing two agents of a case run differently."""

    what: str  # a key of COMPARED
    reference: AgentIdentity  # the leader's side
    other: AgentIdentity

    @property
    def message(self) -> str:
        mine, theirs = getattr(self.reference, self.what), getattr(self.other, self.what)
        return (
            f"{COMPARED[self.what]} differs: {theirs or 'not found'} on {self.other.side}, "
            f"{mine or 'not found'} on {self.reference.side}"
        )


def identity_mismatches(identities: Sequence[AgentIdentity]) -> tuple[IdentityMismatch, ...]:
    """Every difference from the first identity (the leader's), field by field, agent by agent."""
    if not identities:
        return ()
    reference, *others = identities
    return tuple(
        IdentityMismatch(what, reference, other)
        for other in others
        for what in COMPARED
        if getattr(other, what) != getattr(reference, what)
    )


def checks(identities: Sequence[AgentIdentity]) -> list[PreflightCheck]:
    """One check per compared field: passed when every agent agrees, else failed naming both sides."""
    mismatches = identity_mismatches(identities)
    agents = ", ".join(i.side for i in identities)
    out = []
    for what, label in COMPARED.items():
        name = f"{SAME_SOFTWARE}: {label}"
        wanted = f"{getattr(identities[0], what) or 'not found'} on every agent"
        found = [m for m in mismatches if m.what == what]
        if found:
            fix = "install the same release on every agent pool of the case (and stage the same checkpoint)"
            out.append(failed(name, "; ".join(m.message for m in found), wanted, fix))
        else:
            out.append(passed(name, f"{getattr(identities[0], what) or 'not found'} on {agents}", wanted))
    return out


def checkpoint_fingerprint(folder: Path) -> str | None:
    """sha256 of config.json (canonical JSON) and every safetensors file's name and size; None without a
    readable config.json."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    shards = sorted((p.name, p.stat().st_size) for p in folder.glob("*.safetensors") if p.is_file())
    digest = hashlib.sha256(json.dumps({"config": config, "shards": shards}, sort_keys=True).encode())
    return "sha256:" + digest.hexdigest()[:16]


def identity_of(agent: str, hosts: str, installed: InstalledSoftware, model_path: str | None) -> AgentIdentity:
    """This agent's identity, from the software probe preflight already ran and the checkpoint folder."""
    return AgentIdentity(
        agent=agent,
        hosts=hosts,
        afd_e2e=__version__,
        vllm=installed.vllm,
        afd_plugin=installed.afd_plugin_version,
        checkpoint=checkpoint_fingerprint(Path(model_path)) if model_path else None,
    )
