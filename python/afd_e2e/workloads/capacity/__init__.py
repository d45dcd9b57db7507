"""The capacity sweep: ``search`` (pure: which level next, what the levels say), ``sweep`` (levels measured on a
ready case), ``compare`` (two cases' capacities)."""
