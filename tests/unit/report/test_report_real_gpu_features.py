"""Two real runs on 2x H200 (CUDA vLLM 0.26.0 + the AFD plugin, tiny random DeepSeek-V2), brought back from the
device machine and rendered here again: ``tiny-gpu-features`` (AFD 1A1F eager vs CUDA graph vs DBO, profiler traces,
serving checks) and ``tiny-gpu-1a1f`` with FULL_DECODE_ONLY CUDA graphs (native DP1 vs AFD 1A1F). Both recorded the
preflight they took at their start. The features run's results.json is stored gzipped (3.4 MB as written: every
replay request keeps its top-k logprobs)."""

from __future__ import annotations

import gzip
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

from afd_e2e.report import render_all
from afd_e2e.results import load_results
from afd_e2e.results.status import Status
from junit_xsd import assert_valid_junit

from .conftest import FIXTURES

FEATURES = "tiny-gpu-features"
CUDAGRAPH = "tiny-gpu-1a1f-cudagraph"


def copied_run(name: str, tmp_path: Path) -> Path:
    out = tmp_path / name
    out.mkdir()
    stored = FIXTURES / name / "results.json"
    if stored.exists():
        shutil.copy(stored, out / "results.json")
    else:
        (out / "results.json").write_bytes(gzip.decompress((FIXTURES / name / "results.json.gz").read_bytes()))
    return out


def before_artifacts(annotation: str) -> str:
    """The annotation up to its artifact list (the fixtures keep results.json, not every log the device wrote)."""
    return annotation.partition("### Artifacts")[0]


def test_the_feature_matrix_ran_clean_and_graph_replay_needed_closeness(tmp_path: Path) -> None:
    results = load_results(copied_run(FEATURES, tmp_path))
    assert results.verdict.status is Status.PASSED and results.environment.vllm == "0.26.0"
    assert results.preflight is not None and results.preflight.status is Status.PASSED
    assert set(results.cases) == {"native-dp1", "afd-1a1f", "afd-1a1f-graph", "afd-1a1f-dbo"}
    for case in results.cases.values():
        assert {h.check: h.status for h in case.hygiene} == dict.fromkeys(
            ("processes", "forced_kill", "ports", "gpu_memory", "leftover_files"), Status.PASSED
        )
    graph_argv = results.cases["afd-1a1f-graph"].processes[-1].argv
    assert "--cudagraph-capture-sizes=64" in graph_argv and "--enforce-eager" not in graph_argv
    assert "--enable-dbo" in results.cases["afd-1a1f-dbo"].processes[-1].argv
    eager_vs_graph = results.comparisons["eager-vs-graph"].parity
    assert eager_vs_graph is not None and eager_vs_graph.close >= 1 and eager_vs_graph.different == 0


def test_the_feature_run_renders_like_the_device_did(tmp_path: Path) -> None:
    paths = render_all(copied_run(FEATURES, tmp_path))
    body = paths.annotation.read_text(encoding="utf-8")
    assert body.splitlines()[0] == "## ✅ SMOKE afd-e2e tiny\\-gpu\\-features: passed"
    assert "| GPU0 | X | NV18 |" in body  # the preflight's link matrix, as NVML read it there
    assert "🟰 close" in body and "requests 153/192 identical, 39 close" in body
    assert "model 'afd\\-e2e\\-no\\-such\\-model' rejected with HTTP 404" in body
    assert body.count("artifact://profiles/afd-1a1f/") >= 2  # one trace per role, linked
    assert before_artifacts(body) == before_artifacts(
        (FIXTURES / FEATURES / "annotation.md").read_text(encoding="utf-8")
    )
    rendered = assert_valid_junit(paths.junit[0])
    on_device = ET.parse(FIXTURES / FEATURES / "junit" / f"{FEATURES}-1.xml").getroot()
    assert len(rendered.findall(".//testcase")) == len(on_device.findall(".//testcase")) > 0
    assert not rendered.findall(".//failure") and not rendered.findall(".//error")


def test_native_vs_afd_with_cuda_graphs_recorded_its_preflight_and_agreed(tmp_path: Path) -> None:
    out = copied_run(CUDAGRAPH, tmp_path)
    results = load_results(out)
    assert results.verdict.status is Status.PASSED
    assert results.preflight is not None and results.preflight.status is Status.PASSED
    attention = results.cases["afd-1a1f"].processes[-1].argv
    assert '--compilation-config={"cudagraph_mode":"FULL_DECODE_ONLY"}' in attention
    assert "--enforce-eager" not in attention
    parity = results.comparisons["correctness"].parity
    assert parity is not None and parity.status is Status.PASSED and parity.different == 0
    paths = render_all(out)
    on_device = (FIXTURES / CUDAGRAPH / "annotation.md").read_text(encoding="utf-8")
    assert before_artifacts(paths.annotation.read_text(encoding="utf-8")) == before_artifacts(on_device)
    assert_valid_junit(paths.junit[0])
