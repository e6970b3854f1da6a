"""Generate what the code pages take from the registry: `python -m trtls.schema.code_pages` (`--check`: 1 on drift).

ruff generates each rule's page from its registry (`codes.rs`), so a rule's name cannot differ between the code and
the docs. Here the registry is `trtls.core.codes` (code → severity, page, title) and each code's explanation is
written on its area's page, `docs/codes/<page>.md`, under `## TRTnnn`. What the registry owns is generated into
those pages:

- each section's title: the bold span its first line starts with is the registry's title (a title that ends its
  sentence keeps its full stop inside the bold, as the page wrote it);
- the index of pages and their codes in `docs/codes/README.md`, between `<!-- generated:index -->` and
  `<!-- /generated:index -->`, each page named by its own `# ` heading.

A section whose first line has no bold title, or a page without its heading, is a located error (the page and the
code), never a guess. tests/test_codes.py fails when a page is not what this writes.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from trtls.core.codes import CODES, PAGES
from trtls.fs import Kind, atomic_write_text, read_text

ROOT = Path(__file__).resolve().parents[3]
PAGES_DIR = ROOT / "docs" / "codes"
INDEX_FILE = PAGES_DIR / "README.md"
SECTION = re.compile(r"^## (TRT\d{3})[ \t]*\n(\*\*)(.+?)(\*\*)", re.M)
INDEX_BEGIN, INDEX_END = "<!-- generated:index -->\n", "<!-- /generated:index -->"


class PageError(SystemExit):
    """A page the generator cannot read its sections from, said with the page and the code."""


def render_page(text: str, path: Path) -> str:
    """The page with each registered code's section title taken from the registry."""

    def titled(m: re.Match[str]) -> str:
        entry = CODES.get(m.group(1))
        if entry is None:
            return m.group(0)  # tests/test_codes.py names a documented code that is not registered
        stop = "." if m.group(3).endswith(".") else ""
        return f"## {entry.code}\n**{entry.title}{stop}**"

    untitled = [
        c for c in re.findall(r"^## (TRT\d{3})\b", text, re.M) if not re.search(rf"^## {c}[ \t]*\n\*\*", text, re.M)
    ]
    if untitled:
        raise PageError(f"{path}: the section of {untitled[0]} does not start with its **title**")
    return SECTION.sub(titled, text)


def page_heading(text: str, path: Path) -> str:
    m = re.search(r"^# (.+)$", text, re.M)
    if m is None:
        raise PageError(f"{path}: no '# ' heading")
    return m.group(1).strip()


def index_table(pages: dict[str, str]) -> str:
    """One row per page, in the registry's order: its heading, linked, and its registered codes."""
    rows = ["| page | codes |", "|---|---|"]
    for page in PAGES:
        codes = ", ".join(c for c, e in CODES.items() if e.page == page)
        rows.append(f"| [{page_heading(pages[page], PAGES_DIR / f'{page}.md')}]({page}.md) | {codes} |")
    return "\n".join(rows)


def render_index(text: str, table: str) -> str:
    a, b = text.find(INDEX_BEGIN), text.find(INDEX_END)
    if a < 0 or b < a:
        raise PageError(f"{INDEX_FILE}: no {INDEX_BEGIN.strip()} … {INDEX_END} markers")
    return text[: a + len(INDEX_BEGIN)] + table + "\n" + text[b:]


def generated() -> dict[Path, str]:
    pages = {p: _read(PAGES_DIR / f"{p}.md") for p in PAGES}
    out = {PAGES_DIR / f"{p}.md": render_page(text, PAGES_DIR / f"{p}.md") for p, text in pages.items()}
    out[INDEX_FILE] = render_index(_read(INDEX_FILE), index_table(pages))
    return out


def drifted() -> list[Path]:
    """The pages whose generated parts are not what the registry gives."""
    return [p for p, text in generated().items() if _read(p) != text]


def _read(path: Path) -> str:
    """A document of this repository (followed, unbounded)."""
    return read_text(path, limit=None, follow=True)


def main(argv: list[str] | None = None) -> int:
    if "--check" in (argv if argv is not None else sys.argv[1:]):
        stale = drifted()
        for p in stale:
            print(f"{p} is out of date: run python -m trtls.schema.code_pages", file=sys.stderr)
        return 1 if stale else 0
    for p, text in generated().items():
        if _read(p) != text:
            atomic_write_text(p, text, kind=Kind.generated, within=ROOT)
            print(f"wrote {p.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
