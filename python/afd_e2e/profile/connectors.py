"""The AFD connectors' traits, one table: which role launches first, which role's rank 0 hosts the rendezvous, the
``connector_extra_config`` keys each accepts and the AFD config fields each needs.

The plan reads launch order and rendezvous from here (``plan/build.py``), the AFD config argv its fields and extra
config (``plan/serve_argv.py``), and the profile reader checks a case's ``connector_extra_config`` against the keys
listed. A connector not in the table is refused unless its profile declares its traits (``connectors:``), so a new
connector is never launched the wrong way round by default.

Where each trait comes from (vllm-project/afd-plugin; 2e4378f is the 2026-08-08 snapshot, 6fa5b0d and 0005d8e later
files as indexed; read the installed plugin's own code where it differs):

- Launch order and rendezvous: every connector joins one process group at ``tcp://host:port`` whose world rank 0
  serves the store, so the role holding world rank 0 launches first and its rank 0 is the rendezvous. FFN first:
  ``afd_plugin/connectors/gpu/p2p.py`` (module docstring: world ``[F0, F1, ..., A0, A1, ...]``; 2e4378f) and
  ``afd_plugin/connectors/npu/camp2p.py`` ("FFN processes come first in the main AFD group"; 2e4378f). Attention
  first: ``afd_plugin/connectors/npu/async_cam.py`` (world ``[A0, A1, ..., F0, F1, ...]``; 2e4378f) and
  ``afd_plugin/connectors/gpu/async_gpu.py`` ("The world is Attention-first"; 6fa5b0d).
- Extra config keys: P2P accepts none (``P2pNcclAFDConnector.parse_extra_config`` refuses any; 2e4378f); CAMP2P
  ``_CAMP2P_EXTRA_CONFIG_FIELDS`` (``camp2p.py``, 2e4378f); CAM async ``_AFD_ASYNC_EXTRA_CONFIG_FIELDS``
  (``async_cam.py``: five keys at 0005d8e, a later version adds ``shared_ffn_pool``, ``cam_rendezvous_hosts`` and
  ``scheduler_host``, listed here so a newer plugin's keys pass); GPU async ``_GPU_ASYNC_EXTRA_CONFIG_FIELDS``
  (``async_gpu.py``, 6fa5b0d).
- AFD config fields: ``async: true`` for the asynchronous connectors (``afd_plugin/config.py`` refuses async with
  any other connector, and both async connectors' docstrings require it; 6fa5b0d), and
  ``compute_gate_on_attention: true`` for ``GpuAsyncAFDConnector`` (its docstring's supported deployment; 6fa5b0d).
- Topology (A Attention ranks, F FFN ranks, each DP x TP): P2P needs A >= F since afd-plugin PR #309 (merged
  after the 2026-08-08 snapshot, from issue #308: Attention rank a maps to FFN rank a*F//A); before it, ``validate_p2p_topology``
  (``afd_plugin/distributed/topology.py``, 2e4378f) also needed A a multiple of F, the rule a profile gets with
  ``software.afd_plugin_rules: before-pr-309``. CAMP2P needs A >= F (``camp2p.py``'s rank mapping, 2e4378f). The
  asynchronous connectors need only A, F >= 1 (``build_async_topology``: ``async_cam.py`` 2e4378f,
  ``connectors/async_topology.py`` b8c65d8; every Attention rank routes to every FFN rank). A declared connector's
  rule, not known, defaults to A >= F, the one the synchronous connectors have had in every version. The installed
  plugin's own ``parse_afd_config`` has the last word where it is installed (preflight's ``afd plugin config``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from afd_e2e.profile.reader import Reader

FFN_FIRST, ATTENTION_FIRST = "ffn_first", "attention_first"
LAUNCH_ORDERS = {FFN_FIRST: ("ffn", "attention"), ATTENTION_FIRST: ("attention", "ffn")}
AFD_ROLES = ("attention", "ffn")
DEFAULT_CONNECTOR = "P2pNcclAFDConnector"
# The AFD config fields the plan writes for every connector (``plan/serve_argv.py``): a trait's config may not.
PLANNED_FIELDS = ("role", "connector", "host", "port", "num_attention_ranks", "num_ffn_ranks", "connector_extra_config")
# ``software.afd_plugin_rules``: which plugin's rules the profile reader applies where they changed (the installed
# plugin is asked in preflight; this is what applies before that, or where it is not installed).
CURRENT_RULES, BEFORE_PR_309 = "current", "before-pr-309"
PLUGIN_RULES = (CURRENT_RULES, BEFORE_PR_309)


@dataclass(frozen=True)
class TopologyRule:
    """Which A (Attention ranks) and F (FFN ranks) a connector accepts, and where that rule is written."""

    name: str  # as a profile declares it (``connectors.<name>.topology``)
    text: str  # the rule as the error states it
    at_least_ffn: bool  # A >= F
    multiple_of_ffn: bool  # A % F == 0
    source: str = "declared in the profile"

    def allows(self, attention: int, ffn: int) -> bool:
        return (attention >= ffn or not self.at_least_ffn) and (attention % ffn == 0 or not self.multiple_of_ffn)

    def cited(self, source: str) -> TopologyRule:
        return replace(self, source=source)

    def fix(self, attention: int, ffn: int) -> str:
        if self.at_least_ffn and attention < ffn:
            return "give Attention at least as many ranks (dp * tp) as FFN, or fewer FFN ranks"
        return "make the Attention ranks (dp * tp) a multiple of the FFN ranks"


ANY_RATIO = TopologyRule("any", "A >= 1 and F >= 1", at_least_ffn=False, multiple_of_ffn=False)
AT_LEAST_FFN = TopologyRule("at_least_ffn", "A >= F", at_least_ffn=True, multiple_of_ffn=False)
MULTIPLE_OF_FFN = TopologyRule("multiple_of_ffn", "A >= F and A % F == 0", at_least_ffn=True, multiple_of_ffn=True)
TOPOLOGY_RULES = {rule.name: rule for rule in (AT_LEAST_FFN, MULTIPLE_OF_FFN, ANY_RATIO)}


@dataclass(frozen=True)
class ConnectorTraits:
    """What the plan must know of one connector to launch it: the order of its roles, the role whose rank 0 hosts
    the rendezvous, the ``connector_extra_config`` keys it accepts (None: not listed, so not checked), the AFD
    config fields it needs set (``{"async": True}``) and its topology rule, with the rule of an older plugin where
    it differed (``older_topology``, keyed by ``software.afd_plugin_rules``)."""

    launch_order: str  # a key of LAUNCH_ORDERS
    rendezvous_role: str  # "ffn" | "attention"
    extra_keys: tuple[str, ...] | None = ()
    config: Mapping[str, Any] = field(default_factory=dict)
    topology: TopologyRule = AT_LEAST_FFN
    older_topology: Mapping[str, TopologyRule] = field(default_factory=dict)

    def topology_rule(self, plugin_rules: str) -> TopologyRule:
        """The rule under the plugin the profile targets (``software.afd_plugin_rules``)."""
        return self.older_topology.get(plugin_rules, self.topology)

    @property
    def roles_in_launch_order(self) -> tuple[str, str]:
        first, second = LAUNCH_ORDERS[self.launch_order]
        return first, second


_ASYNC = {"async": True}
_ASYNC_TOPOLOGY = ANY_RATIO.cited("afd-plugin build_async_topology (connectors/async_topology.py)")
KNOWN: Mapping[str, ConnectorTraits] = {
    "P2pNcclAFDConnector": ConnectorTraits(
        FFN_FIRST,
        "ffn",
        extra_keys=(),
        topology=AT_LEAST_FFN.cited("afd-plugin PR #309"),
        older_topology={BEFORE_PR_309: MULTIPLE_OF_FFN.cited("afd-plugin validate_p2p_topology before PR #309")},
    ),
    "CAMP2pAFDConnector": ConnectorTraits(
        FFN_FIRST,
        "ffn",
        extra_keys=("core_num", "attn_core_num", "ffn_core_num", "compute_gate_on_attention", "quant_mode"),
        topology=AT_LEAST_FFN.cited("afd-plugin camp2p.py rank mapping"),
    ),
    "CAMAsyncAFDConnector": ConnectorTraits(
        ATTENTION_FIRST,
        "attention",
        extra_keys=(
            "dynamicQuant",
            "attn_ranks_per_dp",
            "async_moe_ubatching",
            "async_moe_num_ubatches",
            "async_moe_split",
            "shared_ffn_pool",
            "cam_rendezvous_hosts",
            "scheduler_host",
        ),
        config=_ASYNC,
        topology=_ASYNC_TOPOLOGY,
    ),
    "GpuAsyncAFDConnector": ConnectorTraits(
        ATTENTION_FIRST,
        "attention",
        extra_keys=(
            "attn_ranks_per_dp",
            "ring_depth",
            "recv_poll_timeout_ms",
            "async_moe_ubatching",
            "async_moe_num_ubatches",
            "async_moe_split",
        ),
        config={**_ASYNC, "compute_gate_on_attention": True},
        topology=_ASYNC_TOPOLOGY,
    ),
}


def read_declared(r: Reader) -> dict[str, ConnectorTraits]:
    """``connectors: {<name>: {launch_order, rendezvous_role, extra_keys, config, topology}}``: the traits of a
    connector the table does not know (or newer traits of one it does), for this profile's cases.
    ``rendezvous_role`` defaults to the role launched first; without ``extra_keys`` a case's
    ``connector_extra_config`` is passed unchecked; ``topology`` defaults to ``at_least_ffn`` (A >= F)."""
    declared = {}
    for name in r.data:
        c = r.child(str(name))
        assert c is not None
        launch_order = c.get("launch_order", str, fix=f"set launch_order to one of: {', '.join(LAUNCH_ORDERS)}")
        if launch_order not in LAUNCH_ORDERS:
            c.fail(
                c.key("launch_order"),
                f"unknown launch order {launch_order!r}",
                f"use one of: {', '.join(LAUNCH_ORDERS)}",
            )
        rendezvous_role = c.get("rendezvous_role", str, LAUNCH_ORDERS[launch_order][0])
        if rendezvous_role not in AFD_ROLES:
            c.fail(c.key("rendezvous_role"), f"unknown role {rendezvous_role!r}", f"use one of: {', '.join(AFD_ROLES)}")
        extra_keys = c.str_list("extra_keys") if "extra_keys" in c.data else None
        c.seen.add("extra_keys")  # optional: None passes a case's extra config unchecked
        config = dict(c.get("config", dict, {}))
        if planned := sorted(set(config) & set(PLANNED_FIELDS)):
            c.fail(c.key(f"config.{planned[0]}"), "is set by the plan for every connector", f"remove {planned[0]}")
        topology = c.get("topology", str, AT_LEAST_FFN.name)
        if topology not in TOPOLOGY_RULES:
            rules = ", ".join(f"{rule.name} ({rule.text})" for rule in TOPOLOGY_RULES.values())
            c.fail(c.key("topology"), f"unknown topology rule {topology!r}", f"use one of: {rules}")
        declared[str(name)] = ConnectorTraits(
            launch_order, rendezvous_role, extra_keys, config, topology=TOPOLOGY_RULES[topology]
        )
        c.done()
    r.done()
    return declared


def resolve_connector(r: Reader, name: str, declared: Mapping[str, ConnectorTraits]) -> ConnectorTraits:
    """A case's connector's traits: the profile's declaration, else the table's; neither is a one-line error."""
    if name not in declared and name not in KNOWN:
        r.fail(
            r.key("connector"),
            f"unknown connector {name!r} (known: {', '.join(KNOWN)})",
            f"use a known one, or declare its traits: connectors: {{{name}: {{launch_order: {' | '.join(LAUNCH_ORDERS)}}}}}",
        )
    return declared.get(name) or KNOWN[name]


def check_topology(
    r: Reader, case_id: str, name: str, traits: ConnectorTraits, plugin_rules: str, attention: int, ffn: int
) -> None:
    """Refuse a layout the connector's rule (under the plugin the profile targets) refuses, as the plugin would at
    start-up, but before anything launches; the installed plugin is asked again in preflight."""
    rule = traits.topology_rule(plugin_rules)
    if rule.allows(attention, ffn):
        return
    fix = rule.fix(attention, ffn)
    if traits.topology.allows(attention, ffn):  # an older plugin's rule: the current plugin takes this layout
        fix += f", or remove software.afd_plugin_rules: {plugin_rules} where the agents' plugin is current"
    r.fail(
        r.key("attention.dp"),
        f"case {case_id}'s layout {attention}A{ffn}F breaks {name}'s topology rule {rule.text} ({rule.source})",
        fix,
    )


def check_extra_config(r: Reader, name: str, traits: ConnectorTraits, extra: Mapping[str, Any]) -> None:
    """Refuse a ``connector_extra_config`` key the connector's traits do not list, as the plugin would at start-up,
    but before anything launches."""
    if traits.extra_keys is None:
        return
    for key in extra:
        if key not in traits.extra_keys:
            known = f"use some of: {', '.join(traits.extra_keys)}" if traits.extra_keys else "remove it: it takes none"
            r.fail(r.key(f"connector_extra_config.{key}"), f"{name} has no connector_extra_config key {key!r}", known)
