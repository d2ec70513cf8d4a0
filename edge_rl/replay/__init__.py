"""Replay: the ring buffer and the ingest path (decode → validate → dedup → add). No TF."""
