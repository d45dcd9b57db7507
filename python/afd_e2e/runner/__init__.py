"""The runner: real vLLM servers through their whole life, with hygiene checks, recorded in results.json.

run.py (a whole run) -> case.py (one case) using processes.py (start), readiness.py (ready or dead),
smoke.py, the workloads package, teardown.py (stop), hygiene.py (what is left), progress.py (what it is doing),
cancellation.py (SIGTERM/SIGINT), markers.py (finding a run's processes), child_env.py and layout.py (where
things go), record.py (what cleanup.py needs), verdict.py (pass or fail).
"""
