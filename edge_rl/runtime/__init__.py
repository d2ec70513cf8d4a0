"""An exported model in LiteRT (XNNPACK): load and run it, and score it greedily in an env.
No TensorFlow: the board runs it, the learner checks and scores what it exports with it.
"""
