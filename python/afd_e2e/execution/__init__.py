"""Execution evidence: does each role run the mode its case asked for (eager, compiled, CUDA graphs captured and
replayed)? ``asked.py`` reads what a role's planned argv asks, ``startup.py`` what its log says it did, ``trace.py``
what its torch profiler trace shows it launched, ``judge.py`` the verdict per role and per case."""
