"""edge-rl: a host learner, int8 LiteRT actors on edge boards, MQTT in between.

Import boundary: this package's top level imports nothing heavy. TensorFlow lives only
in ``edge_rl.agents``, ``edge_rl.export`` and the learner node; a board installs
``edge-rl[edge]`` and never imports them.
"""

__version__ = "0.1.0"
