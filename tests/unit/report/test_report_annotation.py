"""annotation.md: the seed's table, escaping of untrusted text, partial runs, and the 1 MiB limit."""

from __future__ import annotations

import re

from afd_e2e.report.annotation import FULL_REPORT_FILE, MAX_BYTES, render_annotation
from afd_e2e.results.model import LOG_TAIL_CHARS
from results_docs import typed

SEED_ROWS = [
    "| Request throughput | 2.4047 ± 0.0195 req/s | 2.4295 ± 0.0092 req/s | +1.03% |",
    "| Output throughput | 307.80 ± 2.50 tok/s | 310.98 ± 1.18 tok/s | +1.03% |",
    "| TTFT | 371.29 ± 13.39 ms | 404.24 ± 6.16 ms | +8.87% |",
    "| TPOT | 100.13 ± 0.78 ms | 98.88 ± 0.38 ms | -1.25% |",
    "| ITL | 100.13 ± 0.78 ms | 98.88 ± 0.38 ms | -1.25% |",
    "| E2E latency | 13088.36 ± 109.82 ms | 12962.50 ± 49.08 ms | -0.96% |",
]


def test_seed_performance_table_reads_like_the_seed(seed_results: dict) -> None:
    body = render_annotation(typed(seed_results), plots={"performance": "plots/performance.png"}).body
    header = (
        "| Metric | native DP8/TP1/EP8 | AFD 4A4F | Delta | Interval vs margin | Verdict | Can see | Reps | Noise |"
    )
    assert header in body
    for row in SEED_ROWS:
        assert row in body, row
    # the interval against the margin as a text bar, the verdict, the smallest change these 5+5 repetitions could
    # see (TTFT's CV 3.6% against 1.5%: ±6.0%; the quieter TPOT's is its 2% threshold), the repetitions used, the
    # noise and its flags
    ttft = "| +8.87% | [+5.38%, +12.37%] ±5% <code>·····¦····0····¦■■■■▶</code> | **worse** ⚠️ warning | ±6.0% | 5+5 |"
    assert ttft + " CV 3.6%/1.5%; ⚠️ base warm-up -5.6% |" in body
    tpot = "| -1.25% | [-2.01%, -0.49%] ±5% <code>·····¦··■■0····¦·····</code> | parity | ±2.0% | 5+5 | CV 0.8%/0.4% |"
    assert tpot in body
    assert "1024/1024 requests completed each; 0 failed requests" in body
    assert '<img src="artifact://plots/performance.png"' in body


def test_headline_verdict_comes_first_and_sections_follow_in_order(seed_results: dict) -> None:
    annotation = render_annotation(typed(seed_results), artifacts=["results.json"])
    assert annotation.body.splitlines()[0] == "## ⚠️ afd-e2e qwen3\\.5\\-122b\\-a10b: passed"
    positions = [
        annotation.body.index(f"### {title}")
        for title in ("Correctness", "Performance", "Hygiene", "Environment", "Artifacts")
    ]
    assert positions == sorted(positions)
    assert annotation.style == "warning"
    assert annotation.full_body is None


def test_seed_ttft_worse_renders_a_warning_and_only_a_clean_run_is_success(seed_results: dict) -> None:
    """The seed's TTFT +8.87% (95% CI excludes zero; on_worse: warn by default) must not read as a green pass."""
    annotation = render_annotation(typed(seed_results))
    assert annotation.style == "warning"
    warning = "TTFT worse\\: \\+8\\.87% \\(95% CI \\[\\+4\\.46%, \\+13\\.29%\\]\\)"
    assert f"- ⚠️ performance\\: {warning}" in annotation.body  # in the headline
    assert f"⚠️ Performance warning: {warning} (<code>on_worse: warn</code>)" in annotation.body
    seed_results["comparisons"]["performance"]["performance"]["warnings"] = []
    assert render_annotation(typed(seed_results)).style == "success"


def test_a_failing_metric_gate_reads_as_such(seed_results: dict) -> None:
    performance = seed_results["comparisons"]["performance"]["performance"]
    performance["metrics"][2]["on_worse"] = "fail"
    performance.update(status="failed", failure=performance.pop("warnings")[0])
    seed_results["verdict"] = {"status": "failed", "reasons": ["performance performance: failed"]}
    annotation = render_annotation(typed(seed_results))
    assert annotation.style == "error"
    assert "| **worse** ❌ fails the gate |" in annotation.body
    assert "Performance gate: ❌ failed: TTFT worse\\: \\+8\\.87%" in annotation.body


