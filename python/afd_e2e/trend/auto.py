"""The trend ``afd-e2e report`` runs by itself when ``AFD_E2E_TREND`` configures a history source.

Inside the report it never fails anything: a missing token, an unreachable API or a bad folder is a warning, and
the report is rendered without the section (an earlier ``trend/`` is removed so a stale one is never shown). A run
that did not finish (cancelled, interrupted) gets no trend: its numbers say nothing, and a cancelled job's report
has only the seconds of the cancel grace period.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

from afd_e2e.buildkite.rest import BuildkiteRestError
from afd_e2e.errors import UsageError
from afd_e2e.report.trend_attach import TREND_DIR
from afd_e2e.results import load_results
from afd_e2e.trend.trend_run import SOURCE_ENV, options_from_env, run_trend


def trend_if_configured(out_dir: Path, environ: Mapping[str, str]) -> list[str]:
    """Run the configured trend; the warnings (empty when none is configured or it ran)."""
    options = options_from_env(environ)
    if options is None:
        return []
    try:
        status = load_results(out_dir).status
        if status.unfinished:
            shutil.rmtree(out_dir / TREND_DIR, ignore_errors=True)
            return [f"trend skipped: the run did not finish (status {status})"]
        run_trend(out_dir, options, environ)
    except (UsageError, BuildkiteRestError) as exc:
        shutil.rmtree(out_dir / TREND_DIR, ignore_errors=True)
        return [f"trend ({SOURCE_ENV}={options.source}) skipped: {exc}"]
    return []
