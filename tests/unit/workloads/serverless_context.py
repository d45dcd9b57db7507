"""A phase's context for a case whose server is not running: its port is one the OS just handed out and closed, so
every request a phase sends is refused at once (the unit tier's way to drive a phase to its failures)."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

from afd_e2e.plan import build_plan
from afd_e2e.profile.model import Profile
from afd_e2e.runner.case import new_case_results
from afd_e2e.workloads.context import PhaseContext


def serverless_context(profile: Profile, out_dir: Path, flushes: list[int], gsm8k_dir: Path | None) -> PhaseContext:
    """The first case of ``profile`` planned on a free port with nothing listening; each results.json write the
    phase asks for appends to ``flushes``."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    case = build_plan(profile, model_path="/m", port_base=port).cases[0]
    return PhaseContext(
        profile=profile,
        case=case,
        case_results=new_case_results(case),
        out_dir=out_dir,
        progress=lambda _: None,
        cancelled=threading.Event(),
        flush=lambda: flushes.append(1),
        gsm8k_dir=gsm8k_dir,
        client_env=lambda _: {},
        take_forensics=lambda _trigger, _reason: None,
    )
