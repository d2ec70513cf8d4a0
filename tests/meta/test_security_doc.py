"""Every test docs/security.md names as holding a claim exists, and so does every test file
it names: a claim whose test was renamed or removed is caught here."""

from __future__ import annotations

import re

from tests.harness.paths import REPO

DOC = REPO / "docs" / "security.md"


def defined_tests() -> set[str]:
    names: set[str] = set()
    for path in (REPO / "tests").rglob("test_*.py"):
        names.update(re.findall(r"^(?:async )?def (test_\w+)\(", path.read_text(), re.M))
    return names


def test_every_test_the_security_doc_names_exists():
    text = DOC.read_text()
    named = set(re.findall(r"`(test_\w+)`", text))
    assert len(named) >= 30  # the claims table names its tests
    assert named <= defined_tests(), sorted(named - defined_tests())


def test_every_test_file_the_security_doc_names_exists():
    files = set(re.findall(r"`(tests/[\w/]+\.py)`", DOC.read_text()))
    assert files and not [f for f in sorted(files) if not (REPO / f).is_file()]


def test_the_check_would_catch_a_missing_test():
    assert "test_no_such_claim_is_held" not in defined_tests()
