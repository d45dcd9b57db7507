"""The JSON Schema of results.json, generated from the model and shipped beside it as ``schema.json``.

Tools that read results.json without afd_e2e (the nightly trend, a dashboard) validate against the shipped file;
a unit test keeps it equal to what the model generates, so a field added to the model is a schema change on review.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from afd_e2e.results.codec import json_schema
from afd_e2e.results.model import SCHEMA, RunResults

SCHEMA_FILE = Path(__file__).with_name("schema.json")


def document_schema(record: type, schema_id: str, title: str) -> dict[str, Any]:
    """The JSON schema of a written document whose ``schema`` field names its version (results.json, bisect.json)."""
    schema = json_schema(record, schema_id=schema_id, title=title)
    schema["properties"]["schema"] = {"const": schema_id}
    return schema


def schema_json(schema: dict[str, Any]) -> str:
    """A schema as its checked-in file holds it."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def results_schema() -> dict[str, Any]:
    return document_schema(RunResults, SCHEMA, "afd-e2e results.json")


def schema_text() -> str:
    return schema_json(results_schema())


if __name__ == "__main__":  # python -m afd_e2e.results.schema > python/afd_e2e/results/schema.json
    print(schema_text(), end="")
