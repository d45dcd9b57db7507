"""The one HTTP client the workloads use: greedy ``/v1/completions``, the served model's card on ``/v1/models``, and control
requests (a torch profile's start and stop)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import requests


class CompletionError(Exception):
    """A request that did not produce a completion; the message is one line for results.json."""


TOKEN_ID_PREFIX = "token_id:"  # how vLLM names tokens under ``return_tokens_as_token_ids``


@dataclass(frozen=True)
class Completion:
    text: str
    token_ids: tuple[int, ...] | None
    finish_reason: str | None
    # With ``top_logprobs=k``: per generated token, the k most likely token ids (and the chosen one) -> logprob.
    top_logprobs: tuple[Mapping[int, float], ...] | None = None


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
    top_logprobs: int | None = None,
    timeout_s: float,
) -> Completion:
    """One greedy completion (temperature 0), given up after ``timeout_s`` (the profile's ``budgets.request_s``);
    ``top_logprobs=k`` also asks for each token's k most likely alternatives, named by token id so two cases
    compare ids, not decoded strings."""
    payload: dict[str, Any] = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0}
    if stop:
        payload["stop"] = stop
    if seed is not None:
        payload["seed"] = seed
    if return_token_ids:
        payload["return_token_ids"] = True
    if top_logprobs is not None:
        payload.update(logprobs=top_logprobs, return_tokens_as_token_ids=True)
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
    completion = Completion(text, tuple(token_ids) if token_ids is not None else None, choice.get("finish_reason"))
    if top_logprobs is None:
        return completion
    try:
        return _with_logprobs(completion, choice["logprobs"])
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise CompletionError(
            f"POST {base_url}/v1/completions: no usable logprobs in the answer ({type(exc).__name__}: {exc})"
        ) from exc


def _token_id(name: str) -> int:
    if not name.startswith(TOKEN_ID_PREFIX):
        raise ValueError(f"token {name!r} is not named {TOKEN_ID_PREFIX}<id>")
    return int(name[len(TOKEN_ID_PREFIX) :])


def _with_logprobs(completion: Completion, logprobs: dict[str, Any]) -> Completion:
    """Read the OpenAI completions ``logprobs`` block's ``top_logprobs``, one mapping per generated token."""
    top = tuple({_token_id(name): float(value) for name, value in entry.items()} for entry in logprobs["top_logprobs"])
    return Completion(completion.text, completion.token_ids, completion.finish_reason, top)


def token_texts(base_url: str, model: str, token_ids: list[int], *, timeout_s: float) -> list[str]:
    """Each token's own text, from the server's tokenizer (``/detokenize``), for showing where outputs part.
    (Under ``return_tokens_as_token_ids`` the logprobs' ``text_offset`` counts the ``token_id:N`` names instead.)"""
    texts = []
    for token in token_ids:
        body = _request_json("POST", f"{base_url}/detokenize", timeout_s, json={"model": model, "tokens": [token]})
        if not isinstance(body.get("prompt"), str):
            raise CompletionError(f"POST {base_url}/detokenize: no prompt text in the answer")
        texts.append(body["prompt"])
    return texts


def served_model_root(base_url: str, model: str, *, timeout_s: float) -> str:
    """The checkpoint path the server loaded (``root`` of the model card): the tokenizer benchmarks must use."""
    body = _request_json("GET", f"{base_url}/v1/models", timeout_s)
    for card in body.get("data") or []:
        if card.get("id") == model and card.get("root"):
            return str(card["root"])
    raise CompletionError(f"GET {base_url}/v1/models: no model {model!r} with a root path")


def post(url: str, *, timeout_s: float) -> None:
    """A control request whose answer carries nothing but its status (vLLM's ``/start_profile``, ``/stop_profile``)."""
    try:
        response = requests.post(url, timeout=timeout_s)
    except requests.RequestException as exc:
        raise CompletionError(f"POST {url}: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}") from exc
    if response.status_code != 200:
        raise CompletionError(f"POST {url}: HTTP {response.status_code}: {' '.join(response.text.split())[:300]}")
