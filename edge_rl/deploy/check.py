"""One check of ``edge-rl doctor``: a name, ok or not, what was found, and the fix."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str  # what was found
    fix: str = ""  # on failure: what to do about it

    def line(self) -> str:
        status = "ok  " if self.ok else "FAIL"
        text = f"{status}  {self.name:<10}  {self.detail}"
        return text if self.ok else f"{text} -- fix: {self.fix}"


class Failed(Exception):
    """A check's failure: ``detail`` and ``fix``."""

    def __init__(self, detail: str, fix: str) -> None:
        super().__init__(detail)
        self.detail = detail
        self.fix = fix


def run_check(name: str, fn: Callable[[], str]) -> Check:
    try:
        return Check(name, True, fn())
    except Failed as e:
        return Check(name, False, e.detail, e.fix)
    except Exception as e:  # noqa: BLE001 - a check must report, never crash the doctor
        return Check(name, False, f"{type(e).__name__}: {e}", "see the message; re-flash the board")


def skipped(name: str, why: str) -> Check:
    return Check(name, False, f"not checked: {why}", "fix the check above first")
