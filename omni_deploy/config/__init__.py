"""The config core: load, chain, merge and apply platforms, keeping each value's origin."""
