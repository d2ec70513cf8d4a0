"""Simulated device fleet: N real actor processes running exactly `edge-rl actor`."""
