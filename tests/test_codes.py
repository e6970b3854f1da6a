"""The one registry of diagnostic codes (`trtls.core.codes`), its pages under docs/codes/, and the source agree."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from urllib.parse import urlparse

import pytest

from trtls.core.codes import CODES, PAGES, Severity
from trtls.core.findings import Finding
from trtls.gates.reports import to_sarif
from trtls.schema import code_pages

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


def section_titles() -> dict[str, str]:
    """code → the bold title its section starts with, read from the pages as a reader sees them."""
    out: dict[str, str] = {}
    for page in sorted(DOCS.glob("*.md")):
        for code, title in re.findall(r"^## (TRT\d{3})[ \t]*\n\*\*(.+?)\*\*", page.read_text(encoding="utf-8"), re.M):
            out[code] = title.removesuffix(".")
    return out


def test_every_section_title_is_the_registry_title() -> None:
    """All codes, not one: each section's title is the one SARIF, the editor and the CLI show (27 had drifted;
    TRT812's said the opposite of the registry)."""
    titles = section_titles()
    assert {c: (titles.get(c), e.title) for c, e in CODES.items() if titles.get(c) != e.title} == {}


def test_the_pages_are_what_the_registry_generates() -> None:
    assert code_pages.drifted() == [], "run .venv/bin/python -m trtls.schema.code_pages and commit the result"


def test_the_generator_puts_back_a_drifted_title_and_the_index(tmp_path: Path, monkeypatch) -> None:
    """--check is not a formality: a page whose title was edited by hand, and an index that lost a code, are
    reported (exit 1) and written back as the registry says."""
    pages = tmp_path / "codes"
    shutil.copytree(DOCS, pages)
    parity = pages / "gate-parity.md"
    parity.write_text(parity.read_text().replace("**Reference not independent of the export**",
                                                 "**Reference independent of the export**"))  # fmt: skip
    index = pages / "README.md"
    index.write_text(index.read_text().replace("TRT101, ", ""))
    monkeypatch.setattr(code_pages, "PAGES_DIR", pages)
    monkeypatch.setattr(code_pages, "INDEX_FILE", index)
    monkeypatch.setattr(code_pages, "ROOT", tmp_path)
    assert sorted(code_pages.drifted()) == [index, parity]
    assert code_pages.main(["--check"]) == 1
    assert code_pages.main([]) == 0 and code_pages.drifted() == []
    assert "## TRT812\n**Reference not independent of the export**" in parity.read_text()
    assert "| TRT100, TRT101, TRT102" in index.read_text()


def test_a_section_without_its_title_is_a_located_error(tmp_path: Path) -> None:
    page = tmp_path / "build.md"
    with pytest.raises(code_pages.PageError, match=r"build\.md: the section of TRT202 does not start"):
        code_pages.render_page("# Build\n\n## TRT202\nBuild failed, said without a title.\n", page)
