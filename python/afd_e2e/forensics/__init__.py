"""Forensics: the state and stacks of every process of a case when it fails (death, stall, budget timeout,
start-up that does not move), written under ``forensics/<case>/`` and referenced from results.json."""

from afd_e2e.forensics.capture import Trigger, capture_case, capture_processes

__all__ = ["Trigger", "capture_case", "capture_processes"]
