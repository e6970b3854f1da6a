"""The one registry of diagnostic codes (`trtls.core.codes`), its pages under docs/codes/, and the source agree."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlparse

from trtls.core.codes import CODES, PAGES, Severity
from trtls.core.findings import Finding
from trtls.gates.reports import to_sarif

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "codes"
CODE_LITERAL = re.compile(r"[\"'](TRT\d{3})[\"']")


def documented() -> dict[str, str]:
    """code → page (file stem) for every `## TRTnnn` section under docs/codes/."""
    out: dict[str, str] = {}
    for page in sorted(DOCS.glob("*.md")):
        for code in re.findall(r"^## (TRT\d{3})\b", page.read_text(encoding="utf-8"), re.M):
            assert code not in out, f"{code} documented on {out[code]} and {page.stem}"
            out[code] = page.stem
    return out


def used_in_source() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in sorted((ROOT / "server" / "trtls").rglob("*.py")):
        for code in CODE_LITERAL.findall(p.read_text(encoding="utf-8")):
            out.setdefault(code, []).append(str(p.relative_to(ROOT)))
    return out


def test_every_registered_code_has_its_section_where_its_link_points() -> None:
    assert len(CODES) > 90
    docs = documented()
    wrong = []
    for code, entry in CODES.items():
        url = urlparse(Finding(code, entry.severity, "").doc_url)
        page = Path(url.path)
        if docs.get(code) != entry.page or page != DOCS / f"{entry.page}.md" or url.fragment != code.lower():
            wrong.append(f"{code}: registered on {entry.page}, documented on {docs.get(code)}, links to {url.path}")
    assert wrong == []


def test_every_documented_code_is_registered() -> None:
    assert sorted(set(documented()) - set(CODES)) == []


def test_every_code_in_the_source_is_registered() -> None:
    used = used_in_source()
    assert len(used) > 90
    assert {c: files for c, files in used.items() if c not in CODES} == {}


def test_entries_are_well_formed() -> None:
    for code, entry in CODES.items():
        assert re.fullmatch(r"TRT\d{3}", code) and entry.code == code
        assert entry.title and not entry.title.endswith(".") and "\n" not in entry.title
        assert entry.severity in (Severity.error, Severity.warning, Severity.information)
        assert entry.page in PAGES and (DOCS / f"{entry.page}.md").is_file()
    assert {p.stem for p in DOCS.glob("*.md")} == set(PAGES) | {"README"}


def test_sarif_rules_take_title_and_help_from_the_registry() -> None:
    sarif = to_sarif(
        [Finding("TRT101", Severity.error, "unknown key 'optimisation_level'")], lambda p: None, "t.toml", "0"
    )
    (rule,) = sarif["runs"][0]["tool"]["driver"]["rules"]
    assert rule["shortDescription"]["text"] == "TRT101 Unknown key"
    assert urlparse(rule["helpUri"]).path.endswith("docs/codes/recipe.md") and rule["helpUri"].endswith("#trt101")
