"""What crosses the wire: bytes <-> typed records (envelope, transition batches, status,
control and credit messages, the signed policy bundle, the blocks model codec, signing, topic
names). No I/O, no TensorFlow: both sides import it (docs/protocol.md is its contract).
"""
