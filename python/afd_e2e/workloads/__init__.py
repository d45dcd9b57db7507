"""Workloads run against a ready server (correctness: GSM8K and output parity; performance: ``vllm bench serve``)
and the comparisons between cases. The runner calls ``afd_e2e.workloads.phases`` with a ``PhaseContext``."""
