"""The emulated Raspberry Pi check (scripts/emulated-pi-check; main.py)."""
