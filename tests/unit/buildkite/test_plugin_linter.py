"""Unit tier: plugin.yml passes the rules of Buildkite's plugin-linter (buildkite-plugins/buildkite-plugin-linter),
checked here without its Node image: the top-level keys it requires (name, description, author, requirements,
configuration, each of its type), a configuration that is a JSON schema with `properties`, `required` and
`additionalProperties` (false here, so a misspelt option fails the step), and every option the plugin documents
(the options table, README.md or docs/) present in the schema and the other way round. Each rule is shown failing
on a plugin.yml that breaks it."""

from __future__ import annotations

import copy
import re

import jsonschema
import pytest
import yaml
from bk_support import REPO

PLUGIN = yaml.safe_load((REPO / "plugin.yml").read_text(encoding="utf-8"))

# The linter's rules for plugin.yml (its lib/plugin-yaml-schema.yml), restated as a JSON schema.
LINTER_RULES = {
    "type": "object",
    "required": ["name", "description", "author", "requirements", "configuration"],
    "properties": {
        "name": {"type": "string"},
        "description": {"type": "string"},
        "author": {"type": "string"},
        "requirements": {"type": "array"},
        "configuration": {
            "type": "object",
            "required": ["properties", "required", "additionalProperties"],
            "properties": {
                "properties": {"type": "object"},
                "required": {"type": "array"},
                "additionalProperties": {"type": "boolean"},
            },
        },
    },
}


def lint(plugin: dict) -> list[str]:
    """Every rule plugin.yml breaks, one line each (empty: it passes)."""
    problems = [f"{'/'.join(map(str, e.path)) or 'plugin.yml'}: {e.message}" for e in _validator().iter_errors(plugin)]
    configuration = plugin.get("configuration")
    if isinstance(configuration, dict):
        try:
            jsonschema.Draft7Validator.check_schema(configuration)  # the linter compiles it (ajv)
        except jsonschema.SchemaError as exc:
            problems.append(f"configuration is not a JSON schema: {exc.message}")
        if configuration.get("additionalProperties") is not False:
            problems.append("configuration: additionalProperties must be false, so a misspelt option fails")
        missing = set(configuration.get("required", [])) - set(configuration.get("properties", {}))
        problems += [f"configuration: required option {name} has no property" for name in sorted(missing)]
    return problems


def _validator() -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(LINTER_RULES)


def documented_options() -> set[str]:
    """The option names of the plugin's options table (`| option | meaning |`), wherever the docs keep it."""
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    tables = [
        table
        for page in pages
        if page.exists()
        for table in re.findall(r"^\| option \| meaning \|\n\|[- |]+\|\n((?:\|.*\n)+)", page.read_text(), re.MULTILINE)
    ]
    assert len(tables) == 1, "the plugin's options are documented in exactly one `| option | meaning |` table"
    cells = [row.split("|")[1] for row in tables[0].splitlines()]
    return {name for cell in cells for name in re.findall(r"`([a-z0-9-]+)`", cell)}


def test_plugin_yml_passes_the_plugin_linters_rules():
    assert lint(PLUGIN) == []
    assert PLUGIN["author"].startswith("https://")


def test_every_documented_option_is_in_the_schema_and_every_schema_option_is_documented():
    assert documented_options() == set(PLUGIN["configuration"]["properties"])


@pytest.mark.parametrize(
    ("breakage", "problem"),
    [
        (lambda p: p.pop("author"), "plugin.yml: 'author' is a required property"),
        (lambda p: p.update(requirements="afd-e2e"), "requirements: 'afd-e2e' is not of type 'array'"),
        (lambda p: p["configuration"].pop("required"), "configuration: 'required' is a required property"),
        (
            lambda p: p["configuration"].update(additionalProperties=True),
            "configuration: additionalProperties must be false, so a misspelt option fails",
        ),
        (
            lambda p: p["configuration"]["properties"]["port-base"].update(type="int"),
            "configuration is not a JSON schema: 'int' is not valid under any of the given schemas",
        ),
        (
            lambda p: p["configuration"]["properties"].pop("profile"),
            "configuration: required option profile has no property",
        ),
    ],
)
def test_each_rule_fails_a_plugin_yml_that_breaks_it(breakage, problem):
    broken = copy.deepcopy(PLUGIN)
    breakage(broken)
    assert problem in lint(broken)
