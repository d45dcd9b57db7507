"""Two real runs on 2x H200 (CUDA vLLM 0.26.0 + the AFD plugin, tiny random DeepSeek-V2), brought back from the
device machine and rendered here again: ``tiny-gpu-features`` (AFD 1A1F eager vs CUDA graph vs DBO, profiler traces,
serving checks) and ``tiny-gpu-1a1f`` with FULL_DECODE_ONLY CUDA graphs (native DP1 vs AFD 1A1F). Both recorded the
preflight they took at their start. The features run was written with every replay request and parity output inline
(3.4 MB: each keeps its top-k logprobs); ``tests/fixtures/split_replay_records.py`` moved them to side files
(``replay/``, ``parity/``, stored gzipped) as runs now write them, leaving results.json under 256 KiB."""

from __future__ import annotations

import gzip
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

from afd_e2e.phases.replay import read_requests
from afd_e2e.report import render_all
from afd_e2e.results import load_results, parity_records, replay_records
from afd_e2e.results.status import Status
from afd_e2e.workloads.parity import read_outputs
from junit_xsd import assert_valid_junit

from .conftest import FIXTURES

FEATURES = "tiny-gpu-features"
CUDAGRAPH = "tiny-gpu-1a1f-cudagraph"


def copied_run(name: str, tmp_path: Path) -> Path:
    out = tmp_path / name
    out.mkdir()
    shutil.copy(FIXTURES / name / "results.json", out / "results.json")
    for packed in (FIXTURES / name).glob("*/*.jsonl.gz"):  # side files, unpacked where results.json points
        unpacked = out / packed.relative_to(FIXTURES / name).with_suffix("")
        unpacked.parent.mkdir(parents=True, exist_ok=True)
        unpacked.write_bytes(gzip.decompress(packed.read_bytes()))
    return out


def before_artifacts(annotation: str) -> str:
    """The annotation up to its artifact list (the fixtures keep results.json, not every log the device wrote)."""
    return annotation.partition("### Artifacts")[0]


# The device listed preflight.software field by field; since issue 22 (item 7) it reads as one sentence.
SOFTWARE_ON_DEVICE = (
    "Software found: afd\\_e2e\\_python /opt/torch/\\.venv/bin/python3, vllm\\_executable /tmp/vl/site/bin/vllm, "
    "vllm\\_python /opt/torch/\\.venv/bin/python3, vllm 0\\.26\\.0, torch 2\\.11\\.0, afd\\_plugin "
    "afd\\_plugin\\:register\\_afd, routing\\_strategies not found, problem not found, nvidia\\_ml\\_py 13\\.610\\.43\n"
)
SOFTWARE_NOW = (
    "Software: vLLM 0\\.26\\.0 with torch 2\\.11\\.0 in /opt/torch/\\.venv/bin/python3 \\(the Python of "
    "/tmp/vl/site/bin/vllm\\); AFD plugin afd\\_plugin\\:register\\_afd; nvidia\\-ml\\-py 13\\.610\\.43; afd\\-e2e runs in "
    "/opt/torch/\\.venv/bin/python3\\.\n"
)


def with_mode_column(text: str) -> str:
    """The per-case table as rendered since the execution section: a "Mode" column, empty for results written
    before it."""
    lines, table = text.split("\n"), False
    for i, line in enumerate(lines):
        table = (table or line == "### Correctness") and (line.startswith("|") or line in ("### Correctness", ""))
        if table and line.startswith("| Case |"):
            lines[i] = line + " Mode |"
        elif table and line.startswith("| --- |"):
            lines[i] = line + " --- |"
        elif table and line.startswith("|"):
            lines[i] = line + " — |"
        if table and line == "" and i and lines[i - 1].startswith("|"):
            table = False
    return "\n".join(lines)


def without_performance(text: str) -> str:
    """The annotation without its performance sections: since issue 31 their tables show the interval against
    the margin, the repetitions and the noise, and mark a ``parity`` of results this old as the old rule's
    (asserted on their own)."""
    kept, skipping = [], False
    for line in text.split("\n"):
        if line.startswith("### "):
            skipping = line.startswith("### Performance")
        if not skipping:
            kept.append(line)
    return "\n".join(kept)


def as_rendered_now(on_device: str) -> str:
    """The device's annotation with the lines rendered differently since: the software line, the Mode column,
    the performance tables."""
    assert on_device.count(SOFTWARE_ON_DEVICE) == 1
    return before_artifacts(without_performance(with_mode_column(on_device.replace(SOFTWARE_ON_DEVICE, SOFTWARE_NOW))))


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
    eager_vs_graph = results.comparisons["eager-vs-graph"].section(parity_records.SECTION)
    assert eager_vs_graph is not None and eager_vs_graph.close >= 1 and eager_vs_graph.different == 0


def test_the_feature_runs_results_stay_small_with_every_request_in_side_files(tmp_path: Path) -> None:
    assert (FIXTURES / FEATURES / "results.json").stat().st_size <= 256 * 1024
    out = copied_run(FEATURES, tmp_path)
    results = load_results(out)
    graph = results.cases["afd-1a1f-graph"]
    rounds = graph.section(replay_records.SECTION)
    assert rounds is not None and rounds.requests == [] and graph.section(parity_records.OUTPUTS) is None
    requests = read_requests(out, rounds)
    assert len(requests) == rounds.rounds * rounds.batch == 192
    assert all(r.output.top_logprobs for r in requests)
    outputs = read_outputs(out, graph) or []
    assert len(outputs) == 5 and all(o.top_logprobs for o in outputs)
    replay = results.comparisons["eager-vs-graph"].section(replay_records.SECTION)
    assert replay is not None and (replay.identical, replay.close, replay.total) == (153, 39, 192)
    assert len(replay.prompts) == 39  # the identical requests are counted, not listed


def test_the_feature_run_renders_like_the_device_did(tmp_path: Path) -> None:
    paths = render_all(copied_run(FEATURES, tmp_path))
    body = paths.annotation.read_text(encoding="utf-8")
    assert body.splitlines()[0] == "## ✅ SMOKE afd-e2e tiny\\-gpu\\-features: passed"
    assert "| GPU0 | X | NV18 |" in body  # the preflight's link matrix, as NVML read it there
    assert "🟰 close" in body and "requests 153/192 identical, 39 close" in body
    assert "model 'afd\\-e2e\\-no\\-such\\-model' rejected with HTTP 404" in body
    assert body.count("artifact://profiles/afd-1a1f/") >= 2  # one trace per role, linked
    # written before equivalence testing: its parity is the old rule's, and says so
    old = "| -3.84% | [-31.01%, +23.34%] | parity (old rule: the 95% CI includes 0, not equivalence) | — | 2+2 |"
    assert old in body
    assert before_artifacts(without_performance(body)) == as_rendered_now(
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
    parity = results.comparisons["correctness"].section(parity_records.SECTION)
    assert parity is not None and parity.status is Status.PASSED and parity.different == 0
    paths = render_all(out)
    on_device = (FIXTURES / CUDAGRAPH / "annotation.md").read_text(encoding="utf-8")
    assert before_artifacts(paths.annotation.read_text(encoding="utf-8")) == as_rendered_now(on_device)
    assert_valid_junit(paths.junit[0])
