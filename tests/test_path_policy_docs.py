"""docs/reliability.md's "What trtls will never write, delete or kill" is enforced: every rule there names at least
one test, and every test it names exists (the file, and a `def` of that name in it)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SECTION = "## What trtls will never write, delete or kill"
TEST_REF = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def rules() -> list[str]:
    text = (REPO / "docs" / "reliability.md").read_text(encoding="utf-8")
    assert SECTION in text
    body = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    bullets = re.split(r"\n- ", "\n" + body.split("\n- ", 1)[1]) if "\n- " in body else []
    return [b.strip() for b in bullets if b.strip()]


def test_every_rule_names_a_test_that_exists() -> None:
    found = rules()
    assert len(found) >= 8, found
    for rule in found:
        refs = TEST_REF.findall(rule)
        assert refs, f"the rule names no test: {rule[:80]}"
        for file, name in refs:
            path = REPO / file
            assert path.is_file(), f"{file} (named by: {rule[:60]})"
            assert re.search(rf"^(?:async )?def {name}\(", path.read_text(encoding="utf-8"), re.M), f"{file}::{name}"
