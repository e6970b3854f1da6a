"""Every diagnostic code the code base can produce has a documentation section where its link points."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlparse

from trtls.core.findings import Finding, Severity

ROOT = Path(__file__).resolve().parents[1]


def codes_in_code() -> set[str]:
    pattern = re.compile(r"[\"'](TRT\d{3})[\"']")
    return {
        m for p in (ROOT / "server" / "trtls").rglob("*.py") for m in pattern.findall(p.read_text(encoding="utf-8"))
    }


def test_every_code_is_documented_where_its_link_points() -> None:
    codes = codes_in_code()
    assert len(codes) > 40
    missing = []
    for code in sorted(codes):
        url = urlparse(Finding(code, Severity.error, "").doc_url)
        page = Path(url.path)
        assert page.is_file(), url
        sections = set(re.findall(r"^## (TRT\d{3})\b", page.read_text(encoding="utf-8"), re.M))
        if code not in sections or url.fragment != code.lower():
            missing.append(f"{code} → {page.name}")
    assert missing == []
