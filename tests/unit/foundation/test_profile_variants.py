"""Case variants (extends, add/remove of args and env per role), any-two-case comparisons, feature options, TP2."""

from __future__ import annotations

import copy
import threading
from pathlib import Path

import pytest
import yaml

from afd_e2e.cli import main
from afd_e2e.errors import UsageError
from afd_e2e.plan import build_plan
from afd_e2e.plan.shell_text import render_text
from afd_e2e.profile import load_profile, parse_profile
from afd_e2e.system.child_env import child_environment
from repo_paths import FIXTURES, REPO
from unit.timing import FakeClock

FEATURES = REPO / "python/afd_e2e/profiles/tiny-gpu-features.yaml"
MODEL = "/tmp/vl/tiny-dsv2"


def features_doc() -> dict:
    return yaml.safe_load(FEATURES.read_text())


def plan_of(doc: dict, **kwargs):
    return build_plan(parse_profile(doc, "features.yaml"), model_path=MODEL, devices=(0, 1), **kwargs)


def argv(plan, case_id: str, process: str) -> tuple[str, ...]:
    return next(p for p in plan.case(case_id).processes if p.name == process).argv


def argv_in_its_block(plan, case_id: str, process: str) -> tuple[str, ...]:
    """The argv with each of the case's ports written relative to its port block (each case has its own block)."""
    ports = sorted({port for p in plan.case(case_id).processes for port in p.ports}, reverse=True)
    block = min(ports)
    relative = []
    for arg in argv(plan, case_id, process):
        for port in ports:
            arg = arg.replace(str(port), f"<port block+{port - block}>")
        relative.append(arg)
    return tuple(relative)


def error(doc: dict) -> str:
    with pytest.raises(UsageError) as info:
        parse_profile(doc, "bad.yaml")
    message = str(info.value)
    assert "\n" not in message and message.startswith("bad.yaml: ") and "(fix: " in message
    return message


def test_a_graph_variant_is_its_parent_plus_the_graph_flags_written_once():
    plan = plan_of(features_doc())
    # Port for port in their own blocks, the argv differ only where the variant says.
    eager = argv_in_its_block(plan, "afd-1a1f", "attention")
    graph = argv_in_its_block(plan, "afd-1a1f-graph", "attention")
    assert "--enforce-eager" in eager and "--enforce-eager" not in graph
    flags = [
        "--max-num-seqs=64",
        "--max-num-batched-tokens=64",
        "--max-cudagraph-capture-size=64",
        "--cudagraph-capture-sizes=64",
        '--compilation-config={"cudagraph_mode":"FULL_DECODE_ONLY"}',
    ]
    assert list(graph[-5:]) == flags and not set(flags) & set(eager)
    # Everything else is inherited: topology, connector, ports, served name.
    assert list(graph[:-5]) == [a for a in eager if a != "--enforce-eager"]
    ffn = next(p for p in plan.case("afd-1a1f-graph").processes if p.name == "ffn")
    assert "--max-num-seqs=64" in ffn.argv and ffn.devices == (1,)
    assert not any(k.startswith("AFD_GPU_") for k in ffn.env_set) and ffn.out_dir_env == {}
    assert plan.case("afd-1a1f-graph").label == "AFD 1A1F, CUDA graph 64"


def test_a_dbo_variant_adds_both_thresholds_to_both_roles():
    plan = plan_of(features_doc())
    for process in ("attention", "ffn"):
        args = argv(plan, "afd-1a1f-dbo", process)
        assert args[-3:] == ("--enable-dbo", "--dbo-decode-token-threshold=1", "--dbo-prefill-token-threshold=64")
        assert "--enforce-eager" in args


