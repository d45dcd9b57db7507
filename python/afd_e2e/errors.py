"""One exception type for bad input: every message is one line naming the problem and the fix; and the exit
statuses every command uses (docs/reference.md: exit statuses)."""

from __future__ import annotations

EXIT_PASSED = 0  # the verdict passed (run), the agent fits (preflight), the gates are open (gates)
EXIT_FAILED = 1  # the verdict failed (run), the agent does not fit (preflight)
EXIT_BAD_INPUT = 2  # a UsageError: the one line names the problem and the fix
EXIT_GATES_CLOSED = 3  # not run: the profile's opt-in gates are closed (run, gates)
EXIT_NOT_RUN = EXIT_GATES_CLOSED  # not run: a follower's leader has ended, nothing to join (join)


class UsageError(Exception):
    """Bad input from a user (profile, env gate, device list, flag, checkpoint, port).

    The CLI prints ``error: <message>`` and exits 2; the message must name what is wrong and how to fix it.
    """

    def __init__(self, problem: str, fix: str) -> None:
        self.problem = problem
        self.fix = fix
        super().__init__(f"{problem} (fix: {fix})")
