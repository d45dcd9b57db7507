"""Phases, above the layers they serve: a phase is described once (``registry.Phase``) and registered from here
into each layer's table (the profile's ``catalogue``, ``results.result_sections``, the runner's ``dispatch``, the
``workloads.comparisons``, ``report.section_renderers``). ``builtin`` holds the built-in phases and ``rendering`` what the
reports show of them; the entry points install them once."""
