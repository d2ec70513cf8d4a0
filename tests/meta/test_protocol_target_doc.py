"""docs/protocol.md §5.5 against the code: the deployment target's worked example is what
``encode_target`` writes, byte for byte, and decodes to the fields the text states."""

from __future__ import annotations

import re

from edge_rl.types import PolicyTarget
from edge_rl.wire.messages import decode_target, encode_target
from tests.harness.paths import REPO

DOC = (REPO / "docs" / "protocol.md").read_text()


def _example() -> bytes:
    section = DOC[DOC.index("### 5.5 Rollout") : DOC.index("## 6. Actor rules")]
    block = re.search(r"```\n(0{8}  .*?)```", section, re.S)
    assert block, "no hexdump in docs/protocol.md §5.5"
    rows = [line[10:58].split() for line in block.group(1).splitlines()]
    return bytes.fromhex("".join("".join(r) for r in rows))


def test_the_rollback_target_example_is_what_the_encoder_writes():
    data = _example()
    manifest_sha = re.search(r'"model_sha256":"([0-9a-f]{64})"', DOC).group(1)  # §4's example
    expected = PolicyTarget("5f0c2a9e71b3d846", 3, manifest_sha, "v4")
    assert decode_target(data, 64 * 1024) == expected
    assert encode_target(expected) == data
    assert f"{len(data)} bytes" in DOC and f"`H = 0x{len(data) - 10:x}`" in DOC
