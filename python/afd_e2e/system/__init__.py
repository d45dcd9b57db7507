"""Host-side probes shared by preflight, admission and the runner's hygiene checks: ports and who holds them,
processes, where an executable is and what its interpreter has (``engine_probe``)."""
