"""Stand-in processes and plans for the process manager's tests: small Python programs, never a fake vLLM."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from afd_e2e.plan.model import CasePlan, ProcessPlan, RunPlan

# Ports for unit tests: the top of this helper's range (engine tests and benchmarks use lower blocks).
UNIT_PORT_BASE = 19400

SLEEPER = "import time; print('stand-in up', flush=True); time.sleep(600)"
IGNORES_SIGTERM = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ignoring SIGTERM', flush=True); time.sleep(600)"
)
# A parent whose descendants escape its process group: one starts its own session, one is orphaned (re-parented).
# The session is made in the fork, before exec (start_new_session): once the parent prints, the child has left the
# group, however slowly it starts (an os.setsid() in the child's own code ran after the print on a loaded machine).
ESCAPING_TREE = r"""
import subprocess, sys, time
escaped = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
middle = subprocess.run(
    [sys.executable, "-c", "import subprocess as s, sys; "
     "print(s.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], stdout=s.DEVNULL).pid)"],
    stdout=subprocess.PIPE, text=True, check=True)
print(f"escaped={escaped.pid} orphan={int(middle.stdout)}", flush=True)
time.sleep(600)
"""


def stand_in_case(
    case_id: str,
    script: str,
    *,
    port: int,
    startup_timeout_s: float = 60.0,
    teardown_grace_s: float = 1.0,
    phases: tuple[str, ...] = ("smoke",),
) -> CasePlan:
    process = ProcessPlan(
        name="server",
        role="native",
        argv=(sys.executable, "-c", script),
        env_set={},
        env_unset=(),
        devices=(),
        api_port=port,
        connector_ports=(),
        serves_api=True,
    )
    base_url = f"http://127.0.0.1:{port}"
    return CasePlan(
        id=case_id,
        kind="native",
        label="stand-in",
        description="a small Python process standing in for a server",
        phases=phases,
        processes=(process,),
        base_url=base_url,
        ready_url=base_url + "/v1/models",
        served_model_name="stand-in",
        startup_timeout_s=startup_timeout_s,
        teardown_grace_s=teardown_grace_s,
    )


def stand_in_plan(*cases: CasePlan) -> RunPlan:
    return RunPlan(
        profile="tiny-cpu",
        platform="cpu",
        smoke_only=True,
        model_path="/nonexistent",
        devices=(),
        cases=cases,
        comparisons=(),
    )


def on_release(path: Path) -> str:
    """A stand-in's first line: wait until the test creates ``path``. A stand-in that acts "later" (dies, logs a
    fatal line, exits) acts when the test releases it, once the test has seen what must come first, never after a
    number of real seconds that a loaded machine could overrun."""
    return f"import pathlib, time\nwhile not pathlib.Path({str(path)!r}).exists():\n    time.sleep(0.01)\n"


def wait_for_log(path: Path, text: str, timeout_s: float = 30.0) -> str:
    """Block until ``text`` appears in the log at ``path`` (a stand-in has set itself up); return the log."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        content = path.read_text() if path.exists() else ""
        if text in content:
            return content
        time.sleep(0.02)
    raise AssertionError(f"{text!r} never appeared in {path}")


def api_stand_in(port: int, *, dies_at_first_completion: bool = False) -> str:
    """An API server: /v1/models and /health answer 200, a completion hangs (logging "completion arrived"). With ``dies_at_first_completion`` its
    engine dies once the first completion has arrived and /health has answered 200 (the watch knows it healthy):
    /health answers 503 from then on while the process lives on. Events in that order, not seconds, so the death
    comes during the phase that sent the completion, whatever the machine's speed."""
    return f"""
import http.server, time
dies = {dies_at_first_completion!r}
completion_arrived = answered_healthy = False
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        global answered_healthy
        health = self.path == "/health"
        dead = dies and completion_arrived and answered_healthy
        self.send_response(503 if dead and health else 200); self.end_headers()
        answered_healthy = answered_healthy or health
    def do_POST(self):
        global completion_arrived
        completion_arrived = True
        print("completion arrived", flush=True)
        time.sleep(600)
    def log_message(self, *args):
        pass
print("api up", flush=True)
http.server.ThreadingHTTPServer(("127.0.0.1", {port}), Handler).serve_forever()
"""
