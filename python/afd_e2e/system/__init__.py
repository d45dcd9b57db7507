"""Host-side probes shared by preflight and the runner's hygiene checks (ports, processes)."""
