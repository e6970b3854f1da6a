"""Regenerate docs/reliability.md's scenario table from `trtls.accept.scenarios` (tests fail when it drifts).

python -m trtls.accept.doc_table docs/reliability.md
"""

from __future__ import annotations

import sys
from pathlib import Path

from trtls.accept.scenarios import reliability_table

START, END = (
    "<!-- scenario-table:start (generated: python -m trtls.accept.doc_table) -->",
    "<!-- scenario-table:end -->",
)


def regenerate(text: str) -> str:
    if START not in text or END not in text:
        raise ValueError(f"the document has no {START!r} … {END!r} markers")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{START}\n{reliability_table()}{END}{tail}"


def main(argv: list[str]) -> int:
    from trtls.fs import Kind, atomic_write_text, read_text

    path = Path(argv[0] if argv else "docs/reliability.md")
    text = regenerate(read_text(path, limit=4 << 20))  # this repository's document (never through a link)
    atomic_write_text(path, text, kind=Kind.generated, within=path.parent)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
