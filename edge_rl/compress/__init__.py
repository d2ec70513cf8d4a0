"""Group-sparse training (GST, Lee et al. 2021) building blocks.

``circulant``  block-circulant Dense layer, expansion and projection (Keras, NumPy)
``pruning``    block magnitude masks applied after every optimizer step (TF, NumPy)
``schedule``   ``step -> PruneDecision`` protocol, Zhu & Gupta's polynomial schedule (pure)
``controller`` reward-aware sparsity controller, and its ``Schedule`` adapter (pure)
``plan``       ``GSTPlan`` (S_shift -> phase per step), compression-ratio accounting (pure)
``phase_change`` circulant -> pruned weights at the phase shift; circulant -> plain Dense (Keras)

Nothing is re-exported here, so importing the pure modules never pulls in TensorFlow.
"""
