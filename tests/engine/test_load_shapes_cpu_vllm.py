"""Engine tier: load shapes as profile keys (issue 44 part 1) on the real CPU vLLM. One case is measured under
several shapes in one run: tiny-cpu's own Poisson bench, a burst (burstiness 0.25), a shared-prefix set
(``dataset: prefix_repetition``) and an overload (a rate and a cap of its own), each shape with its own
repetitions, metrics and verdicts in results.json, the JUnit XML and the annotation; the installed ``vllm bench
serve`` is asked for every flag the shapes add before anything is launched.

Launches no server of its own: it reads the session's shared run (``tiny_cpu_run``, tests/shared_run.py, whose
``SHAPES`` add the three shapes to its bench); its two serverless tests ask the installed vLLM's interpreter (0.2 s
each). What the shapes add to the shared run: 2 repetitions per shape per case, no warmup (the case is warm from
its own), 8 requests each, in the case's warm bench client: 12 more ``vllm bench serve`` repetitions of 1-6 s,
measured at 10.4 s on cpu-tp1 and 11.0 s on cpu-tp2, from the last repetition of a case's own shape to the last of
its shapes (two shapes of 16 requests took 14.4 s and 13.0 s, and 36.7 s on both with another engine tier and a
unit tier beside them).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import xml.etree.ElementTree as ET

import pytest

from afd_e2e.plan import build_plan
from afd_e2e.preflight.checks import PASS
from afd_e2e.preflight.software import BENCH_FLAGS, check_software, read_installed
from afd_e2e.profile.bench_spec import PrefixRepetition, RampUp, bench_spec
from afd_e2e.results.performance_records import SECTION as PERFORMANCE
from afd_e2e.workloads.bench import shape_argv
from shared_run import PORT_BASE, PROFILE, SHAPES

LAUNCHES = 0  # the most vLLM servers this module starts (tests/launch_counter.py): reads the session's shared run

pytestmark = pytest.mark.engine

needs_vllm = pytest.mark.skipif(shutil.which("vllm") is None, reason="no vllm on PATH (scripts/install-cpu-vllm)")
CASES = ("cpu-tp1", "cpu-tp2")
COMPARISON = "tp1-vs-tp2"


def test_each_case_is_measured_under_every_shape_with_its_own_repetitions(tiny_cpu_run):
    for case_id in CASES:
        performance = tiny_cpu_run.results.case(case_id).section(PERFORMANCE)
        assert performance is not None and performance.status.value == "passed", performance
        assert list(performance.shapes) == list(SHAPES)
        for name, shaped in performance.shapes.items():
            spec = bench_spec(PROFILE).shape(name)
            assert shaped.status.value == "passed", (name, shaped.failure)
            assert shaped.warmups == [] and len(shaped.repetitions) == spec.repetitions
            for rep in shaped.repetitions:
                assert rep.status.value == "passed" and rep.completed == spec.num_prompts
                assert rep.path == f"bench/{case_id}/{name}/rep-{rep.index}.json"
                asked = dict(zip(rep.argv, rep.argv[1:], strict=False))
                assert asked["--num-prompts"] == str(spec.num_prompts)
                assert asked["--request-rate"] == f"{spec.request_rate:g}"
                assert asked["--max-concurrency"] == str(spec.max_concurrency)
                assert all(arg in rep.argv for arg in shape_argv(spec))


def test_vllm_ran_each_shape_as_asked(tiny_cpu_run):
    """vLLM's own result JSON says which arrival process it drew (its ``burstiness``), and the shared-prefix
    repetition's prompts are the prefix set's length."""
    for case_id in CASES:
        shapes = tiny_cpu_run.results.case(case_id).section(PERFORMANCE).shapes
        base = tiny_cpu_run.results.case(case_id).section(PERFORMANCE).repetitions[0]
        raw = {name: json.loads((tiny_cpu_run.out / s.repetitions[0].path).read_text()) for name, s in shapes.items()}
        assert json.loads((tiny_cpu_run.out / base.path).read_text())["burstiness"] == 1.0  # Poisson
        assert raw["burst"]["burstiness"] == 0.25
        prefix = bench_spec(PROFILE).shape("shared-prefix").prefix
        prompt = prefix.prefix_len + prefix.suffix_len
        count = bench_spec(PROFILE).shape("shared-prefix").num_prompts
        assert raw["shared-prefix"]["total_input_tokens"] == pytest.approx(prompt * count, rel=0.25)


def test_each_shape_has_its_own_verdicts_in_results_junit_and_the_annotation(tiny_cpu_run):
    performance = tiny_cpu_run.results.comparisons[COMPARISON].section(PERFORMANCE)
    assert performance is not None and list(performance.shapes) == list(SHAPES)
    keys = [m.key for m in performance.metrics]
    for name, shaped in performance.shapes.items():
        assert [m.key for m in shaped.metrics] == keys, name
        assert all(m.verdict is not None and len(m.baseline.values) == 2 for m in shaped.metrics)
    assert tiny_cpu_run.data["comparisons"][COMPARISON]["performance"]["shapes"].keys() == SHAPES.keys()

    names = {
        case.get("name")
        for path in (tiny_cpu_run.out / "junit").glob("*.xml")
        for case in ET.parse(path).getroot().iter("testcase")
    }
    for name in SHAPES:
        assert f"performance runs {name}" in names
        assert {f"performance {name} {key}" for key in keys} <= names
    annotation = (tiny_cpu_run.out / "annotation.md").read_text(encoding="utf-8")
    assert "#### Shape <code>burst</code>: 8 req/s, burstiness 0\\.25, at most 4 concurrent" in annotation
    assert "#### Shape <code>shared\\-prefix</code>: 8 req/s, 2 shared prefixes" in annotation


@pytest.mark.serverless
@needs_vllm
def test_preflight_asks_the_installed_client_for_the_shapes_flags(tiny_model):
    """The shared run's profile through the real preflight (what a run takes before it launches anything): the
    installed vLLM's interpreter reads its own bench sources and has every flag the shapes need. (vLLM 0.32, the
    CPU kit, has every one, so a refusal is judged in the unit tier against its recorded answer.)"""
    plan = build_plan(PROFILE, model_path=str(tiny_model), port_base=PORT_BASE)
    installed = read_installed(PROFILE.engine.executable)
    [check] = [c for c in check_software(PROFILE, plan, installed) if c.name == BENCH_FLAGS]
    assert check.status == PASS, check
    assert check.measured == f"vLLM {installed.vllm}'s vllm bench serve has all 5" and "0.32" in check.measured


@pytest.mark.serverless
@needs_vllm
def test_the_installed_client_has_every_flag_a_shape_key_maps_to():
    """Every key at once (ramp, mixed lengths, bursts, a prefix set) against what the installed vllm bench serve
    defines, read from its sources by the probe: each flag shape_argv writes is there, and a flag vLLM never had is
    not (the probe does not answer yes to anything)."""
    flags = read_installed(shutil.which("vllm")).bench_flags
    assert flags is not None
    burst = bench_spec(PROFILE).shape("burst")
    ramped = [
        dataclasses.replace(burst, ramp_up=RampUp("linear", 1, 8), range_ratio=0.5),
        dataclasses.replace(burst, dataset="prefix_repetition", prefix=PrefixRepetition(8, 8, 2)),
    ]
    asked = {arg for spec in ramped for arg in shape_argv(spec) if arg.startswith("--")}
    assert len(asked) == 9 and asked <= set(flags)
    assert "--request-rate" in flags and "--not-a-bench-flag" not in flags
