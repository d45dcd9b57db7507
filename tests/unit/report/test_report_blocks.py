"""Unit tier: a real blocks series on a GPU (``tests/fixtures/results/tiny-gpu-blocks-1gpu``, kept from
``tests/gpu/test_blocks_gpu.py`` on a 1x H100 device machine): its record reads back typed, and the annotation
rendered from it names the alternation, every block with its launch and hygiene, and the block effect, and so do the
JUnit testcases of its metrics."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

from afd_e2e.report import render_all
from afd_e2e.results.performance_records import SECTION as PERFORMANCE
from afd_e2e.results.status import Status
from results_docs import RESULTS_FIXTURES, load_fixture, typed

FIXTURE = RESULTS_FIXTURES / "tiny-gpu-blocks-1gpu"


def test_the_real_series_relaunched_each_side_once_and_gave_the_gpu_back_each_time():
    results = typed(load_fixture("tiny-gpu-blocks-1gpu"))
    (planned,) = results.plan.series
    assert (planned.alternation, planned.step, planned.launches) == ("blocks", 2, 2)
    record = results.case("twin").section(PERFORMANCE).sequential
    assert [(b.side, b.block, b.repetitions) for b in record.blocks] == [
        ("base", 1, [1, 2]),
        ("twin", 1, [1, 2]),
        ("base", 2, [3, 4]),
        ("twin", 2, [3, 4]),
    ]
    for block in record.blocks[2:]:
        gpu = next(c for c in block.hygiene if c.check == "gpu_memory")
        assert gpu.status is Status.PASSED and gpu.detail == "back to baseline: device 0: 0 MiB"
    assert record.launches == 2 and len(record.block_effects) == 4


def test_the_annotation_lists_the_blocks_and_the_block_effect(tmp_path: Path):
    shutil.copy(FIXTURE / "results.json", tmp_path / "results.json")
    annotation = render_all(tmp_path).annotation.read_text(encoding="utf-8")
    assert (
        "- Sequential series (2 to 4 repetitions a side, alternating blocks, one planned look): decided" in annotation
    )
    assert (
        "- Blocks of 2 (each side launched afresh per block, 2 added launches): base 1 \\(reps 1\\-2, the case's own "
        "launch\\), twin 1 \\(reps 1\\-2, the case's own launch\\), base 2 \\(reps 3\\-4, ready in 35 s, hygiene "
        "passed\\), twin 2 \\(reps 3\\-4, ready in 35 s, hygiene passed\\)"
    ) in annotation
    assert "- Block effect: each side's blocks agree within their repetitions' noise" in annotation


def test_the_junit_testcase_of_each_metric_says_its_repetitions_came_from_blocks(tmp_path: Path):
    shutil.copy(FIXTURE / "results.json", tmp_path / "results.json")
    render_all(tmp_path)
    testcases = [c for path in sorted((tmp_path / "junit").glob("*.xml")) for c in ET.parse(path).iter("testcase")]
    performance = [c for c in testcases if c.get("name", "").startswith("performance mean_")]
    assert performance
    for case in performance:
        assert (
            "alternating blocks of 2: 4 blocks, 2 added launches; each side's blocks agree within their repetitions' "
            "noise" in case.findtext("system-out")
        )
