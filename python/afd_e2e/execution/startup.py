"""What a role's start-up log says it did, in vLLM's own words (the same on vLLM 0.26 for CUDA and 0.32 for the
CPU, read from their sources and real logs: ``tests/fixtures/execution/``):

- the engine's resolved config (``Initializing a V1 LLM engine ... compilation_config={'mode':
  <CompilationMode.VLLM_COMPILE: 3>, ... 'cudagraph_mode': <CUDAGraphMode.FULL_DECODE_ONLY: ...>,
  'cudagraph_capture_sizes': [64], ...``);
- compilation: ``torch.compile took X s in total``, ``Compiling a graph for compile range``, ``Directly load the
  compiled graph(s)``, ``Dynamo bytecode transform time``, AOT ``saved``/``Directly load AOT compilation``;
- eager: ``Enforce eager set, disabling torch.compile ...``, ``Cudagraph is disabled under eager mode``;
- graph capture: ``Capturing CUDA graphs (decode, FULL)`` (the progress bar) and ``Graph capturing finished in
  N secs, took X GiB``;
- the AFD connector's set-up: a line naming the connector the role was asked for;
- the model runner (the 12-05 GPU run's logs, ``../shared/fixtures/gpu/runs-2026-12-05``): ModelRunnerV2 logs
  ``Using V2 Model Runner`` from its worker (GPU and CPU) and loads through ``[model_runner.py]``; the V1 runner logs
  no such line and loads through ``[gpu_model_runner.py]`` (``[cpu_model_runner.py]`` on the CPU), and vLLM's
  fallback says ``using the V1 model runner instead``. "Initializing a V1 LLM engine" names the engine, not the
  runner, in both.

A capture is quoted by its completion line (``Graph capturing finished in ...``), which says the graphs exist; the
progress bar's first frame is kept only where no completion line was logged.
"""

from __future__ import annotations

import re

from afd_e2e.results.execution_records import MAX_EVIDENCE_LINES, MAX_LINE_CHARS, StartupEvidence

_CONFIG = re.compile(r"Initializing a V1 LLM engine")
_CONFIG_MODE = re.compile(r"compilation_config=\{'mode': <CompilationMode\.(\w+)")
_CONFIG_GRAPHS = re.compile(r"'cudagraph_mode': <CUDAGraphMode\.(\w+)")
_CONFIG_SIZES = re.compile(r"'cudagraph_capture_sizes': \[([\d, ]*)\]")
_COMPILE_TOTAL = re.compile(r"torch\.compile took ([\d.]+) s in total")
_COMPILED = re.compile(
    r"Compiling a graph for compile range|Directly load the compiled graph|Dynamo bytecode transform time|"
    r"saved AOT compiled function|Directly load AOT compilation|torch\.compile took"
)
_EAGER = re.compile(r"Enforce eager set, disabling torch\.compile|Cudagraph is disabled under eager mode")
_CAPTURING = re.compile(r"Capturing CUDA graphs \(([^)]*)\)")
_CAPTURED = re.compile(r"Graph capturing finished in ([\d.]+) secs?, took ([\d.]+) GiB")
_NO_GRAPH_MODES = ("NONE",)
_RUNNER_V2 = re.compile(r"Using V2 Model Runner")
_RUNNER_V1 = re.compile(r"\[(?:gpu|cpu|xpu)_model_runner\.py:\d+\]|using the V1 model runner instead")


def _cut(line: str) -> str:
    line = line.rstrip()
    if len(line) <= MAX_LINE_CHARS:
        return line
    return line[:MAX_LINE_CHARS] + f" [{len(line) - MAX_LINE_CHARS} characters cut]"


def read_startup(text: str, log: str, connector: str | None = None) -> StartupEvidence:
    """The evidence in one role's log ``text`` (``log``: its path as results.json names it)."""
    found = StartupEvidence(log=log)
    kept: dict[str, str] = {}  # one exact line per kind, in the order first seen

    def keep(kind: str, line: str) -> None:
        kept.setdefault(kind, _cut(line.split("\r")[-1]))

    for line in text.splitlines():
        if _CONFIG.search(line):
            if m := _CONFIG_MODE.search(line):
                found.engine_compile_mode = m.group(1)
            if m := _CONFIG_GRAPHS.search(line):
                found.engine_cudagraph_mode = m.group(1)
            if m := _CONFIG_SIZES.search(line):
                found.engine_capture_sizes = [int(v) for v in m.group(1).replace(",", " ").split()]
        if _EAGER.search(line):
            found.eager = True
            keep("eager", line)
        if _COMPILED.search(line):
            found.compiled = True
            keep("compiled", line)
            if m := _COMPILE_TOTAL.search(line):
                found.compile_s = float(m.group(1))
                kept["compiled"] = _cut(line)
        for m in _CAPTURING.finditer(line):
            if m.group(1) not in found.capture_modes:
                found.capture_modes.append(m.group(1))
                keep(f"capturing {m.group(1)}", line[m.start() :])
        if m := _CAPTURED.search(line):
            found.graphs_captured = True
            found.capture_s, found.capture_gib = float(m.group(1)), float(m.group(2))
            keep("captured", line)
        if _RUNNER_V2.search(line):
            found.model_runner = "v2"
            kept.pop("runner", None)
            keep("runner", line)
        elif found.model_runner is None and _RUNNER_V1.search(line):
            found.model_runner = "v1"
            keep("runner", line)
        if connector and connector in line and "non-default args" not in line and not _CONFIG.search(line):
            found.connector_line = True
            keep("connector", line)
    if found.engine_compile_mode == "NONE" and found.compiled is None:
        found.compiled = False
    if found.engine_cudagraph_mode in _NO_GRAPH_MODES and found.graphs_captured is None:
        found.graphs_captured = False
    if found.capture_modes and found.graphs_captured is None:
        found.graphs_captured = True  # the capture began; its end line may not be flushed yet
    if "captured" in kept:  # the completion line says the graphs exist; the bar's first frame says nothing more
        kept = {kind: line for kind, line in kept.items() if not kind.startswith("capturing ")}
    if "runner" in kept:  # last: a mode's verdict quotes the first kept line that names it
        kept["runner"] = kept.pop("runner")
    found.lines = list(kept.values())[:MAX_EVIDENCE_LINES]
    return found