def test_variants_add_and_remove_args_and_env_per_role_and_chain():
    doc = features_doc()
    doc["cases"]["afd-1a1f"].update(env={"EVERY_ROLE": "1", "DROP_ME": "x"})
    doc["cases"]["tuned"] = {
        "extends": "afd-1a1f-dbo",
        "remove_args": ["--max-model-len", "--seed"],
        "add_args": ["--max-model-len", "2048"],
        "remove_env": ["DROP_ME", "VLLM_USE_FLASHINFER_SAMPLER"],
        "roles": {"ffn": {"add_args": ["--ffn-only"], "env": {"FFN_ONLY": "1"}}},
    }
    plan = plan_of(doc)
    attention, ffn = (next(p for p in plan.case("tuned").processes if p.name == n) for n in ("attention", "ffn"))
    assert "--max-model-len=4096" not in attention.argv and "--seed=0" not in attention.argv
    assert attention.argv[-2:] == ("--max-model-len", "2048") and "--enable-dbo" in attention.argv
    assert ffn.argv[-1] == "--ffn-only" and "--ffn-only" not in attention.argv
    assert ffn.env_set["FFN_ONLY"] == "1" and "FFN_ONLY" not in attention.env_set
    assert attention.env_set["EVERY_ROLE"] == "1" and "DROP_ME" not in attention.env_set
    # A removed variable is also not inherited from the agent.
    assert {"DROP_ME", "VLLM_USE_FLASHINFER_SAMPLER"} <= set(attention.env_unset)
    assert plan.case("tuned").label == "AFD 1A1F, DBO"  # its parent turned the profiler off
    assert parse_profile(doc, "x.yaml").case("tuned").extends == "afd-1a1f-dbo"


def test_a_removed_flag_goes_with_its_value_in_either_spelling():
    from afd_e2e.plan.serve_argv import remove_flag

    args = ["--a", "1", "--b=2", "--enforce-eager", "--c", "--a=3"]
    assert remove_flag(args, "--a") == ["--b=2", "--enforce-eager", "--c"]
    assert remove_flag(args, "--enforce-eager") == ["--a", "1", "--b=2", "--c", "--a=3"]


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (
            lambda c: c["afd-1a1f-graph"].update(extends="afd-1a1f-eagre"),
            "cases.afd-1a1f-graph.extends: unknown case 'afd-1a1f-eagre'",
        ),
        (
            lambda c: c["afd-1a1f"].update(extends="afd-1a1f-dbo"),
            "variants form a cycle: afd-1a1f -> afd-1a1f-dbo -> afd-1a1f",
        ),
        (lambda c: c["native-dp1"].update(extends="native-dp1"), "variants form a cycle: native-dp1 -> native-dp1"),
        (lambda c: c["afd-1a1f-dbo"].update(kind="native"), "a variant keeps the kind of afd-1a1f"),
        (lambda c: c["afd-1a1f-dbo"].update(roles={"server": {"add_args": ["-x"]}}), "no role 'server' in a afd case"),
        (lambda c: c["afd-1a1f-dbo"].update(remove_args=["--seed=0"]), "'--seed=0' is not a flag name"),
        (lambda c: c["afd-1a1f-dbo"].update(dbo={"decode_token_threshold": 1}), "prefill_token_threshold: missing"),
        (lambda c: c["native-dp1"].update(profiler={}), "the profiler option and the profiler phase go together"),
        (lambda c: c["afd-1a1f-graph"].update(phases=["smoke", "profiler"]), "profiler option and the profiler phase"),
        (
            lambda c: c["afd-1a1f-graph"].update(graph={"capture_size": 32}),
            "64 is above case afd-1a1f-graph's capture size 32",
        ),
    ],
)
def test_bad_variants_name_the_case_key_and_fix(mutate, expected):
    doc = features_doc()
    mutate(doc["cases"])
    assert expected in error(doc)


def test_comparisons_pair_any_two_cases_but_not_a_case_with_itself():
    doc = features_doc()
    plan = plan_of(doc)
    assert [(c.baseline, c.candidate, c.measures) for c in plan.comparisons] == [
        ("native-dp1", "afd-1a1f", ("parity",)),
        ("afd-1a1f", "afd-1a1f-graph", ("parity", "replay")),
        ("afd-1a1f", "afd-1a1f-dbo", ("parity", "replay", "performance")),
    ]
    bad = copy.deepcopy(doc)
    bad["comparisons"]["eager-vs-graph"]["candidate"] = "afd-1a1f"
    assert "compares case afd-1a1f with itself" in error(bad)
    bad = copy.deepcopy(doc)
    bad["comparisons"]["native-vs-afd"]["measures"] = ["replay"]
    assert "case native-dp1 does not run the replay phase" in error(bad)
    bad = copy.deepcopy(doc)
    bad["comparisons"]["native-vs-afd"]["measures"] = ["speed"]
    assert "unknown measure 'speed'" in error(bad)


