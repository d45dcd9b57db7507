"""How a case placed on several agents fails from the other side: the runner catches ``SideFailed``, which
``multi_agent`` raises (its rendezvous did not meet, its leader was lost), and fails the case with its message."""


class SideFailed(Exception):
    """The case's other agents failed it: the message says why."""
