"""plugin.yml: a valid plugin definition whose options are exactly those the hooks read, and which every README
example and every generated GPU step satisfies."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import jsonschema
import pytest
import yaml
from bk_support import REPO

from afd_e2e import __version__
from afd_e2e.cli import build_parser
from afd_e2e.pipeline.decide import BLOCK, RUN, Decision, ProfileDecision
from afd_e2e.pipeline.generate import OUT_DIR, GpuStepSettings, build_pipeline
from afd_e2e.profile import load_profile

PLUGIN = yaml.safe_load((REPO / "plugin.yml").read_text(encoding="utf-8"))
CONFIGURATION = PLUGIN["configuration"]
PLUGIN_REFERENCE = re.compile(r"^[\w.-]+/afd-e2e#v\d+\.\d+\.\d+$")
SHELL = [REPO / "plugin" / "lib.sh", *sorted((REPO / "hooks").iterdir())]


def shell_code() -> str:
    """The plugin's bash without its comments."""
    lines = (line for path in SHELL for line in path.read_text(encoding="utf-8").splitlines())
    return "\n".join(line for line in lines if not line.lstrip().startswith("#"))


def readme_examples() -> list[dict]:
    """The README's yaml blocks that use the plugin or the generator."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```yaml\n(.*?)^```", text, flags=re.DOTALL | re.MULTILINE)
    return [yaml.safe_load(b) for b in blocks if "afd-e2e#v" in b or "afd-e2e pipeline" in b]


def plugin_uses(pipeline: dict) -> list[tuple[str, dict]]:
    steps = [s for step in pipeline["steps"] for s in step.get("steps", [step])]
    return [item for step in steps for plugin in step.get("plugins", []) for item in plugin.items()]


def test_plugin_definition():
    assert PLUGIN["name"] == "afd-e2e"
    assert PLUGIN["description"].strip()
    assert PLUGIN["author"].startswith("https://")
    assert {"afd-e2e", "timeout"} <= set(PLUGIN["requirements"])
    jsonschema.Draft7Validator.check_schema(CONFIGURATION)
    assert CONFIGURATION["additionalProperties"] is False
    assert CONFIGURATION["required"] == ["profile"]


def test_the_hooks_know_exactly_the_configured_options():
    lib = (REPO / "plugin" / "lib.sh").read_text(encoding="utf-8")
    listed = re.search(r"^AFD_E2E_OPTIONS=\((.*?)\)", lib, flags=re.DOTALL | re.MULTILINE).group(1).split()
    assert sorted(listed) == sorted(name.upper().replace("-", "_") for name in CONFIGURATION["properties"])
    assert set(re.findall(r"plugin_(?:option|list) ([A-Z0-9_]+)", shell_code())) == set(listed)


def test_the_hooks_defaults_are_the_documented_ones():
    defaults = dict(re.findall(r"plugin_option ([A-Z_]+) ([\w-]+)", shell_code()))
    documented = {
        name.upper().replace("-", "_"): str(spec["default"]).lower()
        if isinstance(spec["default"], bool)
        else str(spec["default"])
        for name, spec in CONFIGURATION["properties"].items()
        if "default" in spec
    }
    assert defaults == documented
    assert documented["OUT_DIR"] == OUT_DIR


def test_the_readme_has_examples():
    examples = readme_examples()
    assert len(examples) >= 2, "README.md must show the bootstrap step and a plugin example (```yaml blocks)"
    assert any(plugin_uses(example) for example in examples)


@pytest.mark.parametrize("example", readme_examples())
def test_every_readme_example_validates(valid_pipeline, example):
    valid_pipeline(example)
    for reference, config in plugin_uses(example):
        assert PLUGIN_REFERENCE.match(reference), reference
        assert reference.endswith(f"#v{__version__}"), f"{reference} is not this release"
        jsonschema.validate(config, CONFIGURATION)


@pytest.mark.parametrize("example", readme_examples())
def test_every_readme_generator_command_parses(example):
    commands = [c for step in example["steps"] for c in step.get("commands", []) if c.startswith("afd-e2e pipeline")]
    for command in commands:
        argv = shlex.split(command.split("|")[0])[1:]
        assert build_parser().parse_args(argv).command == "pipeline"


@pytest.mark.parametrize("action", [RUN, BLOCK])
def test_generated_gpu_steps_satisfy_the_plugin_schema(action):
    profile = load_profile("qwen3.5-122b-a10b")
    pipeline = build_pipeline(
        [ProfileDecision("qwen3.5-122b-a10b", profile, Decision(action, "build", ("why",)))], GpuStepSettings()
    ).to_dict()
    ((reference, config),) = plugin_uses(pipeline)
    assert PLUGIN_REFERENCE.match(reference)
    jsonschema.validate(config, CONFIGURATION)


def test_this_repository_pipeline_validates(valid_pipeline):
    valid_pipeline(yaml.safe_load(Path(REPO / ".buildkite" / "pipeline.yml").read_text(encoding="utf-8")))
