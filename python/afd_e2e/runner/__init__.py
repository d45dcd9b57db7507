"""The runner: real vLLM servers through their whole life, with hygiene checks, recorded in results.json.

admission.py (can this run start: the plan built once, or every reason not; busy_gpus.py finds GPUs that are not
idle) -> run.py (a whole run; environment.py says what it ran on) -> case.py (one case) using server.py (one case's
servers: launch via system/processes.py, wait via readiness.py, watch via watch.py, stop via teardown.py), the
phases' run functions (dispatch.py, filled by ``afd_e2e.phases``), hygiene.py (what is left), system/progress.py
(what it is doing), cancellation.py (SIGTERM/SIGINT and abandoning work), system/markers.py (finding a run's
processes), system/child_env.py and layout.py (where things go), run_record.py (what cleanup.py needs), verdict.py
(pass or fail); side.py is how a case on several agents fails from the other side (``afd_e2e.multi_agent``).
"""