def test_features_need_cuda():
    doc = yaml.safe_load((REPO / "python/afd_e2e/profiles/tiny-cpu.yaml").read_text())
    first = next(iter(doc["cases"]))
    doc["cases"][first]["graph"] = {"capture_size": 8}
    assert "graph needs platform cuda" in error(doc)


def test_afd_roles_may_run_tensor_parallel_and_count_dp_times_tp_ranks():
    plan = build_plan(load_profile("deepseek-v2-lite-tp2"), model_path="/m")
    case = plan.case("afd-tp2")
    assert case.label == "AFD 2A2F TP2/TP2" and plan.model_loads == 2
    attention = next(p for p in case.processes if p.name == "attention")
    assert attention.devices == (0, 1) and next(p for p in case.processes if p.name == "ffn").devices == (2, 3)
    assert attention.argv[attention.argv.index("--tensor-parallel-size") + 1] == "2"
    assert attention.argv[attention.argv.index("--data-parallel-size") + 1] == "1"
    config = attention.argv[attention.argv.index("--additional-config") + 1]
    assert '"num_attention_ranks":2,"num_ffn_ranks":2' in config
    assert (
        "--cudagraph-capture-sizes=8"
        in next(p for p in plan.case("afd-tp2-graph").processes if p.name == "attention").argv
    )


def test_tp2_preflight_on_a_recorded_4_gpu_machine(capsys):
    readings = FIXTURES / "gpu/gb200x4-nvlink.json"
    code = main(["preflight", "--profile", "deepseek-v2-lite-tp2", "--readings", str(readings), "--port-base", "21900"])
    text = capsys.readouterr().out
    assert code == 1  # no checkpoint (and no CUDA vLLM) on this machine
    assert "PASS  gpu count                   4 GPUs" in text
    assert "PASS  interconnect afd-tp2        GPU0-GPU2 NV18, GPU1-GPU3 NV18" in text
    # The 8-GPU seed does not fit it.
    assert (
        main(["preflight", "--profile", "qwen3.5-122b-a10b", "--readings", str(readings), "--port-base", "21950"]) == 1
    )
    assert "FAIL  gpu count" in capsys.readouterr().out


def test_the_features_plan_is_four_loads_with_the_profiler_folders_under_the_run(tmp_path: Path):
    plan = build_plan(load_profile("tiny-gpu-features"), model_path=MODEL, devices=(0, 1))
    assert [c.id for c in plan.cases] == ["native-dp1", "afd-1a1f", "afd-1a1f-graph", "afd-1a1f-dbo"]
    assert plan.model_loads == 4
    assert plan.case("afd-1a1f").phases == ("smoke", "correctness", "replay", "serving", "profiler", "performance")
    ffn = next(p for p in plan.case("afd-1a1f").processes if p.name == "ffn")
    assert ffn.env_set["AFD_GPU_FFN_PROFILER_ENABLE"] == "true" and ffn.env_set["AFD_GPU_FFN_PROFILER_ACTIVE"] == "1"
    assert ffn.out_dir_env == {"AFD_GPU_FFN_PROFILER_DIR": "traces/afd-1a1f/ffn"}
    env = child_environment({}, ffn, scratch=tmp_path, cache=tmp_path, markers={}, out_dir=tmp_path / "out")
    assert env["AFD_GPU_FFN_PROFILER_DIR"] == str(tmp_path / "out/traces/afd-1a1f/ffn")
    assert 'AFD_GPU_ATTENTION_PROFILER_DIR="$OUT"/traces/afd-1a1f/attention' in render_text(plan)


def on_a_fake_clock() -> dict:
    """The trace wait's clock and sleep: a FakeClock, so ``wait_s`` runs out without waiting it."""
    clock = FakeClock()
    return {"clock": clock, "sleep": clock.sleep}


