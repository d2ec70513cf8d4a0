"""What the docs say `edge-rl keygen` writes is what it writes (a board maker followed the
docs' `KEY_FILE.pub` and found `learner.pub`)."""

from __future__ import annotations

from click.testing import CliRunner

from edge_rl.cli.main import main
from tests.harness.paths import REPO

PROMISE = "`keys/learner.key` → `keys/learner.pub`"


def test_keygen_writes_the_public_key_the_docs_name(tmp_path):
    keys = tmp_path / "keys"
    keys.mkdir()
    result = CliRunner().invoke(main, ["keygen", str(keys / "learner.key")])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in keys.iterdir()) == ["learner.key", "learner.pub"]
    for doc in ("README.md", "docs/protocol.md"):
        text = " ".join((REPO / doc).read_text().split())
        assert PROMISE in text, doc
        assert "KEY_FILE.pub" not in text and "`FILE.pub`" not in text, doc
