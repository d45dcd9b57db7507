"""The smoke phase: one greedy completion of a fixed prompt, proving the served model answers at all."""

from __future__ import annotations

import time

import requests

from afd_e2e.results.model import SmokeResult
from afd_e2e.results.status import Status


def smoke_completion(base_url: str, model: str, prompt: str, max_tokens: int, timeout_s: float) -> SmokeResult:
    """POST one greedy completion within ``timeout_s`` (the profile's ``budgets.request_s``); return the results
    ``smoke`` section (status ``passed`` or ``failed``)."""
    result = SmokeResult(Status.FAILED, prompt)
    payload = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0}
    started = time.monotonic()
    try:
        response = requests.post(f"{base_url}/v1/completions", json=payload, timeout=timeout_s)
    except requests.RequestException as exc:
        result.failure = f"completion request failed: {exc}"
        return result
    result.latency_s = round(time.monotonic() - started, 3)
    if response.status_code != 200:
        result.failure = f"HTTP {response.status_code} from /v1/completions: {response.text[:300]}"
        return result
    try:
        body = response.json()
        result.completion = body["choices"][0]["text"]
        result.completion_tokens = body.get("usage", {}).get("completion_tokens")
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        result.failure = f"unexpected completion response ({exc!r}): {response.text[:300]}"
        return result
    result.status = Status.PASSED
    return result
