"""Board side: the actor node (env loop), its policy slot (verify, then hot swap), exploration,
batching and spool, run control, emulation of a slower board.

Never imports TensorFlow or keras: a board installs ``edge-rl[edge]`` only.
"""
