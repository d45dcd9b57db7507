"""JUnit XML: structure Test Engine accepts, failures with messages and log tails, escaping, and file splitting."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from afd_e2e.report.junit import MAX_TESTCASES_PER_FILE, OUTPUT_CHARS, write_junit
from junit_xsd import assert_valid_junit
from results_docs import typed


def _parse(paths: tuple[Path, ...]) -> list[ET.Element]:
    return [assert_valid_junit(path) for path in paths]


def _testcases(roots: list[ET.Element]) -> dict[tuple[str, str], ET.Element]:
    return {(tc.get("classname"), tc.get("name")): tc for root in roots for tc in root.iter("testcase")}


def _assert_structure(roots: list[ET.Element]) -> None:
    for root in roots:
        assert root.tag == "testsuites"
        suites = list(root)
        assert suites and all(suite.tag == "testsuite" and suite.get("name") for suite in suites)
        for suite in suites:
            cases = suite.findall("testcase")
            assert int(suite.get("tests")) == len(cases)
            assert int(suite.get("failures")) == sum(tc.find("failure") is not None for tc in cases)
            for tc in cases:
                assert tc.get("classname") == suite.get("name") and tc.get("name")
                for problem in tc.findall("failure") + tc.findall("error"):
                    assert problem.get("message") and "\n" not in problem.get("message")


def test_seed_run_is_one_passing_file_covering_every_check(seed_results: dict, tmp_path: Path) -> None:
    paths = write_junit(typed(seed_results), tmp_path / "junit")
    assert [p.name for p in paths] == ["qwen3.5-122b-a10b-1.xml"]
    roots = _parse(paths)
    _assert_structure(roots)
    assert roots[0].get("failures") == "0" and roots[0].get("errors") == "0"
    prefix = "afd-e2e.qwen3.5-122b-a10b"
    suites = [suite.get("name") for suite in roots[0]]
    assert suites == [
        f"{prefix}.preflight",
        f"{prefix}.case.baseline-eager",
        f"{prefix}.case.afd-eager-4a4f",
        f"{prefix}.case.native-eager-dp8",
        f"{prefix}.comparison.correctness",
        f"{prefix}.comparison.performance",
        f"{prefix}.run",
    ]
    names = {name for (classname, name) in _testcases(roots) if classname == f"{prefix}.case.afd-eager-4a4f"}
    assert {"launch and readiness", "smoke", "gsm8k strict match", "gsm8k question 6", "performance runs"} <= names
    hygiene = {"processes", "ports", "gpu_memory", "forced_kill", "leftover_files"}
    assert {f"hygiene {check}" for check in hygiene} <= names
    comparison = {name for (classname, name) in _testcases(roots) if classname == f"{prefix}.comparison.performance"}
    assert comparison == {
        f"performance {key}"
        for key in (
            "request_throughput",
            "output_throughput",
            "mean_ttft_ms",
            "mean_tpot_ms",
            "mean_itl_ms",
            "mean_e2el_ms",
        )
    }
    ttft = _testcases(roots)[(f"{prefix}.comparison.performance", "performance mean_ttft_ms")]
    assert "404.24 ± 6.16 ms" in ttft.find("system-out").text and "+8.87%" in ttft.find("system-out").text


def test_failures_carry_a_one_line_message_and_the_log_tail(seed_results: dict, tmp_path: Path) -> None:
    case = seed_results["cases"]["afd-eager-4a4f"]
    case.update(status="failed", failure="attention exited with code 1\nbefore ready", log_tail="Traceback\nCUDA OOM")
    del case["timings"]["launch_to_ready_s"]
    case["hygiene"][3] = {"check": "forced_kill", "status": "failed", "detail": "ffn needed SIGKILL after 20 s"}
    roots = _parse(write_junit(typed(seed_results), tmp_path))
    _assert_structure(roots)
    cases = _testcases(roots)
    launch = cases[("afd-e2e.qwen3.5-122b-a10b.case.afd-eager-4a4f", "launch and readiness")].find("failure")
    assert launch.get("message") == "attention exited with code 1 before ready"
    assert launch.text == "Traceback\nCUDA OOM"
    kill = cases[("afd-e2e.qwen3.5-122b-a10b.case.afd-eager-4a4f", "hygiene forced_kill")].find("failure")
    assert kill.get("message") == "ffn needed SIGKILL after 20 s"


def test_a_worse_metric_fails_only_for_on_worse_fail_and_warns_for_warn(seed_results: dict, tmp_path: Path) -> None:
    key = ("afd-e2e.qwen3.5-122b-a10b.comparison.performance", "performance mean_ttft_ms")
    ttft = _testcases(_parse(write_junit(typed(seed_results), tmp_path / "a")))[key]  # the seed: on_worse warn
    assert ttft.find("failure") is None and ttft.find("system-out").text.startswith("warning: TTFT: ")
    performance = seed_results["comparisons"]["performance"]["performance"]
    for metric in performance["metrics"]:
        metric["on_worse"] = "fail"
    performance.update(status="failed", failure=performance.pop("warnings")[0])
    cases = _testcases(_parse(write_junit(typed(seed_results), tmp_path / "b")))
    assert "+8.87%" in cases[key].find("failure").get("message")
    assert cases[(key[0], "performance mean_tpot_ms")].find("failure") is None  # parity, though on_worse fail
    performance["control"] = True
    control = _testcases(_parse(write_junit(typed(seed_results), tmp_path / "c")))[key]
    assert control.find("failure") is None and "control run" in control.find("system-out").text


def test_wrong_answers_fail_only_where_accuracy_is_meaningful(
    tiny_results: dict, seed_results: dict, tmp_path: Path
) -> None:
    tiny = _testcases(_parse(write_junit(typed(tiny_results), tmp_path / "tiny")))
    question = tiny[("afd-e2e.tiny-cpu.case.cpu-tp1", "gsm8k question 0")]
    assert question.find("failure") is None and "not meaningful" in question.find("system-out").text
    seed_results["cases"]["baseline-eager"]["gsm8k"]["questions"][2].update(correct=False, extracted="7")
    seed = _testcases(_parse(write_junit(typed(seed_results), tmp_path / "seed")))
    failure = seed[("afd-e2e.qwen3.5-122b-a10b.case.baseline-eager", "gsm8k question 2")].find("failure")
    assert failure.get("message") == "extracted '7', gold '70000'"


def test_model_output_with_control_characters_and_cdata_end_stays_valid_xml(tiny_results: dict, tmp_path: Path) -> None:
    nasty = 'ok ]]> <![CDATA[ x ]]> \x00\x01\x08\x0b\x0c\x1b[0m\x7f \ud800 \ufffe & <tag attr="q">'
    case = tiny_results["cases"]["cpu-tp1"]
    case["smoke"].update(status="failed", completion=nasty, failure=f"bad output: {nasty}")
    case["log_tail"] = nasty
    case["gsm8k"]["questions"][0]["extracted"] = nasty
    paths = write_junit(typed(tiny_results), tmp_path)
    roots = _parse(paths)  # ET.parse raises on any invalid XML
    _assert_structure(roots)
    smoke = _testcases(roots)[("afd-e2e.tiny-cpu.case.cpu-tp1", "smoke")]
    assert "]]> <![CDATA[ x ]]>" in smoke.find("failure").text
    assert "\\x00\\x01\\x08\\x0b\\x0c" in smoke.find("failure").text and "\\ud800" in smoke.find("failure").text
    assert '& <tag attr="q">' in smoke.find("system-out").text


def test_more_than_5000_testcases_are_split_across_files(tiny_results: dict, tmp_path: Path) -> None:
    before = len(list(_parse(write_junit(typed(tiny_results), tmp_path / "before"))[0].iter("testcase")))
    questions = tiny_results["cases"]["cpu-tp1"]["gsm8k"]["questions"]
    added = 6200 - len(questions)
    questions[:] = [{**questions[0], "index": i} for i in range(6200)]
    paths = write_junit(typed(tiny_results), tmp_path / "junit")
    assert [p.name for p in paths] == ["tiny-cpu-1.xml", "tiny-cpu-2.xml"]
    roots = _parse(paths)
    _assert_structure(roots)
    counts = [len(list(root.iter("testcase"))) for root in roots]
    assert counts[0] == MAX_TESTCASES_PER_FILE and sum(counts) == before + added
    # The split suite appears in both files; no testcase is lost or repeated.
    assert "afd-e2e.tiny-cpu.case.cpu-tp1" in {s.get("name") for s in roots[1]}
    assert len(_testcases(roots)) == sum(counts)


def test_rewriting_replaces_earlier_files(tiny_results: dict, tmp_path: Path) -> None:
    junit = tmp_path / "junit"
    write_junit(typed(tiny_results), junit, per_file=10)
    assert len(list(junit.glob("*.xml"))) > 1
    assert write_junit(typed(tiny_results), junit) == (junit / "tiny-cpu-1.xml",)
    assert sorted(junit.glob("*.xml")) == [junit / "tiny-cpu-1.xml"]


def test_partial_run_marks_unfinished_work_as_errors(seed_results: dict, tmp_path: Path) -> None:
    seed_results["status"] = "crashed"
    seed_results["verdict"] = {"status": "running", "reasons": ["runner crashed: KeyError 'x'"]}
    seed_results["cases"]["native-eager-dp8"] = {
        "id": "native-eager-dp8",
        "label": "native DP8/TP1/EP8",
        "kind": "native",
        "status": "running",
        "smoke": {"status": "running", "prompt": "The capital of France is"},
    }
    seed_results["comparisons"] = {}
    roots = _parse(write_junit(typed(seed_results), tmp_path))
    _assert_structure(roots)
    cases = _testcases(roots)
    launch = cases[("afd-e2e.qwen3.5-122b-a10b.case.native-eager-dp8", "launch and readiness")].find("error")
    assert launch.get("message") == "did not finish (run status crashed)"
    verdict = cases[("afd-e2e.qwen3.5-122b-a10b.run", "verdict")].find("error")
    assert verdict.get("message") == "runner crashed: KeyError 'x'"


def test_cancelled_run_skips_what_it_did_not_reach(seed_results: dict, tmp_path: Path) -> None:
    seed_results["status"] = "cancelled"
    seed_results["cases"]["native-eager-dp8"] = {
        "id": "native-eager-dp8",
        "label": "native DP8/TP1/EP8",
        "kind": "native",
        "status": "cancelled",
    }
    cases = _testcases(_parse(write_junit(typed(seed_results), tmp_path)))
    assert (
        cases[("afd-e2e.qwen3.5-122b-a10b.case.native-eager-dp8", "launch and readiness")].find("skipped") is not None
    )
    assert cases[("afd-e2e.qwen3.5-122b-a10b.run", "verdict")].find("skipped") is not None


def test_case_that_crashed_between_phases_gets_its_own_error(crashed_results: dict, tmp_path: Path) -> None:
    roots = _parse(write_junit(typed(crashed_results), tmp_path))
    _assert_structure(roots)
    cases = _testcases(roots)
    suite = "afd-e2e.tiny-cpu.case.cpu-tp1"
    assert cases[(suite, "launch and readiness")].find("error") is None
    error = cases[(suite, "case")].find("error")
    assert "harness error: AttributeError" in error.get("message")
    parity = cases[("afd-e2e.tiny-cpu.comparison.tp1-vs-tp2", "parity")].find("skipped")
    assert parity.get("message") == "case cpu-tp1 recorded no parity outputs"


def test_case_failing_at_launch_has_no_extra_case_testcase(seed_results: dict, tmp_path: Path) -> None:
    case = seed_results["cases"]["native-eager-dp8"]
    case.update(status="failed", failure="server exited with code 1 before ready")
    del case["timings"]["launch_to_ready_s"]
    names = {
        name
        for (classname, name) in _testcases(_parse(write_junit(typed(seed_results), tmp_path)))
        if "dp8" in classname
    }
    assert "launch and readiness" in names and "case" not in names


def test_every_testcase_has_a_time_and_phases_carry_their_duration(seed_results: dict, tmp_path: Path) -> None:
    cases = _testcases(_parse(write_junit(typed(seed_results), tmp_path)))
    prefix = "afd-e2e.qwen3.5-122b-a10b.case.afd-eager-4a4f"
    assert cases[(prefix, "launch and readiness")].get("time") == "655.800"
    assert cases[(prefix, "gsm8k strict match")].get("time") == "88.400"
    assert cases[(prefix, "hygiene ports")].get("time") == "0.000"


def test_a_suite_name_and_its_classnames_are_the_same_text(seed_results: dict, tmp_path: Path) -> None:
    seed_results["cases"]["weird\x1b[31m\x00id"] = seed_results["cases"].pop("native-eager-dp8")
    roots = _parse(write_junit(typed(seed_results), tmp_path))
    suite = next(s for s in roots[0] if "weird" in s.get("name"))
    assert suite.get("name") == "afd-e2e.qwen3.5-122b-a10b.case.weird\\x00id"
    assert {tc.get("classname") for tc in suite.iter("testcase")} == {suite.get("name")}


def test_a_long_failure_output_is_cut_at_its_head_saying_where_the_whole_log_is(
    seed_results: dict, tmp_path: Path
) -> None:
    case = seed_results["cases"]["afd-eager-4a4f"]
    case.update(status="failed", failure="engine died", log_tail="x" * (OUTPUT_CHARS + 5) + "END")
    del case["timings"]["launch_to_ready_s"]
    cases = _testcases(_parse(write_junit(typed(seed_results), tmp_path)))
    text = cases[("afd-e2e.qwen3.5-122b-a10b.case.afd-eager-4a4f", "launch and readiness")].find("failure").text
    assert text.startswith("[8 characters cut; the whole text is in logs/afd-eager-4a4f/ffn.log, ")
    assert text.endswith("xxEND") and len(text) < OUTPUT_CHARS + 200


def test_a_required_parity_not_shown_fails_its_testcase_with_the_sentence(seed_results: dict, tmp_path: Path) -> None:
    """``require: parity`` on TPOT, judged inconclusive (as ``stats.judge`` words it): the testcase fails with the
    interval, the margin and the repetitions that would decide it; the same metric without ``require`` passes."""
    performance = seed_results["comparisons"]["performance"]["performance"]
    tpot = next(m for m in performance["metrics"] if m["key"] == "mean_tpot_ms")
    sentence = "interval [-9.1%, +4.2%] is wider than the ±3% margin: about 12 repetitions per side would decide it"
    tpot.update(verdict="inconclusive", ci90_pct=[-9.1, 4.2], margin_pct=3.0, needed_repetitions=12, reason=sentence)
    key = ("afd-e2e.qwen3.5-122b-a10b.comparison.performance", "performance mean_tpot_ms")
    assert _testcases(_parse(write_junit(typed(seed_results), tmp_path / "a")))[key].find("failure") is None
    tpot["require"] = "parity"
    failure = _testcases(_parse(write_junit(typed(seed_results), tmp_path / "b")))[key].find("failure")
    message = failure.get("message")
    assert message.startswith("not shown at parity (require: parity): TPOT: ") and message.endswith(sentence)
    assert "90% CI [-9.10%, +4.20%] against ±3%" in message and "(5+5 repetitions)" in message
    system_out = _testcases(_parse(write_junit(typed(seed_results), tmp_path / "c")))[key].find("system-out").text
    assert system_out.endswith("can see ±2.0% (called different 80% of the time at this noise)")
