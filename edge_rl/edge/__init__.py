"""Actor side (runs on a board): LiteRT runtime, policy slot, exploration, spool.

Never imports TensorFlow or keras: a board installs ``edge-rl[edge]`` only.
"""
