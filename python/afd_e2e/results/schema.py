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


def results_schema() -> dict[str, Any]:
    schema = json_schema(RunResults, schema_id=SCHEMA, title="afd-e2e results.json")
    schema["properties"]["schema"] = {"const": SCHEMA}
    return schema


def schema_text() -> str:
    return json.dumps(results_schema(), indent=2, ensure_ascii=False) + "\n"


if __name__ == "__main__":  # python -m afd_e2e.results.schema > python/afd_e2e/results/schema.json
    print(schema_text(), end="")
