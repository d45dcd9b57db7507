"""This machine's processes and ports, below every layer that starts or watches them: ports and who holds them,
processes and their state, where an executable is and what its interpreter has (``engine_probe``), the markers that
find a run's processes, a child's environment, a server's log and the progress lines read from it."""
