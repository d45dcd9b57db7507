"""Preflight: does this agent fit a profile? One module per check family; ``runner`` gathers readings and runs them.

Every family is a pure function from readings (hardware inventory, busy ports, checkpoint files, installed
distributions) and the profile/plan to Check records; reading the machine happens in ``runner`` only.
"""
