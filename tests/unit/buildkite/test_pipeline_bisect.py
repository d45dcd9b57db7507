"""Unit tier: the pipeline closes the loop (``afd_e2e.pipeline.bisect_steps``): a nightly whose trend opened a
regression episode tonight gets a bisect step, behind a block by default and unattended where the profile says so,
on the profile's agent tags in the GPU queue's concurrency group, schema-valid; episodes without a step of their own
are explained; ``afd-e2e pipeline --bisect-from DIR`` does it from a real trend's files."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml

from afd_e2e.cli import main
from afd_e2e.pipeline.bisect_steps import bisect_pipeline, select_bisects
from afd_e2e.pipeline.followers import leader_concurrency_group
from afd_e2e.profile import load_profile
from afd_e2e.trend.episodes import Episode
from afd_e2e.trend.record import BuildRef, metric
from fixtures.trend.make_history import make_history

PROFILE = load_profile("qwen3.5-122b-a10b")
GOOD, BAD = "a1b2c3" + "0" * 34, "d4e5f6" + "0" * 34


def _episode(key: str, case: str = "afd-4a4f", good: str | None = GOOD, bad: str | None = BAD) -> Episode:
    return Episode(case, metric(key), BuildRef("#41", 41, commit=good), BuildRef("#42", 42, commit=bad), 1, 12.5, 20.0)


def test_one_bisect_per_case_on_tpot_and_the_rest_explained() -> None:
    selection = select_bisects(
        [
            _episode("mean_itl_ms"),
            _episode("mean_tpot_ms"),
            _episode("ready_s"),
            _episode("mean_tpot_ms", case="native", bad=None),
            _episode("mean_ttft_ms", case="other", good=BAD),
        ]
    )
    assert [(o.case_id, o.metric, o.good, o.bad) for o in selection.offers] == [("afd-4a4f", "mean_tpot_ms", GOOD, BAD)]
    assert selection.not_offered == (
        "afd-4a4f mean_itl_ms: the case's mean_tpot_ms regression is bisected instead",
        "afd-4a4f ready_s: not a bench metric, which a bisect measures at each commit",
        "native mean_tpot_ms: build #42 recorded no commit",
        f"other mean_ttft_ms: the last good and first bad builds ran one commit ({BAD[:12]}): nothing to bisect",
    )


def test_the_bisect_step_is_a_block_then_the_job_on_the_gpu_queue(valid_pipeline) -> None:
    selection = select_bisects([_episode("mean_tpot_ms"), _episode("ready_s")])
    pipeline = bisect_pipeline(selection, PROFILE, "qwen3.5-122b-a10b", "gpu-agent-7", timeout_in_minutes=600)
    data = pipeline.to_dict()
    valid_pipeline(data)
    block, job, why = data["steps"][0]["steps"]
    assert block["block"] == "Bisect tpot regression a1b2c3..d4e5f6 on gpu-agent-7?"
    assert job["depends_on"] == [block["key"]] and job["agents"] == dict(PROFILE.agent_tags)
    assert job["concurrency"] == 1 and job["concurrency_group"] == leader_concurrency_group([PROFILE])
    assert job["command"].startswith(
        f"afd-e2e bisect --profile qwen3.5-122b-a10b --case afd-4a4f --metric mean_tpot_ms --good {GOOD} --bad {BAD}"
    )
    assert "--out afd-e2e-bisect --regression-pct 12.5 " in job["command"], "the episode's move is the size hunted"
    assert "buildkite-agent annotate" in job["command"] and job["command"].endswith("exit $status")
    assert "ready_s: not a bench metric" in why["env"]["AFD_E2E_ANNOTATION"]


def test_unattended_where_the_profile_says_so(valid_pipeline) -> None:
    unattended = dataclasses.replace(PROFILE, trend=dataclasses.replace(PROFILE.trend, bisect="unattended"))
    data = bisect_pipeline(
        select_bisects([_episode("mean_tpot_ms")]), unattended, "q", "gpu-agent-7", timeout_in_minutes=600
    ).to_dict()
    valid_pipeline(data)
    (job,) = data["steps"][0]["steps"]
    assert "command" in job and not job.get("depends_on")


def test_pipeline_bisect_from_a_nightly_whose_trend_opened_an_episode(tmp_path: Path, capsys, valid_pipeline) -> None:
    # tonight is build 121, its second slow night: the episode opens tonight, its first bad night 120 (one night
    # alone never opens one)
    history = make_history(tmp_path / "made", slow_from=120)
    assert main(["trend", str(history.tonight), "--history", str(history.folder)]) == 0
    capsys.readouterr()
    assert main(["pipeline", "--profile", "tiny-cpu", "--bisect-from", str(history.tonight)]) == 0
    captured = capsys.readouterr()
    data = yaml.safe_load(captured.out)
    valid_pipeline(data)
    steps = data["steps"][0]["steps"]
    assert steps[0]["block"].startswith("Bisect tpot regression 000000..000000 on ")
    assert f"--good {119:040x} --bad {120:040x}" in steps[1]["command"]
    assert "1 bisect step offered" in captured.err and "is bisected instead" in captured.err


def test_a_nightly_with_no_episode_tonight_offers_nothing(tmp_path: Path, capsys) -> None:
    history = make_history(tmp_path / "made")  # the episode opened at 116, five nights ago: alerted then
    main(["trend", str(history.tonight), "--history", str(history.folder)])
    capsys.readouterr()
    assert main(["pipeline", "--profile", "tiny-cpu", "--bisect-from", str(history.tonight)]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == {"steps": []}


def test_a_trend_of_another_profile_or_case_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    """Another profile's trend would put that trend's case on this profile's queue (``--case cpu-tp1`` on a GPU
    agent): refused, naming both; so is a case the profile no longer has (same name, revised profile)."""
    history = make_history(tmp_path / "made", slow_from=120)  # two slow nights: the change tonight offers a bisect
    assert main(["trend", str(history.tonight), "--history", str(history.folder)]) == 0
    capsys.readouterr()
    assert main(["pipeline", "--profile", "qwen3.5-122b-a10b", "--bisect-from", str(history.tonight)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "(fix: " in err
    assert "profile tiny-cpu" in err and "--profile qwen3.5-122b-a10b" in err
    shipped = Path(__file__).resolve().parents[3] / "python" / "afd_e2e" / "profiles" / "tiny-cpu.yaml"
    revised = tmp_path / "tiny-cpu.yaml"
    revised.write_text(shipped.read_text().replace("cpu-tp2", "cpu-tp4"), encoding="utf-8")
    assert main(["pipeline", "--profile", str(revised), "--bisect-from", str(history.tonight)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "case cpu-tp2" in err and "profile tiny-cpu" in err and "(fix: " in err
