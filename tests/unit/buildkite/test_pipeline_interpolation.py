"""Text no one here wrote (branch names, profile names and paths, agent names) cannot expand or break out.

The generated pipeline is uploaded the way the README's bootstrap step and this repository's pipeline upload it; the
upload is modelled with Buildkite's interpolation rules (interpolation.py). Hostile values must arrive verbatim,
no variable of the bootstrap job may be expanded, and the annotation commands, run by bash as an agent runs them,
must put the exact text on the build page and run nothing else.
"""

from __future__ import annotations

import re

import pytest
import yaml
from bk_support import AGENTS_LIST, BUILD, REPO, FakeAgent, agent
from bk_support import QWEN_OPT_IN as OPT_IN
from interpolation import InterpolationError, interpolate, upload, upload_flags

from afd_e2e.profile import load_profile

SECRET = "s3cr3t-token-value"
SECRET_ENV = {"SOME_SECRET": SECRET, "BUILDKITE_AGENT_ACCESS_TOKEN": SECRET}
# Each one expands, escapes or quotes differently under Buildkite's rules or in bash.
HOSTILE = [
    r"rel\${SOME_SECRET}",
    "$SOME_SECRET",
    "$${SOME_SECRET}",
    "${SOME_SECRET:-default}",
    "${UNSET_VARIABLE?}",
    r"\\$SOME_SECRET",
    "it's'; touch pwned; echo '",
    '"; touch pwned; echo "',
    "$(touch pwned)`touch pwned`",
]
CONSTANT_COMMAND = re.compile(r"^[A-Za-z0-9_ ./|-]+$")  # no quote, $, backslash or backtick: nothing to break out of


@pytest.mark.parametrize(
    ("text", "env", "expected", "expanded"),
    [
        ("$A and ${A}", {"A": "x"}, "x and x", ["A", "A"]),
        ("$$A \\$A", {"A": "x"}, "$A $A", []),
        ("\\\\$A", {"A": "x"}, "\\\\x", ["A"]),  # an escaped backslash stays two characters, then $A expands
        ("\\$$A", {"A": "x"}, "$x", ["A"]),  # the old `$` -> `$$` escaping of a `\$` still expands
        ("${A:-d} ${B:-d} ${B-u}", {"A": "", "B": "y"}, "d y y", ["A", "B", "B"]),
        ("$(date) cost 5$", {}, "$(date) cost 5$", []),
    ],
)
def test_the_rules(text, env, expected, expanded):
    result = interpolate(text, env)
    assert (result.text, result.expanded) == (expected, expanded)


@pytest.mark.parametrize("text", ["${UNSET?}", "${UNSET?why}", "$0", "${A"])
def test_the_rules_fail_the_upload(text):
    with pytest.raises(InterpolationError):
        interpolate(text, {})


def bootstrap_uploads() -> dict[str, list[str]]:
    """Every ``pipeline upload`` command of the README's bootstrap step and of this repository's pipeline."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```yaml\n(.*?)^```", readme, flags=re.DOTALL | re.MULTILINE)
    pipelines = {f"README.md block {i}": yaml.safe_load(b) for i, b in enumerate(blocks)}
    pipelines[".buildkite/pipeline.yml"] = yaml.safe_load((REPO / ".buildkite/pipeline.yml").read_text("utf-8"))
    uploads = {}
    for where, pipeline in pipelines.items():
        for step in pipeline["steps"]:
            for command in step.get("commands", [step.get("command", "")]):
                flags = upload_flags(command or "")
                if flags is not None:
                    uploads[f"{where}: {command}"] = flags
    return uploads


def test_every_upload_is_without_interpolation():
    uploads = bootstrap_uploads()
    assert any(where.startswith("README.md") for where in uploads)
    assert any(where.startswith(".buildkite") for where in uploads)
    for where, flags in uploads.items():
        assert "--no-interpolation" in flags, where


def test_the_plugin_uploads_no_pipeline():
    shell = [REPO / "plugin" / "lib.sh", *sorted((REPO / "hooks").iterdir())]
    assert not [path for path in shell if "pipeline upload" in path.read_text(encoding="utf-8")]


def test_this_repository_pipeline_holds_nothing_to_interpolate():
    text = (REPO / ".buildkite" / "pipeline.yml").read_text(encoding="utf-8")
    assert upload(text, SECRET_ENV, no_interpolation=False) == (yaml.safe_load(text), [])


@pytest.fixture
def hostile_profile(tmp_path):
    """The qwen profile renamed ``name``, in a folder whose path is hostile too."""

    def make(name: str) -> str:
        data = yaml.safe_load(load_profile_path("qwen3.5-122b-a10b").read_text(encoding="utf-8"))
        data["name"] = name
        folder = tmp_path / f"profiles-{HOSTILE.index(name)}-{name.replace('/', '_')}"
        folder.mkdir(exist_ok=True)
        path = folder / "p.yaml"
        path.write_text(yaml.safe_dump(data), encoding="utf-8")
        assert load_profile(str(path)).name == name
        return str(path)

    return make


def load_profile_path(name: str):
    return REPO / "python" / "afd_e2e" / "profiles" / f"{name}.yaml"


@pytest.fixture
def generate(pipeline_cli, agents_api, valid_pipeline):
    """``afd-e2e pipeline`` in a bootstrap job holding secrets, uploaded as the README's bootstrap step does."""
    (flags,) = {tuple(f) for w, f in bootstrap_uploads().items() if w.startswith("README.md")}

    def run(variables: dict[str, str], agents: list[dict], profile: str, status: int = 200):
        agents_api.serve(AGENTS_LIST, agents, status=status)
        environ = {**BUILD, **SECRET_ENV, **variables}
        code, out, err = pipeline_cli(environ, "--profile", profile, "--allowed-teams", "gpu")
        assert code == 0, err
        uploaded, expanded = upload(out, environ, no_interpolation="--no-interpolation" in flags)
        assert expanded == []
        assert uploaded == yaml.safe_load(out)  # every string arrives as generated
        valid_pipeline(uploaded)
        assert SECRET not in out
        return uploaded, out

    return run


