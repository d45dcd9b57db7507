"""One exception type for bad input: every message is one line naming the problem and the fix."""

from __future__ import annotations


class UsageError(Exception):
    """Bad input from a user (profile, env gate, device list, flag, checkpoint, port).

    The CLI prints ``error: <message>`` and exits 2; the message must name what is wrong and how to fix it.
    """

    def __init__(self, problem: str, fix: str) -> None:
        self.problem = problem
        self.fix = fix
        super().__init__(f"{problem} (fix: {fix})")
