"""``edge-rl flash``: one bundle per board, from a blank SD card to a board in a run.

Host side (cryptography for the credentials, TensorFlow once for the reference model);
what a board runs is ``edge_rl.edge`` (``edge-rl doctor``, ``edge-rl actor``). See
docs/boards.md.
"""
