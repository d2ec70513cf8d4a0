"""The ``edge-rl`` command: one module per command, ``main`` in ``main.py``."""
