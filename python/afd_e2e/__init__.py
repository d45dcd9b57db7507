"""afd-e2e: opt-in large-model end-to-end tests of vLLM AFD against a native baseline."""

__version__ = "0.1.0"
