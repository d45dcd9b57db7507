"""Unit tier: ``afd-e2e bisect``'s command line over a real git history (``tests/bisect_plugin``, built in tmp by
git, nothing installed or launched): ``--dry-run`` prints the first-parent list and the probe plan; bad input is
one line and exit 2; the log a search writes replays with ``git bisect replay`` to the same first bad commit;
``afd-e2e schema bisect`` prints the shipped schema."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from bisect_support import StandIns, slowed_from

from afd_e2e.bisect.commits import first_parent_commits
from afd_e2e.bisect.drive import BisectSettings, run_bisect
from afd_e2e.bisect.verdicts import metric_spec
from afd_e2e.cli import main
from afd_e2e.profile import load_profile
from afd_e2e.results.bisect_records import bisect_schema_text
from afd_e2e.runner.cancellation import CancelFlag
from bisect_plugin.make_history import BROKEN_AT, SLOW_AT, SUBJECTS, make_history
from repo_paths import FIXTURES

PROFILE = str(FIXTURES / "profiles" / "bisect-cpu.yaml")
# A dry run goes through admission, which refuses busy ports: the profile's own 23200 is where the engine tier's
# bisect module serves, beside this tier in CI (a loaded run failed two tests here on it). This module's ports are
# in the unit tier's block (tests/unit/runner/stand_ins.py: UNIT_PORT_BASE 19400, +70).
PORT_BASE = 19470
LAST = len(SUBJECTS) - 1  # the history's newest commit (main); main~LAST is its first


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    repo = tmp_path_factory.mktemp("history") / "plugin"
    return repo, make_history(repo)


@pytest.fixture
def gates_open(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, vllm_on_path) -> Path:
    """The profile's model gate opened on a checkpoint folder that passes the checkpoint checks (nothing loads it),
    a stand-in vllm on PATH: what admission needs before a dry run prints its plan."""
    ckpt = tmp_path_factory.mktemp("ckpt")
    config = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "num_experts": 8}
    (ckpt / "config.json").write_text(json.dumps({**config, "num_experts_per_tok": 2}))
    (ckpt / "model.safetensors").write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}      ")
    (ckpt / "tokenizer.json").write_text("{}")
    monkeypatch.setenv("AFD_E2E_TINY_MODEL", str(ckpt))
    return ckpt


def _bisect(repo: Path, out: Path, *extra: str, metric: str = "mean_tpot_ms") -> int:
    argv = ["bisect", "--profile", PROFILE, "--case", "cpu-tp1", "--metric", metric, "--repo", str(repo)]
    return main([*argv, "--out", str(out), "--port-base", str(PORT_BASE), *extra])


def test_a_dry_run_prints_the_commits_and_the_plan(history, gates_open, tmp_path: Path, capsys) -> None:
    repo, shas = history
    assert _bisect(repo, tmp_path / "out", "--good", f"main~{LAST}", "--bad", "main", "--dry-run") == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{LAST + 1} first-parent commits, oldest first:"
    assert out[1] == f"    0 {shas[0]} {SUBJECTS[0]}" and out[LAST + 1] == f"    {LAST} {shas[LAST]} {SUBJECTS[LAST]}"
    assert out[LAST + 2] == f"probe 1: {shas[0][:12]} (good revision, the reference)"
    assert not (tmp_path / "out").exists(), "a dry run writes nothing"


def test_a_merged_branch_counts_as_its_merge_commit(gates_open, tmp_path: Path, capsys) -> None:
    repo = tmp_path / "plugin"
    shas = make_history(repo)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "checkout", "-q", "-b", "side", shas[LAST]], check=True)
    (repo / "side.txt").write_text("side\n")
    subprocess.run([*git, "add", "side.txt"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "side: one"], check=True)
    subprocess.run([*git, "checkout", "-q", "main"], check=True)
    subprocess.run([*git, "merge", "-q", "--no-ff", "-m", "merge side", "side"], check=True)
    assert _bisect(repo, tmp_path / "out", "--good", shas[LAST - 1], "--bad", "main", "--dry-run") == 0
    listed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("    ")]
    assert [line.split(" ", 6)[-1] for line in listed] == [SUBJECTS[LAST - 1], SUBJECTS[LAST], "merge side"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--good", f"main~{LAST}", "--bad", "nope"), "--bad 'nope' is not a commit of"),
        (("--good", "main", "--bad", "main~3"), "--good main is not on the first-parent line of --bad main~3"),
        (("--good", "main", "--bad", "main"), "--good and --bad are the same commit"),
        (("--good", f"main~{LAST}", "--bad", "main", "--max-runs", "0"), "--max-runs 0 is below 1"),
        (("--good", f"main~{LAST}", "--bad", "main", "--regression-pct", "-3"), "--regression-pct -3 is not above 0"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(history, tmp_path: Path, capsys, args, said: str) -> None:
    repo, _shas = history
    assert _bisect(repo, tmp_path / "out", *args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("afd-e2e bisect: error: ") and said in err and "(fix: " in err


def _without_pyproject(repo: Path) -> None:
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    for index in range(3):
        (repo / "README.md").write_text(f"notes {index}\n")
        subprocess.run([*git, "add", "README.md"], check=True)
        subprocess.run([*git, "commit", "-q", "-m", f"notes {index}"], check=True)


@pytest.mark.parametrize(
    ("setup", "said"),
    [
        ("no model", "profile bisect-cpu needs a model folder"),
        ("closed gates", "profile qwen3.5-122b-a10b's opt-in gates are closed"),
        ("out is a file", "is a file, not a folder"),
        ("no pyproject", "has no pyproject.toml or setup.py at its root at --good"),
    ],
)
def test_a_dry_run_is_refused_where_a_real_bisect_is(
    history, gates_open, tmp_path: Path, monkeypatch, capsys, setup: str, said: str
) -> None:
    repo, _shas = history
    out = tmp_path / "out"
    argv = ["--good", "main~2", "--bad", "main", "--dry-run"]
    if setup == "no model":
        monkeypatch.delenv("AFD_E2E_TINY_MODEL")
    elif setup == "out is a file":
        out.write_text("not a folder\n")
    elif setup == "no pyproject":
        repo = tmp_path / "notes"
        _without_pyproject(repo)
    if setup == "closed gates":  # a GPU profile on this machine without its opt-in variables
        gpu = ["bisect", "--profile", "qwen3.5-122b-a10b", "--case", "afd-eager-4a4f", "--metric", "mean_tpot_ms"]
        assert main([*gpu, "--repo", str(repo), "--out", str(out), *argv]) == 2
    else:
        assert _bisect(repo, out, *argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err and "(fix: " in err
    assert setup == "out is a file" or not out.exists(), "a refused dry run writes nothing"


def test_a_folder_that_is_not_a_repository_is_bad_input(tmp_path: Path, capsys) -> None:
    assert _bisect(tmp_path, tmp_path / "out", "--good", "a", "--bad", "b") == 2
    assert f"--repo {tmp_path} is not a git repository" in capsys.readouterr().err


def test_schema_bisect_prints_the_shipped_schema(capsys) -> None:
    assert main(["schema", "bisect"]) == 0
    assert capsys.readouterr().out == bisect_schema_text()


def test_the_log_replays_in_the_repository_with_git_bisect(history, tmp_path: Path) -> None:
    repo, shas = history
    spec = metric_spec(load_profile("tiny-cpu"), "cpu-tp1", "mean_tpot_ms")
    settings = BisectSettings(
        load_profile("tiny-cpu"), "cpu-tp1", spec, repo, f"main~{LAST}", "main", tmp_path, tmp_path / "c"
    )
    stand_ins = StandIns(shas, tpot=slowed_from(SLOW_AT), uninstallable=(BROKEN_AT,))
    run_bisect(
        settings,
        first_parent_commits(repo, f"main~{LAST}", "main"),
        install=lambda sha: stand_ins.install(sha, settings.cache),
        launch=stand_ins.launch,
        flag=CancelFlag(),
        say=lambda _line: None,
    )
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(repo), str(clone)], check=True)
    replayed = subprocess.run(
        ["git", "-C", str(clone), "bisect", "replay", str(tmp_path / "bisect.log")], capture_output=True, text=True
    )
    assert f"{shas[SLOW_AT]} is the first bad commit" in replayed.stdout
