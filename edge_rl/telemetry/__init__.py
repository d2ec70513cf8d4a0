"""Telemetry: run logs (CSV + TensorBoard) and the live terminal view."""
