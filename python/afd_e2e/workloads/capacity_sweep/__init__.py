"""The capacity sweep: ``level_search`` (pure: which level next, what the levels say), ``sweep`` (levels measured on a
ready case), ``compare`` (two cases' capacities), ``sweep_phase`` (the phase and the measure)."""
