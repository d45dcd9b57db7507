"""Running the trend for a results folder: pick the history source, fetch, compute, write ``trend/``.

The source is ``--history DIR``, ``--buildkite``, or (for ``afd-e2e report``) the environment variable
``AFD_E2E_TREND``: ``buildkite`` or a folder. Inside Buildkite the build's own variables say which pipeline,
branch and build; the API token is read from the variable named by ``--token-env`` / ``AFD_E2E_TREND_TOKEN_ENV``
(default ``BUILDKITE_API_TOKEN``, scopes ``read_builds`` and ``read_artifacts``) and is never printed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path

from afd_e2e.buildkite import env as buildkite_env
from afd_e2e.buildkite.rest import API_URL, BuildkiteRest, BuildkiteRestError
from afd_e2e.errors import UsageError
from afd_e2e.profile import TrendSpec, load_profile
from afd_e2e.results import RunResults, load_results
from afd_e2e.trend.buildkite_history import WORKERS, BuildkiteHistory
from afd_e2e.trend.compute import TrendReport, compute_trend
from afd_e2e.trend.files import TrendFiles, write_trend
from afd_e2e.trend.history import FolderHistory, HistorySource, build_ref
from afd_e2e.trend.record import BuildRef

SOURCE_ENV = "AFD_E2E_TREND"
TOKEN_ENV_ENV = "AFD_E2E_TREND_TOKEN_ENV"
DEFAULT_TOKEN_ENV = buildkite_env.API_TOKEN
CACHE_ENV = "AFD_E2E_TREND_CACHE"
BUILDKITE = "buildkite"


@dataclass(frozen=True)
class TrendOptions:
    source: str  # BUILDKITE or a folder path
    window: int | None = None
    profile: str | None = None
    token_env: str | None = None
    api_url: str = API_URL
    cache_dir: Path | None = None
    workers: int = WORKERS


def options_from_env(environ: Mapping[str, str]) -> TrendOptions | None:
    """The trend ``afd-e2e report`` runs on its own, when ``AFD_E2E_TREND`` configures one."""
    source = environ.get(SOURCE_ENV, "").strip()
    return TrendOptions(source=source) if source else None


def _env(environ: Mapping[str, str], name: str, fix: str) -> str:
    value = environ.get(name, "")
    if not value:
        raise UsageError(f"{name} is not set", fix)
    return value


def _cache_dir(options: TrendOptions, environ: Mapping[str, str]) -> Path:
    if options.cache_dir is not None:
        return options.cache_dir
    if environ.get(CACHE_ENV):
        return Path(environ[CACHE_ENV])
    return Path(environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "afd-e2e" / "trend"


def history_source(
    options: TrendOptions, results: RunResults, tonight: BuildRef, environ: Mapping[str, str]
) -> HistorySource:
    if options.source != BUILDKITE:
        return FolderHistory(Path(options.source))
    token_env = options.token_env or environ.get(TOKEN_ENV_ENV) or DEFAULT_TOKEN_ENV
    token = _env(
        environ, token_env, "give the job a Buildkite API access token with read_builds and read_artifacts scopes"
    )
    pipeline = buildkite_env.current_pipeline(environ, "run inside a Buildkite job, or use --history DIR")
    return BuildkiteHistory(
        BuildkiteRest(token, base_url=options.api_url, what="the builds API", scopes="read_builds and read_artifacts"),
        organization=pipeline.organization,
        pipeline=pipeline.pipeline,
        branch=pipeline.branch,
        profile=results.profile,
        this_build=tonight.number,
        step_key=buildkite_env.step_key(environ),
        cache_dir=_cache_dir(options, environ) / pipeline.organization / pipeline.pipeline,
        workers=options.workers,
    )


def _spec(options: TrendOptions, results: RunResults) -> TrendSpec:
    """The profile's ``trend:`` settings (defaults when the profile cannot be found here), window overridden."""
    try:
        spec = load_profile(options.profile or results.profile).trend
    except UsageError:
        if options.profile:
            raise
        spec = TrendSpec()
    if options.window is not None:
        if options.window < 3:
            raise UsageError(f"--window {options.window} is too small", "compare with at least 3 earlier runs")
        spec = replace(spec, window=options.window)
    return spec


def _tonight(results: RunResults, environ: Mapping[str, str]) -> BuildRef:
    ref = build_ref(results, BuildRef("tonight"))
    number = buildkite_env.build_number(environ)
    if ref.number is None and number is not None:
        return BuildRef(f"#{number}", number, buildkite_env.build_url(environ), ref.commit, ref.created_at)
    return ref


def run_trend(
    out_dir: Path, options: TrendOptions, environ: Mapping[str, str] = os.environ
) -> tuple[TrendReport, TrendFiles]:
    results = load_results(out_dir)
    spec = _spec(options, results)
    tonight = _tonight(results, environ)
    source = history_source(options, results, tonight, environ)
    try:
        fetched = source.fetch(spec.window)
    except BuildkiteRestError as exc:
        raise UsageError(
            f"cannot list the earlier builds: {exc}",
            "check the token's scopes and the BUILDKITE_* variables, or use --history DIR",
        ) from None
    report = compute_trend(results, tonight, fetched, spec, source.description)
    return report, write_trend(report, out_dir)
