"""The one HTTP client the workloads use: greedy ``/v1/completions`` and the served model's card on ``/v1/models``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import requests


class CompletionError(Exception):
    """A request that did not produce a completion; the message is one line for results.json."""


@dataclass(frozen=True)
class Completion:
    text: str
    token_ids: tuple[int, ...] | None
    finish_reason: str | None


def _request_json(method: str, url: str, timeout_s: float, **kwargs: Any) -> dict[str, Any]:
    try:
        response = requests.request(method, url, timeout=timeout_s, **kwargs)
    except requests.RequestException as exc:
        raise CompletionError(f"{method} {url}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}") from exc
    if response.status_code != 200:
        body = " ".join(response.text.split())[:300]
        raise CompletionError(f"{method} {url}: HTTP {response.status_code}: {body}")
    try:
        return response.json()
    except ValueError as exc:
        raise CompletionError(f"{method} {url}: answer is not JSON") from exc


def complete(
    base_url: str,
    model: str,
    prompt: str,
    *,
    max_tokens: int,
    stop: list[str] | None = None,
    seed: int | None = None,
    return_token_ids: bool = False,
    timeout_s: float,
) -> Completion:
    """One greedy completion (temperature 0), given up after ``timeout_s`` (the profile's ``budgets.request_s``)."""
    payload: dict[str, Any] = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0}
    if stop:
        payload["stop"] = stop
    if seed is not None:
        payload["seed"] = seed
    if return_token_ids:
        payload["return_token_ids"] = True
    body = _request_json("POST", f"{base_url}/v1/completions", timeout_s, json=payload)
    try:
        choice = body["choices"][0]
        text = choice["text"]
    except (KeyError, IndexError, TypeError) as exc:
        raise CompletionError(f"POST {base_url}/v1/completions: no choices[0].text in the answer") from exc
    token_ids = choice.get("token_ids")
    if return_token_ids and not isinstance(token_ids, list):
        raise CompletionError(
            f"POST {base_url}/v1/completions: no token_ids despite return_token_ids (vLLM older than 0.10.2?)"
        )
    return Completion(text, tuple(token_ids) if token_ids is not None else None, choice.get("finish_reason"))


def served_model_root(base_url: str, model: str, *, timeout_s: float) -> str:
    """The checkpoint path the server loaded (``root`` of the model card): the tokenizer benchmarks must use."""
    body = _request_json("GET", f"{base_url}/v1/models", timeout_s)
    for card in body.get("data") or []:
        if card.get("id") == model and card.get("root"):
            return str(card["root"])
    raise CompletionError(f"GET {base_url}/v1/models: no model {model!r} with a root path")