def test_parity_per_prompt_shows_identical_close_and_different_with_tokens(seed_results: dict) -> None:
    prompts = seed_results["comparisons"]["correctness"]["parity"]["prompts"]
    side = {"token_id": 188, "text": " the", "logprob": -0.51, "other_logprob": -0.52, "other_in_top_k": True}
    other = {"token_id": 836, "text": " a", "logprob": -0.5, "other_logprob": -0.53, "other_in_top_k": True}
    prompts[3].update(identical=False, first_diff_token=15, verdict="close", baseline=side, candidate=other)
    seed_results["comparisons"]["correctness"]["parity"].update(identical=3, close=1)
    body = render_annotation(typed(seed_results)).body
    assert "| ✅ 3/4 identical, 1 close vs native DP4/TP1/EP4 |" in body
    assert "| Water boils at | 🟰 close | 15 | 188 <code>' the'</code> (-0.5100; other's -0.5200) " in body
    assert "| 836 <code>' a'</code> (-0.5000; other's -0.5300) |" in body
    assert "| The capital of France is | ✅ identical | — | — | — |" in body


def test_correctness_and_environment_rows(seed_results: dict) -> None:
    body = render_annotation(typed(seed_results)).body
    assert "| AFD 4A4F (<code>afd\\-eager\\-4a4f</code>) | ✅ passed | 10 min 56 s |" in body
    assert "| ✅ 7/7 | ✅ 4/4 identical vs native DP4/TP1/EP4 |" in body
    assert "- **GPUs**: 8 × NVIDIA RTX PRO 6000 Blackwell Server Edition (97,887 MiB each)" in body
    assert "· 233.8 GiB" in body
    assert "**Preflight** ✅ passed: ✅ 17 passed in 0.41 s" in body
    assert "| GPU0 | X | PIX | PXB | PXB | SYS | SYS | SYS | SYS |" in body


def test_preflight_checks_that_did_not_pass_are_listed_with_their_fix(seed_results: dict) -> None:
    check = seed_results["preflight"]["checks"][7]
    check.update(status="warned", measured="pcie", wanted="nvlink preferred", fix="results characterize PCIe only")
    body = render_annotation(typed(seed_results)).body
    assert f"| {check['name']} | ⚠️ warned | pcie | nvlink preferred | results characterize PCIe only |" in body


def test_failed_verdict_is_an_error_and_names_the_failure(seed_results: dict) -> None:
    seed_results["verdict"] = {"status": "failed", "reasons": ["GSM8K strict match 6/7 on AFD 4A4F, 7 needed"]}
    gsm8k = seed_results["cases"]["afd-eager-4a4f"]["gsm8k"]
    gsm8k.update(status="failed", correct=6)
    gsm8k["questions"][3].update(correct=False, extracted="541")
    annotation = render_annotation(typed(seed_results))
    assert annotation.style == "error"
    assert annotation.body.startswith("## ❌ afd-e2e")
    assert "- GSM8K strict match 6/7 on AFD 4A4F, 7 needed" in annotation.body
    assert "❌ 6/7 (at least 7 needed)" in annotation.body
    assert "| 3 | 541 | 540 | 540 | ❌ |" in annotation.body


def test_smoke_profile_has_a_banner(tiny_results: dict) -> None:
    lines = render_annotation(typed(tiny_results)).body.splitlines()
    assert lines[0] == "## ⚠️ SMOKE afd-e2e tiny\\-cpu: passed"  # the real run passed with performance warnings
    assert lines[2].startswith("> **SMOKE profile**")
    assert "✅ 0/3 (not meaningful)" in "\n".join(lines)


def _table_cells(body: str, first_cell: str) -> list[str]:
    """The cells of the table row starting with ``first_cell``, split on unescaped pipes as GFM does."""
    row = next(line for line in body.splitlines() if line.startswith(f"| {first_cell}"))
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", row)[1:-1]]


