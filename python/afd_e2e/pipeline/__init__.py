"""The dynamic Buildkite pipeline: decide, per profile, whether the GPU run is explained away, offered behind a
block, or run unattended, and render the steps for ``buildkite-agent pipeline upload``.

build_env (what started the build) + agents/agents_api (is a matching agent connected) -> decide (pure) ->
generate (steps) -> steps.render (YAML/JSON).
"""
