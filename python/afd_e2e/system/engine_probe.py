"""Ask the ``vllm`` that will be launched what it has: its interpreter (from the shebang) runs
``engine_probe_script.py`` as a bounded subprocess, so the answer is that environment's, not afd-e2e's own.

On agents where afd-e2e sits in its own virtual environment (the plugin's ``venv`` option), afd-e2e's interpreter
has no vLLM at all; reading metadata there reported vLLM missing or another install's version.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

PROBE_SCRIPT = Path(__file__).with_name("engine_probe_script.py")
PROBE_TIMEOUT_S = 30.0
ROUTING_TIMEOUT_S = 180.0  # imports vLLM and torch: about 11 s on a 2-core CPU machine


class ProbeFailed(Exception):
    """The executable's interpreter could not be found or did not answer (the message says which)."""


@dataclass(frozen=True)
class EngineSoftware:
    """What the interpreter of the ``vllm`` executable reports."""

    executable: str
    python: str
    vllm: str | None
    torch: str | None
    general_plugins: dict[str, str] = field(default_factory=dict)  # entry point name -> target
    routing_strategies: tuple[str, ...] | None = None  # None: not asked, or vLLM could not say
    routing_error: str | None = None
    plugin_versions: dict[str, str] = field(default_factory=dict)  # entry point name -> its distribution's version
    triton: str | None = None  # Triton's version there; None: absent (vLLM's Model Runner V2 refuses to start)
    bench_flags: tuple[str, ...] | None = None  # the flags ``vllm bench serve`` defines; None: could not be read


def _exec_target(lines: list[str]) -> list[str]:
    """The interpreter named by a shell wrapper's exec line: pip's trampoline for long paths (its second line) or
    a hand-written wrapper such as ``exec "/usr/bin/python3" -m vllm.entrypoints.cli.main "$@"``."""
    for line in lines[1:]:
        try:
            words = shlex.split(line, comments=True)
        except ValueError:
            continue
        if len(words) > 1 and words[0] == "exec":
            return words[1:2]
    return []


def interpreter_of(executable: str) -> str:
    """The Python a console script runs under: its shebang, or the ``exec`` line of a shell wrapper."""
    try:
        with open(executable, "rb") as handle:
            head = handle.read(4096).decode("utf-8", "replace").splitlines()
    except OSError as exc:
        raise ProbeFailed(f"cannot read {executable}: {exc.strerror}") from exc
    if not head or not head[0].startswith("#!"):
        raise ProbeFailed(f"{executable} has no #! line naming its Python")
    words = shlex.split(head[0][2:])
    if words and Path(words[0]).name == "env":
        words = [w for w in words[1:] if not w.startswith("-")][:1]
        words = [shutil.which(words[0]) or words[0]] if words else []
    if words and Path(words[0]).name in ("sh", "bash", "dash"):
        words = _exec_target(head)
        if words and os.sep not in words[0]:
            words = [shutil.which(words[0]) or words[0]]
    if not words:
        raise ProbeFailed(f"{executable}: cannot read the Python it runs from {head[0]!r} and its exec line")
    return words[0]


def probe_engine(
    executable: str, *, routing_strategies: bool = False, env: Mapping[str, str] | None = None
) -> EngineSoftware:
    """Run the probe in ``executable``'s interpreter; ProbeFailed when it cannot run or answer in time."""
    python = interpreter_of(executable)
    argv = [python, str(PROBE_SCRIPT), *(["--routing-strategies"] if routing_strategies else [])]
    timeout = ROUTING_TIMEOUT_S if routing_strategies else PROBE_TIMEOUT_S
    try:
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=dict(env if env is not None else os.environ),
            cwd="/",
        )
    except subprocess.TimeoutExpired as exc:
        raise ProbeFailed(f"{python} did not answer the probe within {timeout:.0f} s") from exc
    except OSError as exc:
        raise ProbeFailed(f"cannot run {python} (the interpreter of {executable}): {exc.strerror}") from exc
    lines = done.stdout.strip().splitlines()
    try:
        found = json.loads(lines[-1]) if done.returncode == 0 and lines else None
    except json.JSONDecodeError:
        found = None
    if not isinstance(found, dict):
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ProbeFailed(f"the probe in {python} exited {done.returncode}: {tail[:200]}")
    strategies = found.get("routing_strategies")
    return EngineSoftware(
        executable=executable,
        python=str(found.get("python") or python),
        vllm=found.get("vllm"),
        torch=found.get("torch"),
        general_plugins=dict(found.get("general_plugins") or {}),
        routing_strategies=tuple(strategies) if isinstance(strategies, list) else None,
        routing_error=found.get("routing_strategies_error"),
        plugin_versions=dict(found.get("plugin_versions") or {}),
        triton=found.get("triton"),
        bench_flags=tuple(flags) if isinstance(flags := found.get("bench_flags"), list) else None,
    )
