"""What a case's processes do while it runs, sampled about once a second from launch to teardown.

``engine_metrics``: each role's vLLM Prometheus ``/metrics`` (the names that hold on vLLM 0.26 GPU and 0.32 CPU);
``in_flight``: requests the workload side has open against the API; ``gpu_sampler``: NVML per GPU; ``sampler``: the
1 Hz thread that takes them all with the OS state of every process of the case and writes
``telemetry/<case>.jsonl.gz``; ``watchdog``: stalls (in flight, no token moving) and start-up stalls judged on
those samples; ``summary``: what results carry of them (``report/telemetry_report.py`` draws them);
``soak_leaks``: a soak's leak verdict from them.
"""
