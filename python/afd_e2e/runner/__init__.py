"""The runner: real vLLM servers through their whole life, with hygiene checks, recorded in results.json.

run.py (a whole run; busy_gpus.py refuses GPUs that are not idle) -> case.py (one case) using server.py (one case's
servers: launch via processes.py, wait via readiness.py, watch via watch.py, stop via teardown.py), smoke.py, the
workloads package, hygiene.py (what is left), progress.py (what it is doing), cancellation.py (SIGTERM/SIGINT and
abandoning work), markers.py (finding a run's processes), child_env.py and layout.py (where things go), record.py
(what cleanup.py needs), verdict.py (pass or fail).
"""
