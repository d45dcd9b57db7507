"""Stand-ins for the bisect's two edges (install a commit, run the case), over a real tiny-cpu run's results.

A stand-in run is the real ``tests/fixtures/results/tiny-cpu`` results.json with the probed case's TPOT values
replaced by the ones a test plants per commit, and its parity outputs' tokens changed where a test plants a
correctness break: what a real run at that commit would record, without launching anything.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable, Mapping
from functools import cache
from pathlib import Path

from afd_e2e.bisect.install import Installed, NotInstalled
from afd_e2e.results.model import RunResults
from afd_e2e.results.performance_records import SECTION as PERFORMANCE
from afd_e2e.results.store import results_from_json
from results_docs import load_fixture

CASE = "cpu-tp1"
BASE_TPOT = [10.0, 10.05, 9.95, 10.02]


@cache
def _template() -> RunResults:
    return results_from_json(load_fixture("tiny-cpu"))


class StandIns:
    """Installs and runs by commit index: ``tpot(index, run)`` the values a run measures, ``broken(index)`` its
    parity outputs changed, ``uninstallable`` the indexes pip refuses; every call is counted. ``on_disk=False``
    (seeded simulations of many TPOT searches): the run's records are built in memory and no results.json is written,
    so nothing is cached between runs either; ``broken`` needs the files (parity outputs are read from them)."""

    def __init__(
        self,
        shas: list[str],
        *,
        tpot: Callable[[int, int], list[float]],
        broken: Callable[[int], bool] = lambda _i: False,
        uninstallable: tuple[int, ...] = (),
        cancel_at: tuple[int, Callable[[], None]] | None = None,
        on_disk: bool = True,
    ) -> None:
        self.shas, self.tpot, self.broken, self.uninstallable = shas, tpot, broken, uninstallable
        self.cancel_at, self.on_disk = cancel_at, on_disk
        self.installs: list[int] = []
        self.launches: list[int] = []
        self.envs: list[Mapping[str, str]] = []
        self._runs: dict[int, int] = {}

    def install(self, sha: str, cache: Path) -> Installed | NotInstalled:
        index = self.shas.index(sha)
        self.installs.append(index)
        if index in self.uninstallable:
            return NotInstalled("pip install failed (exit 1): error: package directory 'moved' does not exist", 0.5)
        return Installed(cache / "packages" / sha, "plugin", f"0.1.{index}", sha, 0.5, cached=False)

    def launch(self, sha: str, env: Mapping[str, str], folder: Path) -> RunResults:
        index = self.shas.index(sha)
        self.launches.append(index)
        self.envs.append(env)
        run = self._runs[index] = self._runs.get(index, 0) + 1
        if not self.on_disk:  # the template's records shared, the case's performance section new
            template = _template()
            case = template.cases[CASE]
            assert case.section(PERFORMANCE) is not None
            first = case.section(PERFORMANCE).repetitions[0]
            repetitions = [
                dataclasses.replace(first, index=n, metrics={**first.metrics, "mean_tpot_ms": value})
                for n, value in enumerate(self.tpot(index, run), 1)
            ]
            performance = dataclasses.replace(case.section(PERFORMANCE), repetitions=repetitions)
            measured = dataclasses.replace(case, extra=dict(case.extra))  # the sections beside the fields: its own
            measured.set_section(PERFORMANCE, performance)
            cases = {**template.cases, CASE: measured}
            return dataclasses.replace(template, cases=cases)
        data = copy.deepcopy(load_fixture("tiny-cpu"))
        case = data["cases"][CASE]
        template = case["performance"]["repetitions"][0]
        case["performance"]["repetitions"] = [
            {**copy.deepcopy(template), "index": n, "metrics": {**template["metrics"], "mean_tpot_ms": value}}
            for n, value in enumerate(self.tpot(index, run), 1)
        ]
        if self.broken(index):
            for output in case["parity_outputs"]:
                output["token_ids"] = [0 for _ in output["token_ids"]]  # one token, certain, in no top-k before
                output["top_logprobs"] = [{"0": 0.0} for _ in output["top_logprobs"]]
        if self.cancel_at is not None and self.cancel_at[0] == index:
            self.cancel_at[1]()
            data["status"] = "cancelled"
        folder.mkdir(parents=True)
        (folder / "results.json").write_text(json.dumps(data), encoding="utf-8")
        return results_from_json(data)


def slowed_from(first_bad: int, factor: float = 1.5) -> Callable[[int, int], list[float]]:
    return lambda index, _run: [v * (factor if index >= first_bad else 1.0) for v in BASE_TPOT]
