"""Every relative link in the README and docs/ points to a file that exists (and, for a code, to its section)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def test_relative_links_resolve() -> None:
    broken = []
    for md in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = re.sub(r"^```.*?^```", "", md.read_text(encoding="utf-8"), flags=re.M | re.S)  # code is not links
        for target in LINK.findall(text):
            if re.match(r"^[a-z]+:", target) or target.startswith("#") or target.endswith((".png", ".gif", ".svg")):
                continue  # external, in-page, or a picture the e2e run draws (docs/pictures.md)
            path, _, anchor = target.partition("#")
            dest = (md.parent / path).resolve()
            if not dest.exists():
                broken.append(f"{md.relative_to(ROOT)} → {target}")
            elif anchor.startswith("trt") and f"## {anchor.upper()}" not in dest.read_text(encoding="utf-8"):
                broken.append(f"{md.relative_to(ROOT)} → {target} (no such section)")
    assert broken == []
