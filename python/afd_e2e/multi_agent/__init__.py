"""One case across several Buildkite agents: the leader job runs the workloads and hosts its own roles; one
follower job per remotely placed process hosts the rest (profile ``placement``).

``identity`` (same software on every agent), ``lifecycle`` (the leader's state in build meta-data and whether a
follower joins), ``board`` (what leader and followers say to each other in meta-data), ``leader`` and ``follower``
(each side's part in the case runner: rendezvous, remote watch, end), ``remote`` (a role on another agent, watched),
``merge`` (one report), ``agent`` (this agent's name and listen address). The steps a leader uploads live in the
pipeline package.
"""
