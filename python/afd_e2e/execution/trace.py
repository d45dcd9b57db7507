"""What a role's torch profiler traces show it launched: CUDA graph launches (``cudaGraphLaunch``) and kernel
launches (``cudaLaunchKernel``, ``cuLaunchKernel``, ``cuLaunchKernelEx``, ...) from the CUDA runtime and driver
events, per engine step where the trace annotates its steps.

vLLM's worker annotates every profiled step ``execute_context_N(T)_generation_M(G)`` (``gpu_worker.py``
``annotate_profile``): N context (prefill) requests with T tokens, M generation (decode) requests with G tokens.
A step with N > 0 is a prefill step (mixed batches included), one with M > 0 only a decode step; a step with neither
(``execute_context_0(0)_generation_0(0)``: vLLM 0.26 on one H200 runs two after each request, ~0.3 ms, no launch) did
no model work and is no step of either kind, so that "graph launches per decode step" counts decode work only. A
launch belongs to the step whose annotation spans its start on the same process (the annotation's GPU-side copy is
not a step). A trace without annotations gives totals only.
"""

from __future__ import annotations

import bisect
import gzip
import json
import re
from pathlib import Path

from afd_e2e.results.execution_records import RuntimeEvidence, StepCounts

_STEP = re.compile(r"^execute_context_(\d+)\((\d+)\)_generation_(\d+)\((\d+)\)")
_GRAPH = ("cudaGraphLaunch", "cuGraphLaunch")
_KERNEL = re.compile(r"^(cudaLaunchKernel|cuLaunchKernel|cudaLaunchCooperativeKernel|cuLaunchCooperativeKernel)")


def trace_files(folder: Path) -> list[Path]:
    """A role's trace files (``*.json``, ``*.json.gz``), in name order."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.rglob("*") if p.is_file() and re.search(r"\.json(\.gz)?$", p.name))


def _events(path: Path) -> list[dict]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        document = json.load(handle)
    events = document.get("traceEvents", []) if isinstance(document, dict) else document
    return [e for e in events if isinstance(e, dict) and e.get("ph") == "X"]


def _add(counts: StepCounts, graphs: int, kernels: int) -> None:
    counts.graph_launches += graphs
    counts.kernel_launches += kernels


def read_traces(paths: list[Path], names: list[str]) -> RuntimeEvidence:
    """Launch counts over every trace of one role (``names``: the paths as results.json names them)."""
    evidence = RuntimeEvidence(traces=names, split=False)
    for path in paths:
        events = _events(path)
        steps: dict[object, list[tuple[float, float, bool]]] = {}  # pid -> (start, end, prefill), sorted
        launches: list[tuple[object, float, int, int]] = []
        for event in events:
            name = str(event.get("name", ""))
            if (m := _STEP.match(name)) and event.get("cat") != "gpu_user_annotation":  # not its GPU-side copy
                if m[1] == "0" and m[3] == "0":
                    continue  # an empty step: no request was run
                start = float(event.get("ts", 0))
                steps.setdefault(event.get("pid"), []).append((start, start + float(event.get("dur", 0)), m[1] != "0"))
            elif name in _GRAPH:
                launches.append((event.get("pid"), float(event.get("ts", 0)), 1, 0))
            elif _KERNEL.match(name):
                launches.append((event.get("pid"), float(event.get("ts", 0)), 0, 1))
        for spans in steps.values():
            spans.sort()
            for _, _, prefill in spans:
                evidence.split = True
                (evidence.prefill if prefill else evidence.decode).steps += 1
        evidence.total.steps += sum(len(s) for s in steps.values())
        for pid, ts, graphs, kernels in launches:
            _add(evidence.total, graphs, kernels)
            spans = steps.get(pid, [])
            i = bisect.bisect_right(spans, (ts, float("inf"), True)) - 1
            if i >= 0 and spans[i][0] <= ts <= spans[i][1]:
                _add(evidence.prefill if spans[i][2] else evidence.decode, graphs, kernels)
    return evidence
