"""The nightly trend: a run compared with its own history, per case and metric, on the build page.

``record`` (what a run contributes, and its identity), ``history`` (sources and screening), ``buildkite_history`` (earlier
builds through the REST API), ``analysis`` (the regression call), ``compute`` (a whole report), ``section``,
``plot`` and ``trend_junit`` (renderings), ``files`` (``trend/`` in the results folder and the report's hook), ``trend_run`` (a results folder's trend).
"""
