"""The embedded broker of `edge-rl learn` (Mosquitto, or amqtt where Mosquitto is missing):
its processes, its per-run accounts and ACL, and where its executables are. Host side.
"""
