"""History from earlier builds of this pipeline on this branch, through the Buildkite REST API.

``GET .../pipelines/{pipeline}/builds?branch=B&state[]=passed&state[]=failed&state[]=canceled`` (newest first,
this build left out), then per build, concurrently: ``.../builds/{number}/artifacts``, the finished
``results.json`` of the matching job (this step's key when known, else the one whose profile matches), downloaded
through the shared client (the storage redirect is followed without the token) and cached on the agent by build
id, so the next night asks only for new builds. Each request is bounded in time by the client, the builds asked
for by the window, and all of them together by ``BUDGET_S``. Every problem with one build is a skip with its
reason; only a problem listing the builds is an error.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import quote

from afd_e2e.buildkite.rest import BuildkiteRest, BuildkiteRestError
from afd_e2e.results import RESULTS_FILE
from afd_e2e.trend.history import Fetched, parsed
from afd_e2e.trend.record import BuildRef

FINISHED_STATES = ("passed", "failed", "canceled")
WORKERS = 8
MAX_RESULTS_BYTES = 64 * 1024 * 1024
MAX_CANDIDATE_JOBS = 4  # results.json files downloaded per build when no step key says which
MAX_ARTIFACT_PAGES = 10  # 1000 artifacts per build
BUDGET_S = 120.0  # for all builds together: the report that runs the trend has its own time limit
CANDIDATES_PER_WINDOW = 2  # builds asked for per run in the window: room for skips


class BuildkiteHistory:
    def __init__(
        self,
        rest: BuildkiteRest,
        *,
        organization: str,
        pipeline: str,
        branch: str,
        profile: str,
        this_build: int | None = None,
        step_key: str | None = None,
        cache_dir: Path | None = None,
        workers: int = WORKERS,
        budget_s: float = BUDGET_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``budget_s`` bounds all the builds' downloads together, read on ``clock`` (a test drives it)."""
        self.rest = rest
        self.organization = organization
        self.pipeline = pipeline
        self.branch = branch
        self.profile = profile
        self.this_build = this_build
        self.step_key = step_key or None
        self.cache_dir = cache_dir
        self.workers = max(1, workers)
        self.budget_s = budget_s
        self.clock = clock
        self._deadline = 0.0
        self.description = f"builds of {organization}/{pipeline} on {branch}"

    def _pipeline_path(self) -> str:
        return f"organizations/{quote(self.organization, safe='')}/pipelines/{quote(self.pipeline, safe='')}"

    def list_builds(self, count: int) -> list[dict[str, Any]]:
        """The newest ``count`` finished builds on the branch, this build left out (BuildkiteRestError if not)."""
        per_page = min(100, count + 1)
        states = "".join(f"&state[]={state}" for state in FINISHED_STATES)
        path = f"{self._pipeline_path()}/builds?branch={quote(self.branch, safe='')}{states}&per_page={per_page}"
        builds: list[dict[str, Any]] = []
        for page in self.rest.pages(path, noun="builds", max_pages=count // per_page + 2):
            builds += [b for b in page if b.get("number") != self.this_build]
            if len(builds) >= count:
                break
        return builds[:count]

    def fetch(self, limit: int) -> list[Fetched]:
        self._deadline = self.clock() + self.budget_s
        builds = self.list_builds(limit * CANDIDATES_PER_WINDOW)
        if self.workers == 1:
            return [self._fetch_build(build) for build in builds]
        with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="trend-fetch") as pool:
            return list(pool.map(self._fetch_build, builds))

    def _fetch_build(self, build: Mapping[str, Any]) -> Fetched:
        ref = BuildRef(
            label=f"#{build.get('number')}",
            number=build.get("number") if isinstance(build.get("number"), int) else None,
            url=build.get("web_url") or None,
            commit=build.get("commit") or None,
            created_at=build.get("created_at") or None,
        )
        if build.get("state") == "canceled":
            return Fetched(ref, None, "the build was canceled", "cancelled")
        source = f"build #{build.get('number')} {RESULTS_FILE}"
        cached = self._cached(build)
        if cached is not None:
            return parsed(ref, cached, source)
        if self.clock() > self._deadline:
            return Fetched(ref, None, f"not fetched: the trend's {self.budget_s:g} s budget ran out", "not fetched")
        try:
            results = self._download_results(build)
        except BuildkiteRestError as exc:
            return Fetched(ref, None, f"{RESULTS_FILE} could not be fetched: {exc}")
        if isinstance(results, str):
            return Fetched(ref, None, results)
        self._store(build, results)
        return parsed(ref, results, source)

    def _download_results(self, build: Mapping[str, Any]) -> dict[str, Any] | str:
        """The matching job's results document, or why there is none."""
        artifacts = [
            artifact
            for page in self.rest.pages(
                f"{self._pipeline_path()}/builds/{build.get('number')}/artifacts?per_page=100",
                noun="artifacts",
                max_pages=MAX_ARTIFACT_PAGES,
            )
            for artifact in page
            if artifact.get("filename") == RESULTS_FILE or str(artifact.get("path", "")).endswith(f"/{RESULTS_FILE}")
        ]
        usable = [a for a in artifacts if a.get("state") == "finished"]
        if not usable:
            states = sorted({str(a.get("state")) for a in artifacts})
            return f"no {RESULTS_FILE} artifact" + (f" (only {', '.join(states)})" if states else "")
        if self.step_key:
            jobs = {job.get("id") for job in build.get("jobs") or [] if job.get("step_key") == self.step_key}
            usable = [a for a in usable if a.get("job_id") in jobs]
            if not usable:
                return f"no {RESULTS_FILE} from a job of step {self.step_key}"
        other_profiles = []
        for artifact in usable[:MAX_CANDIDATE_JOBS]:
            body = self.rest.download(
                str(artifact.get("download_url")), max_bytes=MAX_RESULTS_BYTES, sha1=artifact.get("sha1sum")
            )
            try:
                results = json.loads(body)
            except ValueError:
                return f"{RESULTS_FILE} is not JSON"
            if not isinstance(results, dict):
                return f"{RESULTS_FILE} is not a JSON object"
            if results.get("profile") == self.profile or self.step_key:
                return results
            other_profiles.append(str(results.get("profile")))
        return f"no {RESULTS_FILE} of profile {self.profile} (found {', '.join(other_profiles)})"

    def _cache_path(self, build: Mapping[str, Any]) -> Path | None:
        build_id = re.sub(r"[^A-Za-z0-9._-]", "_", str(build.get("id") or ""))
        if self.cache_dir is None or not build_id:
            return None
        return self.cache_dir / f"{build_id}-{re.sub(r'[^A-Za-z0-9._-]', '_', self.profile)}.json"

    def _cached(self, build: Mapping[str, Any]) -> dict[str, Any] | None:
        path = self._cache_path(build)
        if path is None or not path.is_file():
            return None
        try:
            cached = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return cached if isinstance(cached, dict) else None

    def _store(self, build: Mapping[str, Any], results: dict[str, Any]) -> None:
        """Cache a finished build's results; a cache that cannot be written only costs a download next time."""
        path = self._cache_path(build)
        if path is None:
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_suffix(".tmp")
            temporary.write_text(json.dumps(results), encoding="utf-8")
            temporary.replace(path)
        except OSError:
            pass
