"""Phases: one descriptor per workload phase and per case section, in ``registry``; the built-in ones in
``builtin``. Everything that lists phases (the profile's phase names, budgets and rules, the runner's dispatch and
writes, the verdict, the comparisons, JUnit and the annotation) reads the registry."""
