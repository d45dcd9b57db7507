"""A real GPU run renders: tiny-gpu-1a1f on 2x H200 with CUDA vLLM 0.26 and the AFD plugin (native vs AFD 1A1F),
its results.json brought back from the device machine and rendered here again."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

from afd_e2e.report import render_all
from junit_xsd import assert_valid_junit

from .conftest import FIXTURES, load_fixture

RUN = "tiny-gpu-1a1f"


def test_real_gpu_results_show_a_clean_native_vs_afd_run() -> None:
    results = load_fixture(RUN)
    assert results["verdict"]["status"] == "passed" and results["environment"]["vllm"] == "0.26.0"
    assert [p["name"] for p in results["cases"]["afd-1a1f"]["processes"]] == ["ffn", "attention"]
    for case in results["cases"].values():
        assert {h["check"]: h["status"] for h in case["hygiene"]} == dict.fromkeys(
            ("processes", "forced_kill", "ports", "gpu_memory", "leftover_files"), "passed"
        )
    assert results["comparisons"]["correctness"]["parity"]["share"] == 1.0


def test_real_gpu_run_renders_like_the_device_did(tmp_path: Path) -> None:
    out = tmp_path / RUN
    out.mkdir()
    shutil.copy(FIXTURES / RUN / "results.json", out / "results.json")
    paths = render_all(out)
    body = paths.annotation.read_text(encoding="utf-8")
    assert paths.annotation_style == "success"
    assert body.splitlines()[0] == "## ✅ SMOKE afd-e2e tiny\\-gpu\\-1a1f: passed"
    assert "✅ 4/4 identical vs native DP1/TP1/EP1" in body
    assert "| Request throughput | 7.8114 ± 0.0018 req/s | 7.8502 ± 0.0095 req/s | +0.50% |" in body
    hygiene_rows = [line for line in body.splitlines() if line.startswith("| ") and "(<code>" in line][-3:]
    assert all(row.count("✅") == 5 for row in hygiene_rows), hygiene_rows
    rendered = assert_valid_junit(paths.junit[0])
    on_device = ET.parse(FIXTURES / RUN / "junit" / f"{RUN}-1.xml").getroot()
    assert len(rendered.findall(".//testcase")) == len(on_device.findall(".//testcase")) > 0
    assert not rendered.findall(".//failure") and not rendered.findall(".//error")
    assert paths.plots and paths.plots[0].stat().st_size > 10_000
