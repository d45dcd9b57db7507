"""The dynamic Buildkite pipeline: decide, per profile, whether the GPU run is explained away, offered behind a
block, or run unattended, and render the steps for ``buildkite-agent pipeline upload``.

buildkite.env (what started the build) + agents/agents_api (is a matching agent connected) -> decide (pure, per
profile) -> pools (pure, a profile set's agent pools; profile_sets names the sets) -> generate (steps) ->
steps.render (YAML/JSON for ``pipeline upload --no-interpolation``). A profile that places processes on other agent
pools gets a leader step; followers (pure) builds its concurrency group and the follower steps it uploads at run
time (pipeline/upload.py).
"""
