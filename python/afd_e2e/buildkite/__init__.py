"""Buildkite, in one place: its job environment (``env``), its REST client (``rest``) and agent tags
(``agent_tags``: derived from the hardware, and matched as Buildkite targets agents), and the optional JUnit upload
to Test Engine (``test_engine_upload``)."""
