"""The outbound pipeline: export int8 → package and sign → publish → select the one to deploy."""