def all_steps(pipeline):
    return [step for group in pipeline["steps"] for step in group["steps"]]


def run_annotations(tmp_path, pipeline, name: str = "light") -> list[tuple[str, str]]:
    """Run each annotation step as an agent does (bash); return (recorded call, the body the step carried)."""
    runner = FakeAgent(tmp_path / name)
    results = []
    for step in all_steps(pipeline):
        if "command" in step:
            before = len(runner.calls())
            assert runner.run_command(step) == 0
            (call,) = runner.calls()[before:]
            results.append((call, step["env"]["AFD_E2E_ANNOTATION"]))
    assert not list(runner.build_dir.iterdir()), "a command created files: it ran something it should not"
    return results


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_branch_in_an_explanation(generate, tmp_path, hostile):
    pipeline, _ = generate({"BUILDKITE_SOURCE": "ui", "BUILDKITE_BRANCH": hostile}, [], "qwen3.5-122b-a10b")
    ((call, body),) = run_annotations(tmp_path, pipeline)
    assert f"of branch {hostile}" in body
    assert call == (
        "buildkite-agent annotate --style info --context afd-e2e-qwen3-5-122b-a10b-info " + body.replace("\n", "\\n")
    )


@pytest.mark.parametrize("hostile", HOSTILE)
def test_hostile_names_in_a_block_and_a_warning(generate, hostile_profile, tmp_path, hostile):
    profile = hostile_profile(hostile)
    gpu_agent = agent(f"gpu-{hostile}", "queue=large-model", "gpus=8")
    variables = {**OPT_IN, "BUILDKITE_SOURCE": "ui", "BUILDKITE_BRANCH": hostile}

    pipeline, _ = generate(variables, [gpu_agent], profile)
    (group,) = pipeline["steps"]
    block, gpu = group["steps"]
    assert group["group"] == f"afd-e2e {hostile}"
    assert f"of branch {hostile}" in block["prompt"] and f"gpu-{hostile}" in block["prompt"]
    assert gpu["label"] == f"afd-e2e {hostile}"
    assert gpu["plugins"][0]["vllm-project/afd-e2e#v0.1.0"]["profile"] == profile

    gpu_agent_runner = FakeAgent(tmp_path / "gpu")
    assert set(gpu_agent_runner.run_plugin(gpu, REPO).values()) == {0}
    assert f"afd-e2e run --profile {profile} --out afd-e2e-out" in gpu_agent_runner.calls()
    assert not list(gpu_agent_runner.build_dir.iterdir()), "a hook ran something it should not"

    warned, _ = generate({**variables, "BUILDKITE_AGENTS_API_TOKEN": "bad"}, [], profile, status=401)
    ((call, body),) = run_annotations(tmp_path, warned)
    assert f"**afd-e2e {hostile}**" in body
    assert call.endswith(body.replace("\n", "\\n"))


def test_every_command_is_a_constant(generate, hostile_profile):
    for hostile in HOSTILE:
        for source, agents in (("ui", []), ("schedule", [agent("g", "queue=large-model", "gpus=8")])):
            variables = {**OPT_IN, "BUILDKITE_SOURCE": source, "BUILDKITE_BRANCH": hostile}
            pipeline, _ = generate(
                variables, agents, hostile_profile(hostile) if source == "ui" else "qwen3.5-122b-a10b"
            )
            for step in all_steps(pipeline):
                assert CONSTANT_COMMAND.match(step.get("command", "")) or "command" not in step, step


@pytest.mark.parametrize("hostile", ["${SOME_SECRET:-x}", "$SOME_SECRET", r"\\$SOME_SECRET"])
def test_uploaded_with_interpolation_the_same_text_would_leak(pipeline_cli, agents_api, hostile):
    """Why the flag matters: the checker above sees the expansion an upload without --no-interpolation makes."""
    environ = {**BUILD, **SECRET_ENV, "BUILDKITE_SOURCE": "ui", "BUILDKITE_BRANCH": hostile}
    code, out, _ = pipeline_cli(environ, "--profile", "qwen3.5-122b-a10b")
    assert code == 0
    uploaded, expanded = upload(out, environ, no_interpolation=False)
    assert "SOME_SECRET" in expanded
    assert SECRET in yaml.safe_dump(uploaded)
