"""A runner process for cleanup tests: ``execute_run`` of one stand-in case that never becomes ready."""

from __future__ import annotations

import sys
from pathlib import Path

from stand_ins import SLEEPER, stand_in_case, stand_in_plan

from afd_e2e.phases import rendering
from afd_e2e.profile import load_profile
from afd_e2e.results.store import results_to_json
from afd_e2e.runner.run import execute_run

rendering.install_renderers()  # the built-in phases and their renderers: this script runs cases as `afd-e2e run` does

if __name__ == "__main__":
    out, port = Path(sys.argv[1]), int(sys.argv[2])
    data = results_to_json(
        execute_run(load_profile("tiny-cpu"), stand_in_plan(stand_in_case("c", SLEEPER, port=port)), out)
    )
    sys.exit(0 if data["status"] == "passed" else 1)
