"""The simulated fleet: N real actor processes, each running exactly ``edge-rl actor``."""
