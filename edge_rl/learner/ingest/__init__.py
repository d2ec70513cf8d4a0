"""Ingest: a transition batch from the bus to replay (decode, check, dedup, account). No TF."""
