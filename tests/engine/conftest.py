"""Shared by engine tests: the real CPU vLLM's tiny model, built locally once per session, and the session's shared
run of tiny-cpu (``tests/shared_run.py``), which every test that only needs a ready server or a finished run reads.

A vLLM launch costs 40-90 s on CI's 2 cores and CI may launch about 12 in all, so engine configurations are shared:
``tiny_cpu_run`` launches the two of tiny-cpu (cpu-tp1, cpu-tp2) once for the session, through the runner's own
lifecycle, and checks after the last test that nothing of the run is left. Only tests about a server's life
(start-up, faults, cancellation, teardown, death, stalls) launch their own. ``execution_run`` is the other run two
modules read (``test_execution_cpu_vllm.py``, ``test_capacity_cpu_vllm.py``): its compiled case, launched for its
start-up, also holds the capacity sweep whose budget runs out.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

# the most vLLM servers this module starts (tests/launch_counter.py): tiny_cpu_run's cpu-tp1 and cpu-tp2,
# execution_run's compiled and forced-eager cases
LAUNCHES = 4

REPO = Path(__file__).resolve().parents[2]
# Modules whose verdicts are speed (TPOT series, capacity at SLO, bisect on TPOT) run after the others: in CI the
# embedded default and the unit tier run beside the engine tier for its first minutes (scripts/test, .ci/run), and
# what they take from the cores is noise these verdicts would have to outlast (a loaded start once cost the bisect a
# second run of a commit). Only the order changes: no test depends on another having run.
SPEED_JUDGED_LAST = ("test_capacity_cpu_vllm.py", "test_sequential_cpu_vllm.py", "test_bisect_cpu_vllm.py")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def late(item: pytest.Item) -> int:
        name = item.path.name
        return SPEED_JUDGED_LAST.index(name) + 1 if name in SPEED_JUDGED_LAST else 0

    items.sort(key=late)  # stable: each module keeps its own order


@pytest.fixture(scope="session")
def tiny_model() -> Path:
    """The embedded default's tiny model in the repository's .tiny-model (built once; the build is idempotent)."""
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vLLM is not importable from this Python; install it with scripts/install-cpu-vllm")
    from afd_e2e.tiny_model import build_tiny_model

    return build_tiny_model(REPO / ".tiny-model")


@pytest.fixture(scope="session")
def tiny_cpu_run(tiny_model, tmp_path_factory):
    """tiny-cpu run once, every phase a ready server serves (``shared_run``): two vLLM launches for the session.

    At the end of the session, nothing of the run may be left: no marked process, no port of its block held."""
    from afd_e2e.phases import registry
    from afd_e2e.phases.rendering import rendered
    from afd_e2e.results.store import results_to_json
    from afd_e2e.runner.run import execute_run
    from afd_e2e.system.markers import find_marked
    from afd_e2e.system.ports import busy_ports
    from repo_paths import GSM8K_DIR
    from shared_run import PROFILE, Lines, Probed, SharedRun, probe_phase, shared_plan
    from throwaway_phase import ECHO, ECHO_REPORT

    out = tmp_path_factory.mktemp("tiny-cpu-run")
    probed, lines = Probed(), Lines()
    with (
        registry.registered(ECHO),
        rendered(ECHO_REPORT),
        registry.registered(probe_phase(probed, tiny_model, tmp_path_factory.mktemp("probe"))),
    ):
        plan = shared_plan(tiny_model)
        results = execute_run(PROFILE, plan, out, gsm8k_dir=GSM8K_DIR, progress=lines)
        data = results_to_json(results)
    yield SharedRun(out=out, data=data, results=results, probed=probed, lines=lines.by_case, plan=plan)
    run_id = json.loads((out / "run-record.json").read_text())["run_id"]
    assert find_marked(run_id) == [], "the shared run left processes behind"
    assert busy_ports([port for case in plan.cases for port in case.ports]) == {}, "the shared run left its ports held"


@pytest.fixture(scope="session")
def execution_run(tiny_model, tmp_path_factory):
    """One ``afd-e2e run`` of ``tests/execution_support.py``'s compiled and forced-eager cases (two vLLM launches for
    the session), its comparison recording the model runner each side ran; the compiled case also sweeps capacity
    under ``CUT_SHORT_S`` (``cut_short_sweep``). Returns what the run exited with and its results."""
    from afd_e2e.results import load_results
    from execution_support import PORT_BASE, cpu_profile, cut_short_sweep, run_profile, write_wrapper

    work = tmp_path_factory.mktemp("execution-cpu")
    document = cut_short_sweep(
        cpu_profile(PORT_BASE, write_wrapper(work), cases=("cpu-compiled", "cpu-forced-eager")), "cpu-compiled"
    )
    # no measure: the comparison records only the model runner each side ran (``model_runners``)
    document["comparisons"] = {"runners": {"baseline": "cpu-compiled", "candidate": "cpu-forced-eager", "measures": []}}
    done = run_profile(document, work, work / "out", tiny_model)
    return done, load_results(work / "out")
