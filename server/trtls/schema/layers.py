"""The layer table's uses: which row a module falls in, whether one row may import another, and the package table of
docs/architecture.md generated from the table (`trtls.schema.layer_table`, the data): `python -m trtls.schema.layers`
(`--check`: exit 1 on drift). `tests/test_layers.py` checks the table on the real import graph. Standard library and
`trtls.fs` only.
"""

from __future__ import annotations

import sys
from pathlib import Path

from trtls.fs import Kind, atomic_write_text, read_text
from trtls.schema.layer_table import BY_PACKAGE, EDITOR, EVERYTHING, LAYERS, PROCESSES, TENSORRT, Layer

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "server" / "trtls"
DOC_FILE = ROOT / "docs" / "architecture.md"
BEGIN, END = "<!-- generated:packages -->\n", "<!-- /generated:packages -->"
EXTENSION_ROW = (
    "| `extension/` | VS Code's extension host | the TypeScript client: renders what the server sends | "
    "`src/extension.ts`, `src/buildTree.ts`, `src/generated/protocol.ts` | LSP only | |"
)


def packages_on_disk(root: Path = PACKAGE) -> set[str]:
    """Every folder of modules under `trtls` (a subpackage is one), dotted."""
    return {
        ".".join(p.parent.relative_to(root).parts)
        for p in root.rglob("*.py")
        if p.parent != root and "__pycache__" not in p.parts
    }


def layer_of(module: str) -> Layer | None:
    """The row of a dotted module `trtls.a.b.c` (or package): its most specific folder in the table."""
    parts = module.split(".")[1:]
    for n in range(len(parts), 0, -1):
        if (layer := BY_PACKAGE.get(".".join(parts[:n]))) is not None:
            return layer
    return None


def may_import(importer: Layer, imported: Layer) -> bool:
    return imported is importer or EVERYTHING in importer.may_import or imported.package in importer.may_import


def never_text(modules: tuple[str, ...]) -> str:
    """`pygls, lsprotocol` read as the editor, `tensorrt, tensorrt_rtx` as TensorRT, any other module by name."""
    words = [word for group, word in ((EDITOR, "the editor"), (TENSORRT, "TensorRT")) if set(group) <= set(modules)]
    return ", ".join([*words, *(f"`{m}`" for m in modules if m not in (*EDITOR, *TENSORRT))])


def render_table() -> str:
    rows = [
        "| package | runs in | what it serves | key modules | may import (first party) | never imports |",
        "|---|---|---|---|---|---|",
    ]
    for layer in LAYERS:
        names = [p.replace(".", "/") for p in layer.may_import]
        imports = "everything" if EVERYTHING in layer.may_import else ", ".join(names)
        runs_in, never = ", ".join(layer.runs_in), never_text(layer.never_imports)
        holds = ", ".join(f"`{m}`" for m in layer.holds)
        rows.append(f"| `{layer.folder}` | {runs_in} | {layer.serves} | {holds} | {imports} | {never} |")
    rows.append(EXTENSION_ROW)
    return "\n".join([*rows, "", "Runs in:", *(f"- **{name}**: {meaning}" for name, meaning in PROCESSES.items())])


def render_doc(text: str) -> str:
    a, b = text.find(BEGIN), text.find(END)
    if a < 0 or b < a:
        raise SystemExit(f"{DOC_FILE}: no {BEGIN.strip()} … {END} markers")
    return text[: a + len(BEGIN)] + render_table() + "\n" + text[b:]


def _read(path: Path) -> str:
    """A document of this repository (followed, unbounded)."""
    return read_text(path, limit=None, follow=True)


def drifted() -> bool:
    """Whether docs/architecture.md's package table is not what the layer table gives."""
    text = _read(DOC_FILE)
    return render_doc(text) != text


def main(argv: list[str] | None = None) -> int:
    if "--check" in (argv if argv is not None else sys.argv[1:]):
        if drifted():
            print(f"{DOC_FILE} is out of date: run python -m trtls.schema.layers", file=sys.stderr)
            return 1
        return 0
    atomic_write_text(DOC_FILE, render_doc(_read(DOC_FILE)), kind=Kind.generated, within=DOC_FILE.parent)
    print(f"wrote {DOC_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
