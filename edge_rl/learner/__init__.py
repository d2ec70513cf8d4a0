"""Host side: the learner node and its parts (trainer, inbox, ingest, replay, the outbound
pipeline, fleet control and credit, durable state, metrics, summary).
"""