def test_model_output_cannot_inject_html_or_markdown(tiny_results: dict) -> None:
    hostile = "<script>alert(1)</script> | **bold** `code` [link](http://evil.example) www.evil.example ![i](x) _u_ #h"
    case = tiny_results["cases"]["cpu-tp1"]
    case["smoke"]["completion"] = hostile
    case["gsm8k"]["questions"][0]["extracted"] = hostile
    case["status"], case["failure"] = "failed", hostile
    case["log_tail"] = "INFO ok\n</pre><script>x</script>\n```\n]]> done"
    body = render_annotation(typed(tiny_results)).body
    assert "<script>" not in body and "</script>" not in body
    assert "&lt;script&gt;alert\\(1\\)&lt;/script&gt;" in body
    for raw in ("**bold**", "`code`", "[link](", "http://", "www.evil", "![i]", " _u_"):
        assert raw not in body, raw
    assert "\\*\\*bold\\*\\*" in body and "\\`code\\`" in body and "\\[link\\]" in body
    # The pipe in the model's answer stays inside its cell: the GSM8K row keeps five cells.
    assert len(_table_cells(body, "0 |")) == 5
    # A log tail cannot close its <pre> early.
    assert body.count("</pre>") == body.count("<pre>") == 1
    assert "&lt;/pre&gt;&lt;script&gt;x&lt;/script&gt;" in body


def test_control_characters_never_reach_the_annotation(tiny_results: dict) -> None:
    tiny_results["cases"]["cpu-tp2"]["smoke"]["completion"] = "a\x00b\x1b[31mred\x1b[0m\x07c\ud800"
    body = render_annotation(typed(tiny_results)).body
    assert not re.search("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff]", body)
    assert "Completion: a\\\\x00bred\\\\x07c\\\\ud800" in body


def test_running_run_renders_as_incomplete_with_what_did_not_finish(seed_results: dict) -> None:
    seed_results["status"] = "running"
    seed_results["finished_at"] = None
    seed_results["verdict"] = {"status": "running", "reasons": []}
    seed_results["cases"]["afd-eager-4a4f"] = {"id": "afd-eager-4a4f", "label": "AFD 4A4F", "kind": "afd"}
    del seed_results["cases"]["native-eager-dp8"]
    seed_results["comparisons"] = {}
    annotation = render_annotation(typed(seed_results))
    first = annotation.body.splitlines()[0]
    assert first.startswith("## ⚠️ afd-e2e") and "incomplete" in first and "partial results" in first
    assert "Did not finish: <code>afd\\-eager\\-4a4f</code>" in annotation.body
    assert "Not started: <code>native\\-eager\\-dp8</code>" in annotation.body
    assert "| native DP8/TP1/EP8 (<code>native\\-eager\\-dp8</code>) | ⏳ not started |" in annotation.body
    assert "### Performance" not in annotation.body
    assert annotation.style == "warning"


def test_cancelled_and_crashed_runs_say_so(seed_results: dict) -> None:
    seed_results["status"] = "cancelled"
    assert "cancelled (partial results)" in render_annotation(typed(seed_results)).body.splitlines()[0]
    seed_results["status"] = "crashed"
    crashed = render_annotation(typed(seed_results))
    assert crashed.body.splitlines()[0].startswith("## ❌") and "crashed (partial results)" in crashed.body
    assert crashed.style == "error"


def test_a_run_that_finished_before_it_started_shows_no_negative_duration(tiny_results: dict) -> None:
    """A record whose ``finished_at`` is before its ``started_at`` (the clock stepped back a day mid-run) printed
    "took -86115.0 s": it says the record contradicts itself instead, and gives no duration."""
    tiny_results["finished_at"] = "2026-11-29T16:23:05+00:00"  # the real run's start is 2026-11-30T16:21
    facts = render_annotation(typed(tiny_results)).body.splitlines()[4]
    assert "took" not in facts
    assert "no duration: finished_at 2026\\-11\\-29T16\\:23\\:05\\+00\\:00 is before started_at" in facts
    assert "the clock went backwards, or the record is inconsistent" in facts


def test_bare_results_with_no_sections_render(seed_results: dict) -> None:
    bare = {key: seed_results[key] for key in ("schema", "platform", "smoke_only", "started_at", "plan")}
    bare.update(profile="p", status="crashed")
    body = render_annotation(typed(bare)).body
    assert body.startswith("## ❌ afd-e2e p: crashed")
    assert "not recorded (the run stopped before probing the environment)" in body


