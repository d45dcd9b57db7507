"""Optional upload of the JUnit files to Buildkite Test Engine.

The suite token comes from an environment variable whose NAME the user configures; it is sent only in the
Authorization header and scrubbed from every message. The whole upload has a time budget (each request gets what
is left of it as its connect and read timeout), and any failure is a warning: a report never fails a job over it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import requests

from afd_e2e.buildkite.env import test_engine_run_env

TEST_ENGINE_URL = "https://analytics-api.buildkite.com/v1/uploads"
BUDGET_S = 30.0


def run_env_fields(env: Mapping[str, str]) -> dict[str, str]:
    fields = {"format": "junit", "run_env[CI]": "buildkite"}
    fields.update(test_engine_run_env(env))
    return fields


def upload_junit(
    files: Sequence[Path],
    *,
    token: str,
    env: Mapping[str, str],
    url: str = TEST_ENGINE_URL,
    budget_s: float = BUDGET_S,
    clock: Callable[[], float] = time.monotonic,
) -> list[str]:
    """POST each JUnit file; return warnings (none when every upload was accepted).

    The budget is read on ``clock`` (a test's FakeClock: what is left, and when it has run out, is then the test's
    to say, not a loaded machine's); each request's timeout is what is left of it, in real seconds."""
    deadline = clock() + budget_s
    fields = run_env_fields(env)
    warnings: list[str] = []
    for path in files:
        left = deadline - clock()
        if left <= 0:
            warnings.append(f"Test Engine upload stopped after its {budget_s:.0f} s budget: {path.name} not sent")
            break
        try:
            with path.open("rb") as handle:
                response = requests.post(
                    url,
                    headers={"Authorization": f'Token token="{token}"'},
                    data=fields,
                    files={"data": (path.name, handle, "application/xml")},
                    timeout=(min(left, 10.0), left),
                )
        except requests.RequestException as exc:
            warnings.append(f"Test Engine upload of {path.name} failed: {type(exc).__name__}: {exc}")
            continue
        if response.ok:
            print(f"Test Engine: uploaded {path.name} (HTTP {response.status_code})", flush=True)
        else:
            warnings.append(
                f"Test Engine upload of {path.name} answered HTTP {response.status_code}: {response.text[:200]}"
            )
    return [warning.replace(token, "[token]") for warning in warnings] if token else warnings
