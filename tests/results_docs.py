"""Results documents for tests: a fixture as JSON to shape, and the typed record the product reads from it."""

from __future__ import annotations

import copy
import json

from afd_e2e.results import RunResults
from afd_e2e.results.store import results_from_json
from repo_paths import FIXTURES

RESULTS_FIXTURES = FIXTURES / "results"


def load_fixture(name: str) -> dict:
    return json.loads((RESULTS_FIXTURES / name / "results.json").read_text(encoding="utf-8"))


def typed(results: dict) -> RunResults:
    """A results document (as a test shaped it) read the way ``afd-e2e report`` reads one: checked, typed."""
    return results_from_json(copy.deepcopy(results))
