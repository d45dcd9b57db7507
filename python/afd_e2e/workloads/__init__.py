"""Workloads run against a ready server (GSM8K and output parity, ``vllm bench serve``) and the comparisons between
cases. The runner calls them through its table of run functions (``runner/dispatch.py``, filled by
``afd_e2e.phases``) with a ``PhaseContext``."""