def test_profiler_traces_fail_naming_the_missing_role_and_cap_uploads_newest_first(tmp_path: Path):
    from afd_e2e.phases.profiler import judge_traces
    from afd_e2e.profile import ProfilerSpec

    spec = ProfilerSpec(0, 1, 1, 1, 0, wait_s=1.5, upload_limit_mib=1.0)
    attention = tmp_path / "profiles/c/attention"
    attention.mkdir(parents=True)
    (attention / "old.pt.trace.json").write_bytes(b"x" * 600_000)
    (attention / "new.pt.trace.json").write_bytes(b"y" * 600_000)
    import os

    os.utime(attention / "old.pt.trace.json", (1, 1))
    dirs = {"attention": "profiles/c/attention", "ffn": "profiles/c/ffn"}
    result = judge_traces(
        spec,
        out_dir=tmp_path,
        role_dirs=dirs,
        progress=lambda _: None,
        cancelled=threading.Event(),
        **on_a_fake_clock(),
    )
    assert result.status == "failed" and "no non-empty trace from the ffn role in profiles/c/ffn" in result.failure
    assert [(r.role, r.status) for r in result.roles] == [("attention", "passed"), ("ffn", "failed")]
    assert {t.path.rsplit("/", 1)[-1]: t.uploaded for t in result.traces} == {
        "new.pt.trace.json": True,
        "old.pt.trace.json": False,
    }
    ffn = tmp_path / "profiles/c/ffn"
    ffn.mkdir()
    (ffn / "empty.json").write_bytes(b"")
    assert (
        judge_traces(
            spec,
            out_dir=tmp_path,
            role_dirs=dirs,
            progress=lambda _: None,
            cancelled=threading.Event(),
            **on_a_fake_clock(),
        ).status
        == "failed"
    )
    (ffn / "t.pt.trace.json").write_bytes(b"{}")
    assert (
        judge_traces(
            spec,
            out_dir=tmp_path,
            role_dirs=dirs,
            progress=lambda _: None,
            cancelled=threading.Event(),
            **on_a_fake_clock(),
        ).status
        == "passed"
    )


def test_the_cpu_variant_profile_inherits_all_but_what_it_names():
    profile = load_profile(str(FIXTURES / "profiles/tiny-cpu-features.yaml"))
    tp1, tp2 = profile.case("cpu-tp1"), profile.case("cpu-tp2")
    assert tp2.extends == "cpu-tp1" and tp2.kind == tp1.kind == "native"
    assert (tp2.native.tp, tp2.phases) == (2, ("smoke", "correctness", "replay"))
    plan = build_plan(profile, model_path="/m")
    assert plan.case("cpu-tp2").processes[0].env_set["VLLM_CPU_OMP_THREADS_BIND"] == "0|1"
    assert plan.case("cpu-tp1").processes[0].env_set["VLLM_CPU_OMP_THREADS_BIND"] == "auto"


def test_a_side_without_replay_requests_is_skipped_naming_the_case():
    from afd_e2e.phases.replay import compare_replay_requests
    from afd_e2e.results.status import Status
    from afd_e2e.workloads.parity import parity_spec

    spec = parity_spec(load_profile("tiny-gpu-features"))
    result = compare_replay_requests(spec, "afd-1a1f", None, "afd-1a1f-graph", [])
    assert result.status is Status.SKIPPED and result.failure == "case afd-1a1f recorded no replay requests"


def test_the_nccl_flight_recorder_option_dumps_into_the_cases_forensics_on_cuda_only(tmp_path):
    doc = features_doc()
    doc["cases"]["afd-1a1f"]["nccl_flight_recorder"] = {"buffer_size": 500}
    plan = plan_of(doc)
    for case_id in ("afd-1a1f", "afd-1a1f-graph"):  # the variant inherits it
        for process in plan.case(case_id).processes:
            assert process.env_set["TORCH_NCCL_TRACE_BUFFER_SIZE"] == "500"
            assert process.env_set["TORCH_NCCL_DUMP_ON_TIMEOUT"] == "1"
            dump = process.out_dir_env["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"]
            assert dump == f"forensics/{case_id}/nccl/{process.name}-rank"
            env = child_environment({}, process, scratch=tmp_path, cache=tmp_path, markers={}, out_dir=tmp_path)
            assert env["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] == str(tmp_path / dump)
    assert "NCCL flight recorder" in plan.case("afd-1a1f").label
    assert "TORCH_NCCL_TRACE_BUFFER_SIZE" not in plan.case("native-dp1").processes[0].env_set
    cpu = yaml.safe_load((REPO / "python/afd_e2e/profiles/tiny-cpu.yaml").read_text())
    cpu["cases"][next(iter(cpu["cases"]))]["nccl_flight_recorder"] = {}
    assert "nccl_flight_recorder needs platform cuda" in error(cpu)
