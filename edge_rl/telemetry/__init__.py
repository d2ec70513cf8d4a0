"""Telemetry: run logs (CSV + TensorBoard), the live terminal view, the runtime breakdown,
and energy and carbon (energy.py: the boards' power model; carbon.py: codecarbon on the host)."""
