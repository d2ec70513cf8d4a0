"""Transport: topic names, the versioned wire codec, the MQTT adapter, the embedded broker.

No TensorFlow here: boards import this package.
"""
