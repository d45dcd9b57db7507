"""Faults injected into a real vLLM engine's step, for afd-e2e's stall tests (a ``vllm.general_plugins`` entry).

vLLM loads general plugins in every process, the EngineCore included, before the EngineCore binds its step
function. Asked by the environment, ``register`` wraps ``EngineCore.step`` (and ``step_with_batch_queue``):

- ``AFD_E2E_FAULT_HANG_AFTER_STEPS=N``: steps 1..N run, step N+1 blocks for good inside
  ``afd_e2e_injected_hang`` (a real hang in a real engine, with that frame on its stack; SIGTERM still ends it);
- ``AFD_E2E_FAULT_SLOW_STEP_S=S``: every step first sleeps S seconds inside ``afd_e2e_injected_slow_step``.

Without either variable it changes nothing.
"""

from __future__ import annotations

import functools
import os
import time

HANG_AFTER_STEPS = "AFD_E2E_FAULT_HANG_AFTER_STEPS"
SLOW_STEP_S = "AFD_E2E_FAULT_SLOW_STEP_S"
STEP_METHODS = ("step", "step_with_batch_queue")


def afd_e2e_injected_hang() -> None:
    """Never returns: the frame a stack dump of the hung EngineCore shows."""
    while True:
        time.sleep(0.5)


def afd_e2e_injected_slow_step(seconds: float) -> None:
    time.sleep(seconds)


def _faulty(step, hang_after: int | None, slow_s: float):
    steps = {"done": 0}

    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        if hang_after is not None and steps["done"] >= hang_after:
            afd_e2e_injected_hang()
        if slow_s > 0:
            afd_e2e_injected_slow_step(slow_s)
        steps["done"] += 1
        return step(self, *args, **kwargs)

    wrapper.afd_e2e_fault = True
    return wrapper


def register() -> None:
    hang = os.environ.get(HANG_AFTER_STEPS, "").strip()
    slow = os.environ.get(SLOW_STEP_S, "").strip()
    if not hang and not slow:
        return
    from vllm.v1.engine.core import EngineCore

    for name in STEP_METHODS:
        step = getattr(EngineCore, name, None)
        if step is not None and not getattr(step, "afd_e2e_fault", False):
            setattr(EngineCore, name, _faulty(step, int(hang) if hang else None, float(slow or 0)))
