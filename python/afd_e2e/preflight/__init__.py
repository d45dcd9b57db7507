"""Preflight: does this agent fit a profile? One module per check family; ``run_checks`` runs them all.

``run_checks`` reads the machine once (NVML, busy ports, installed distributions) and hands the readings to the
hardware, port and software families, which are pure; the checkpoint family stats its folder itself.
"""
