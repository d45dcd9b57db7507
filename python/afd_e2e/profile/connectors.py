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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from afd_e2e.profile.reader import Reader

FFN_FIRST, ATTENTION_FIRST = "ffn_first", "attention_first"
LAUNCH_ORDERS = {FFN_FIRST: ("ffn", "attention"), ATTENTION_FIRST: ("attention", "ffn")}
AFD_ROLES = ("attention", "ffn")
DEFAULT_CONNECTOR = "P2pNcclAFDConnector"
# The AFD config fields the plan writes for every connector (``plan/serve_argv.py``): a trait's config may not.
PLANNED_FIELDS = ("role", "connector", "host", "port", "num_attention_ranks", "num_ffn_ranks", "connector_extra_config")


@dataclass(frozen=True)
class ConnectorTraits:
    """What the plan must know of one connector to launch it: the order of its roles, the role whose rank 0 hosts
    the rendezvous, the ``connector_extra_config`` keys it accepts (None: not listed, so not checked) and the AFD
    config fields it needs set (``{"async": True}``)."""

    launch_order: str  # a key of LAUNCH_ORDERS
    rendezvous_role: str  # "ffn" | "attention"
    extra_keys: tuple[str, ...] | None = ()
    config: Mapping[str, Any] = field(default_factory=dict)

    @property
    def roles_in_launch_order(self) -> tuple[str, str]:
        first, second = LAUNCH_ORDERS[self.launch_order]
        return first, second


_ASYNC = {"async": True}
KNOWN: Mapping[str, ConnectorTraits] = {
    "P2pNcclAFDConnector": ConnectorTraits(FFN_FIRST, "ffn", extra_keys=()),
    "CAMP2pAFDConnector": ConnectorTraits(
        FFN_FIRST,
        "ffn",
        extra_keys=("core_num", "attn_core_num", "ffn_core_num", "compute_gate_on_attention", "quant_mode"),
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
    ),
}


def read_declared(r: Reader) -> dict[str, ConnectorTraits]:
    """``connectors: {<name>: {launch_order, rendezvous_role, extra_keys, config}}``: the traits of a connector the
    table does not know (or newer traits of one it does), for this profile's cases. ``rendezvous_role`` defaults to
    the role launched first; without ``extra_keys`` a case's ``connector_extra_config`` is passed unchecked."""
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
        declared[str(name)] = ConnectorTraits(launch_order, rendezvous_role, extra_keys, config)
        c.done()
    r.done()
    return declared


def resolve(r: Reader, name: str, declared: Mapping[str, ConnectorTraits]) -> ConnectorTraits:
    """A case's connector's traits: the profile's declaration, else the table's; neither is a one-line error."""
    if name not in declared and name not in KNOWN:
        r.fail(
            r.key("connector"),
            f"unknown connector {name!r} (known: {', '.join(KNOWN)})",
            f"use a known one, or declare its traits: connectors: {{{name}: {{launch_order: {' | '.join(LAUNCH_ORDERS)}}}}}",
        )
    return declared.get(name) or KNOWN[name]


def check_extra_config(r: Reader, name: str, traits: ConnectorTraits, extra: Mapping[str, Any]) -> None:
    """Refuse a ``connector_extra_config`` key the connector's traits do not list, as the plugin would at start-up,
    but before anything launches."""
    if traits.extra_keys is None:
        return
    for key in extra:
        if key not in traits.extra_keys:
            known = f"use some of: {', '.join(traits.extra_keys)}" if traits.extra_keys else "remove it: it takes none"
            r.fail(r.key(f"connector_extra_config.{key}"), f"{name} has no connector_extra_config key {key!r}", known)
