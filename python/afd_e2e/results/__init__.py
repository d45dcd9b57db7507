"""``results.json``, the one record of a run: ``model`` (typed records), ``status`` (the status vocabulary),
``codec`` (records <-> JSON, checked, and the JSON Schema), ``store`` (the incremental writer and the reader),
``schema.json`` (the shipped schema, generated from the model)."""

from afd_e2e.results.model import SCHEMA, RunResults
from afd_e2e.results.status import ParityVerdict, Status, Verdict
from afd_e2e.results.store import RESULTS_FILE, ResultsStore, load_results, now_iso, write_json_atomic

__all__ = [
    "RESULTS_FILE",
    "SCHEMA",
    "ParityVerdict",
    "ResultsStore",
    "RunResults",
    "Status",
    "Verdict",
    "load_results",
    "now_iso",
    "write_json_atomic",
]
