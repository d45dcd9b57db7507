"""What a role's planned argv asks of its execution: ``--enforce-eager``, ``--compilation-config`` (``-cc``/``-O``:
mode or level, ``cudagraph_mode``, capture sizes), ``--cudagraph-capture-sizes``, ``--enable-dbo`` and the AFD
connector in ``--additional-config``; and of its environment, the model runner (``VLLM_USE_V2_MODEL_RUNNER``).
Flags not given leave the engine's default: compiled, and on CUDA graphs (vLLM's default ``FULL_AND_PIECEWISE``);
the CPU has no CUDA graphs. A runner not set is vLLM's own choice."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from afd_e2e.profile.model import MODEL_RUNNER_ENV
from afd_e2e.results.execution_records import ExecutionAsked

EAGER, COMPILED, GRAPHS = "eager", "compiled", "cuda graphs"
NO_GRAPHS = ("NONE",)


def _values(argv: Sequence[str], flags: tuple[str, ...]) -> list[str]:
    """Every value given to one of ``flags`` (``--flag=v`` or ``--flag v``), in order."""
    out: list[str] = []
    for i, arg in enumerate(argv):
        for flag in flags:
            if arg == flag and i + 1 < len(argv):
                out.append(argv[i + 1])
            elif arg.startswith(flag + "="):
                out.append(arg[len(flag) + 1 :])
    return out


def _json(text: str) -> dict:
    try:
        value = json.loads(text)
    except ValueError:
        return {"mode": text} if text.isdigit() else {}  # -O3 / -cc 3: a level
    return value if isinstance(value, dict) else {"mode": value}


def _sizes(text: str) -> list[int]:
    return [int(v) for v in text.replace("[", "").replace("]", "").replace(",", " ").split() if v.isdigit()]


def runner_of(env: Mapping[str, str]) -> str | None:
    """The runner a child's environment asks for, read as vLLM reads the variable (``bool(int(value))``), else
    None (not set, or not an integer: vLLM would refuse to start)."""
    value = env.get(MODEL_RUNNER_ENV, "").strip()
    if not value.lstrip("-").isdigit():
        return None
    return "v2" if int(value) else "v1"


def asked_of(argv: Sequence[str], platform: str, env: Mapping[str, str] | None = None) -> ExecutionAsked:
    config: dict = {}
    for text in _values(argv, ("--compilation-config", "-cc", "-O")):
        config.update(_json(text))
    compile_mode = config.get("mode", config.get("level"))
    compile_mode = None if compile_mode is None else str(compile_mode)
    cudagraph_mode = config.get("cudagraph_mode")
    sizes = [int(s) for s in config.get("cudagraph_capture_sizes", []) if isinstance(s, int)]
    for text in _values(argv, ("--cudagraph-capture-sizes",)):
        sizes = _sizes(text)
    connector = None
    for text in _values(argv, ("--additional-config",)):
        connector = (_json(text).get("afd") or {}).get("connector", connector)
    dbo = "--enable-dbo" in argv
    eager = "--enforce-eager" in argv or compile_mode in ("0", "NONE", "none")
    graphs = not eager and platform == "cuda" and str(cudagraph_mode or "FULL_AND_PIECEWISE").upper() not in NO_GRAPHS
    if eager:
        mode, text = EAGER, "eager (--enforce-eager)" if "--enforce-eager" in argv else "eager (compile mode NONE)"
    elif graphs:
        count = (
            f"{len(sizes)} size{'s' if len(sizes) != 1 else ''} ({', '.join(map(str, sizes[:4]))})"
            if sizes
            else ("the default sizes")
        )
        mode, text = GRAPHS, f"compiled, CUDA graphs {cudagraph_mode or 'FULL_AND_PIECEWISE (default)'} at {count}"
    else:
        mode = COMPILED
        text = "compiled" + (", no CUDA graphs (CPU)" if platform != "cuda" else ", CUDA graphs off")
    if dbo:
        text += ", DBO"
    if connector:
        text += f", AFD connector {connector}"
    runner = runner_of(env or {})
    if runner:
        text += f", model runner {runner.upper()}"
    return ExecutionAsked(mode, text, compile_mode, cudagraph_mode, sizes, dbo, connector, runner)
