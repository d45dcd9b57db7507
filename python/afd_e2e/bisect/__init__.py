"""``afd-e2e bisect``: from a good and a bad revision to the first bad commit (docs/bisect.md).

Sits beside ``pipeline`` and ``multi_agent``: it uses the runner, the report and the workloads' verdicts; only the
commands use it.
"""
