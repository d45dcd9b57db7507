"""Workloads run against a ready server (output parity's collection and rule, ``vllm bench serve``) and the
comparisons between cases. The runner calls them through its table of run functions (``runner/dispatch.py``, filled by
``afd_e2e.phases``) with a ``PhaseContext``."""
