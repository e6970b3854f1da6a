"""The quick fix of a divergence result (TRT981): keep the diverging node(s) in their original precision by adding them
to the conversion's `exclude_nodes` — the engine's `[engines.X.precision]`, or for a route that deploys its ONNX (no
engine) the route's `[routes.X.precision]` — as text edits on the recipe as it reads now.

The edit is computed with the finding (the editor's generic `data.fix`, `lsp/editor.code_actions`) from the recipe's
source map: an existing `exclude_nodes` list is extended (its nodes kept, no duplicates); otherwise the key is added
under the `[engines.X.precision]` (`[routes.X.precision]`) header, inside an inline `precision = { … }` table, or as a
dotted `precision.exclude_nodes` line under `[engines.X]` (`[routes.X]`).
"""

from __future__ import annotations

import json
from typing import Any

from trtls.core.recipe import LoadedRecipe


def _edit(start: tuple[int, int], end: tuple[int, int], text: str) -> dict[str, Any]:
    return {"range": [start[0], start[1], end[0], end[1]], "newText": text}


def conversion_table(engine: str | None, route: str | None) -> tuple[str, str]:
    """The table whose `precision` converts what is compared: the engine's, else (a route with no engine) the
    route's."""
    if engine is not None:
        return ("engines", engine)
    if route is None:
        raise ValueError("give an engine or a route")
    return ("routes", route)


def exclude_nodes_fix(
    loaded: LoadedRecipe, engine: str | None, nodes: list[str], *, route: str | None = None
) -> dict[str, Any] | None:
    """`{title, edits}` adding `nodes` to the conversion's `exclude_nodes` (`engine`'s, or with no engine `route`'s);
    None when there is nothing to add or no place for it (the table is not in this document)."""
    if not nodes:
        return None
    kind, name = conversion_table(engine, route)
    tables = loaded.data.get(kind, {})
    table = tables.get(name, {}) if isinstance(tables, dict) else {}
    precision = table.get("precision", {}) if isinstance(table, dict) else {}
    current = [str(n) for n in (precision.get("exclude_nodes") or [])] if isinstance(precision, dict) else []
    wanted = current + [n for n in nodes if n not in current]
    if wanted == current:
        return None
    value = json.dumps(wanted)  # a TOML array of basic strings: JSON's escapes are TOML's
    title = f"Keep {', '.join(n for n in nodes if n not in current)} in its original precision (exclude_nodes)"
    sm, lines = loaded.source_map, loaded.text.splitlines()
    key = sm.span((kind, name, "precision", "exclude_nodes"))
    if key is not None and key.value is not None:
        r = key.value
        return {"title": title, "edits": [_edit((r.start_line, r.start_col), (r.end_line, r.end_col), value)]}
    table_span = sm.span((kind, name, "precision"))
    header_line = lines[table_span.key.start_line].lstrip() if table_span is not None else ""
    if table_span is not None and table_span.value is None and header_line.startswith("["):  # [….X.precision]
        at = (table_span.key.start_line + 1, 0)
        return {"title": title, "edits": [_edit(at, at, f"exclude_nodes = {value}\n")]}
    if table_span is not None and table_span.value is not None:  # precision = { convert = "fp16" }
        r = table_span.value
        closing = lines[r.end_line][: r.end_col].rstrip()
        if not closing.endswith("}"):
            return None
        inner = closing[:-1].rstrip()
        at = (r.end_line, len(inner))
        sep = "" if inner.endswith("{") else ","
        return {"title": title, "edits": [_edit(at, at, f"{sep} exclude_nodes = {value}")]}
    header = sm.span((kind, name))
    if header is None or header.value is not None:
        return None
    at = (header.key.start_line + 1, 0)
    return {"title": title, "edits": [_edit(at, at, f"precision.exclude_nodes = {value}\n")]}
