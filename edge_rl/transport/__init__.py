"""The bus: the Connect/Transport seam, its MQTT adapter and in-memory twin, broker addresses
and client credentials. Moves bytes; knows no learner, no actor, no payload format.
"""
