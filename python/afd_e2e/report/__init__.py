"""Reports rendered from one results.json: JUnit XML, the Buildkite annotation, plots, and publishing them.

Pure renderers (``junit``, ``annotation``, ``plots``) read the results document only; ``render`` writes their files
into the results folder; ``publish`` is the edge that talks to Buildkite (through ``afd_e2e.buildkite``).
"""

from afd_e2e.report.render import ReportPaths, render_all

__all__ = ["ReportPaths", "render_all"]
