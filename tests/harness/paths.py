"""Where the repository is, for tests that run its commands, read its docs or load its files."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
