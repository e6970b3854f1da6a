"""A code's registry title says what its check checks now, and its page opens with that title."""

from __future__ import annotations

import re
from pathlib import Path

from trtls.core.codes import CODES

DOCS = Path(__file__).resolve().parents[2] / "docs" / "codes"


def page_title(page: str, code: str) -> str:
    text = (DOCS / f"{page}.md").read_text(encoding="utf-8")
    m = re.search(rf"^## {code}\n\*\*(.+?)\*\*", text, re.M | re.S)
    assert m, f"{code} on {page}.md opens with no bold title"
    return " ".join(m.group(1).split())


def test_trt816_is_titled_by_what_it_checks_pooling_matches_modules_json():
    entry = CODES["TRT816"]
    assert "modules.json" in entry.title and "not deployed" not in entry.title, entry.title
    assert page_title(entry.page, "TRT816") == entry.title
