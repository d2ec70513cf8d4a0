"""Nodes: the only place the stages meet (transport, policy slot, env, learner, replay)."""
