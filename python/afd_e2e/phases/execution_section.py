"""The ``execution`` case section, defined once: per role, the execution mode its case asked for and what the
engine's own evidence shows (start-up log lines, the profiler trace's launches per step), with a verdict that can
fail the case. Its parts: the records in ``results/execution_records.py``, the readers and the verdict in
``execution/``, the reports in ``report/execution_report.py`` (registered by ``phases/rendering.py``); the runner judges a
case after its teardown (``runner/case.py``), and a performance comparison refuses sides that did not run the mode
asked (``workloads/performance_comparison.py``)."""

from __future__ import annotations

from afd_e2e.phases.registry import CaseSection, ResultsSection
from afd_e2e.results.execution_records import SECTION, CaseExecution

EXECUTION = CaseSection(
    name=SECTION,
    doc="each role's execution mode: asked (argv) against the engine's start-up lines and profiler trace",
    section=ResultsSection(SECTION, CaseExecution),
)
