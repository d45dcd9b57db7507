"""Faults injected into a real vLLM engine's step, for afd-e2e's stall tests (a ``vllm.general_plugins`` entry).

vLLM loads general plugins in every process, the EngineCore included, before the EngineCore binds its step
function. Asked by the environment, ``register`` wraps ``EngineCore.step`` (and ``step_with_batch_queue``):

- ``AFD_E2E_FAULT_HANG_AFTER_STEPS=N``: steps 1..N run, step N+1 blocks inside ``afd_e2e_injected_hang`` (a real
  hang in a real engine, with that frame on its stack; SIGTERM still ends it) until the test releases it: with
  ``AFD_E2E_FAULT_RELEASE_FILE=PATH`` the hang ends once PATH exists (the test's event: it creates the file when it
  has seen what it waits for) and every later step runs; without it the hang lasts for good. The engine is held
  by the test, never for a number of seconds, so a slow machine only makes the test's wait longer;
- ``AFD_E2E_FAULT_SLOW_STEP_S=S``: every step first sleeps S seconds inside ``afd_e2e_injected_slow_step`` (a slow
  engine: the fault is the step's length itself, which TPOT then shows);
- ``AFD_E2E_FAULT_SLOW_GROWTH=G``: every step first sleeps G seconds per second since the engine's first step (with
  ``AFD_E2E_FAULT_SLOW_AFTER_S=D``: per second since D seconds after it, nothing before), inside
  ``afd_e2e_injected_slow_step`` (an engine slowing over time: its steps grow steadily longer, which a soak's drift
  verdict shows as TPOT and TTFT rising from its first third to its last; a soak whose first third is D seconds
  compares the engine's own step against the slowed one, however slow a busy machine makes that step);
- ``AFD_E2E_FAULT_LEAK_MIB_PER_STEP=M``: every step keeps M MiB more, written so the pages are resident, inside
  ``afd_e2e_injected_leak`` (a leak: the EngineCore's RSS grows with every step, which a soak's leak verdict shows).

Without any of these variables it changes nothing.
"""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path

HANG_AFTER_STEPS = "AFD_E2E_FAULT_HANG_AFTER_STEPS"
RELEASE_FILE = "AFD_E2E_FAULT_RELEASE_FILE"
SLOW_STEP_S = "AFD_E2E_FAULT_SLOW_STEP_S"
SLOW_GROWTH = "AFD_E2E_FAULT_SLOW_GROWTH"
SLOW_AFTER_S = "AFD_E2E_FAULT_SLOW_AFTER_S"
LEAK_MIB_PER_STEP = "AFD_E2E_FAULT_LEAK_MIB_PER_STEP"
MIB = 1 << 20
STEP_METHODS = ("step", "step_with_batch_queue")
RELEASE_POLL_S = 0.5  # as idle as a real hang: the watchdog names the EngineCore by its CPU time (none)


def afd_e2e_injected_hang(release: Path | None) -> None:
    """Returns only once ``release`` exists (never without one): the frame a stack dump of the held EngineCore
    shows."""
    while release is None or not release.exists():
        time.sleep(RELEASE_POLL_S)


def afd_e2e_injected_slow_step(seconds: float) -> None:
    time.sleep(seconds)


def afd_e2e_injected_leak(kept: list[bytearray], mib: float) -> None:
    kept.append(bytearray(b"\x01" * int(mib * MIB)))  # written, not just reserved: resident pages count in RSS


def _faulty(
    step, hang_after: int | None, release: Path | None, slow_s: float, growth: float, after_s: float, leak_mib: float
):
    steps = {"done": 0, "released": False, "first": None}
    kept: list[bytearray] = []

    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        if hang_after is not None and steps["done"] >= hang_after and not steps["released"]:
            afd_e2e_injected_hang(release)
            steps["released"] = True
        if slow_s > 0:
            afd_e2e_injected_slow_step(slow_s)
        if growth > 0:
            steps["first"] = steps["first"] or time.monotonic()
            afd_e2e_injected_slow_step(growth * max(0.0, time.monotonic() - steps["first"] - after_s))
        if leak_mib > 0:
            afd_e2e_injected_leak(kept, leak_mib)
        steps["done"] += 1
        return step(self, *args, **kwargs)

    wrapper.afd_e2e_fault = True
    return wrapper


def register() -> None:
    hang = os.environ.get(HANG_AFTER_STEPS, "").strip()
    release = os.environ.get(RELEASE_FILE, "").strip()
    slow = os.environ.get(SLOW_STEP_S, "").strip()
    growth = os.environ.get(SLOW_GROWTH, "").strip()
    leak = os.environ.get(LEAK_MIB_PER_STEP, "").strip()
    if not hang and not slow and not growth and not leak:
        return
    from vllm.v1.engine.core import EngineCore

    for name in STEP_METHODS:
        step = getattr(EngineCore, name, None)
        if step is not None and not getattr(step, "afd_e2e_fault", False):
            setattr(
                EngineCore,
                name,
                _faulty(
                    step,
                    int(hang) if hang else None,
                    Path(release) if release else None,
                    float(slow or 0),
                    float(growth or 0),
                    float(os.environ.get(SLOW_AFTER_S, "").strip() or 0),
                    float(leak or 0),
                ),
            )
