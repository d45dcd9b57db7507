"""The runner: real vLLM servers through their whole life, with hygiene checks, recorded in results.json.

admission.py (can this run start: the plan built once, or every reason not; busy_gpus.py finds GPUs that are not
idle) -> run.py (a whole run; environment.py says what it ran on) -> case.py (one case) using server.py (one case's
servers: launch via processes.py, wait via readiness.py, watch via watch.py, stop via teardown.py), the registered
phases (``afd_e2e.phases``), hygiene.py (what is left), progress.py (what it is doing), cancellation.py
(SIGTERM/SIGINT and abandoning work), markers.py (finding a run's processes), child_env.py and layout.py (where
things go), record.py (what cleanup.py needs), verdict.py (pass or fail).
"""