def _many_questions(results: dict, count: int) -> None:
    questions = results["cases"]["cpu-tp1"]["gsm8k"]["questions"]
    questions[:] = [{**questions[0], "index": i} for i in range(count)]


def test_over_size_annotation_becomes_a_summary_naming_what_moved(tiny_results: dict) -> None:
    case = tiny_results["cases"]["cpu-tp1"]
    case["status"], case["failure"], case["log_tail"] = "failed", "engine died", "Traceback\nOOM"
    _many_questions(tiny_results, 30000)
    annotation = render_annotation(typed(tiny_results))
    assert len(annotation.body.encode("utf-8")) <= MAX_BYTES
    assert annotation.full_body is not None and len(annotation.full_body.encode("utf-8")) > MAX_BYTES
    assert f'Moved to <a href="artifact://{FULL_REPORT_FILE}">' in annotation.body
    assert "annotation\\-full\\.md</a>: Failures, Model output." in annotation.body
    assert annotation.body.splitlines()[0] == annotation.full_body.splitlines()[0]
    assert "### Performance" in annotation.body and "### Failures" not in annotation.body


def test_a_long_log_tail_is_cut_saying_what_and_where_the_whole_log_is(tiny_results: dict) -> None:
    case = tiny_results["cases"]["cpu-tp1"]
    case["status"], case["failure"] = "failed", "engine died"
    case["log_tail"] = "x" * (MAX_BYTES + 10)
    body = render_annotation(typed(tiny_results)).body
    assert len(body.encode("utf-8")) < MAX_BYTES
    cut = MAX_BYTES + 10 - LOG_TAIL_CHARS
    assert f"<pre>[{cut:,} characters cut; the whole text is in logs/cpu-tp1/server.log]\nxxx" in body


def test_a_long_cell_is_cut_saying_so(tiny_results: dict) -> None:
    tiny_results["cases"]["cpu-tp2"]["smoke"]["completion"] = "abcd" * 1000
    body = render_annotation(typed(tiny_results)).body
    assert "abcd… \\[2,000 characters cut; the whole text is in results\\.json\\]" in body


def test_summary_keeps_only_headline_and_pointer_when_tables_alone_overflow(tiny_results: dict) -> None:
    annotation = render_annotation(typed(tiny_results), max_bytes=1500)
    assert len(annotation.body.encode("utf-8")) <= 1500
    assert "### Correctness" not in annotation.body and FULL_REPORT_FILE in annotation.body


def test_skipped_phases_show_their_reason_in_the_table_not_as_failures(tiny_results: dict) -> None:
    case = tiny_results["cases"]["cpu-tp1"]
    case["gsm8k"].update(status="skipped", failure="workloads not installed", questions=[])
    case["performance"] = {"status": "skipped", "failure": "workloads not installed"}
    tiny_results["cases"]["cpu-tp2"]["gsm8k"].update(status="crashed", failure="evaluator raised ValueError")
    body = render_annotation(typed(tiny_results)).body
    assert "| ⏭️ skipped: workloads not installed |" in body
    failures = body[body.index("### Failures") : body.index("### Environment")]
    assert "workloads not installed" not in failures
    assert "- gsm8k: evaluator raised ValueError" in failures


def test_failed_performance_gate_says_why_under_its_table(seed_results: dict) -> None:
    performance = seed_results["comparisons"]["performance"]["performance"]
    performance.update(status="failed", failure="case afd-eager-4a4f: 4 repetitions passed, 1 timed out")
    body = render_annotation(typed(seed_results)).body
    assert "Performance gate: ❌ failed: case afd\\-eager\\-4a4f\\: 4 repetitions passed, 1 timed out" in body
    assert "| TTFT | 371.29 ± 13.39 ms | 404.24 ± 6.16 ms | +8.87% |" in body


def test_real_crashed_run_reads_as_crashed_with_reasons(crashed_results: dict) -> None:
    annotation = render_annotation(typed(crashed_results))
    assert annotation.body.splitlines()[0] == "## ❌ SMOKE afd-e2e tiny\\-cpu: crashed (partial results)"
    assert annotation.style == "error"
    assert "| ⏭️ skipped: case cpu\\-tp1 recorded no parity outputs |" in annotation.body
    assert "No metrics: ⏭️ skipped: case cpu\\-tp1 recorded no performance" in annotation.body
    assert "- case: harness error\\: AttributeError" in annotation.body
