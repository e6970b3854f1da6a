"""The quick fix of a build that ran out of memory (TRT207): the recipe edit its retry advice names, as text edits on
the recipe as the editor holds it (the generic `data.fix` of a finding, lsp/editor.code_actions).

- a workspace pool too small for any tactic (`resource = workspace_limit`): the `workspace_mib` limit is removed, so
  the builder may use the device's memory (TensorRT's default);
- host or device memory exhausted: less memory for the builder — `workspace_mib` and `tactic_dram_mib` halved where
  the recipe sets them (device memory; a host-memory failure leaves the workspace, which is device memory, alone),
  and `max_aux_streams = 0` (each auxiliary stream holds its own activations).

A fix is `{"title", "edits": [{"range": [line, col, end_line, end_col], "newText"}]}` (onnx_files/fixes.py). Every
fix is checked before it is offered: the edited text must still parse as TOML and hold the new values; else none is
offered (a recipe laid out in a way the edit does not know, never a broken recipe).
"""

from __future__ import annotations

import tomllib
from typing import Any

from trtls.core.recipe import LoadedRecipe
from trtls.core.toml_bounded import TomlPath
from trtls.core.tomlpos import apply_edits

POOLS = ("builder", "memory_pool_limits")


def memory_fix(loaded: LoadedRecipe | None, engine: str, resource: str | None) -> dict[str, Any] | None:
    """The fix for `engine`'s out-of-memory failure in `loaded`; None when there is nothing left to lower (or the
    recipe does not read as it did)."""
    if loaded is None or loaded.recipe is None or engine not in loaded.recipe.engines:
        return None
    builder = loaded.recipe.engines[engine].builder
    pools = builder.memory_pool_limits
    table: TomlPath = ("engines", engine)
    if resource == "workspace_limit":
        if pools.workspace_mib is None:
            return None
        edit = _remove(loaded, (*table, *POOLS, "workspace_mib"))
        title = f"Remove the workspace limit (workspace_mib = {pools.workspace_mib}): use the device's memory"
        return _checked(loaded, {"title": title, "edits": [edit]}, {(*table, *POOLS, "workspace_mib"): None})
    wanted: dict[TomlPath, int] = {}
    if resource != "host_memory" and pools.workspace_mib is not None and pools.workspace_mib > 1:
        wanted[(*table, *POOLS, "workspace_mib")] = pools.workspace_mib // 2
    if pools.tactic_dram_mib is not None and pools.tactic_dram_mib > 1:
        wanted[(*table, *POOLS, "tactic_dram_mib")] = pools.tactic_dram_mib // 2
    if builder.max_aux_streams != 0:
        wanted[(*table, "builder", "max_aux_streams")] = 0
    if not wanted:
        return None
    edits = _merged([_set(loaded, path, str(value)) for path, value in wanted.items()])
    said = ", ".join(f"{p[-1]} = {v}" for p, v in wanted.items())
    return _checked(loaded, {"title": f"Use less memory for the builder: {said}", "edits": edits}, dict(wanted))


def _edit(line: int, col: int, end_line: int, end_col: int, text: str) -> dict[str, Any]:
    return {"range": [line, col, end_line, end_col], "newText": text}


def _dotted(keys: TomlPath) -> str:
    return ".".join(str(k) for k in keys)


def _set(loaded: LoadedRecipe, path: TomlPath, value: str) -> dict[str, Any] | None:
    """Set `path` to `value`: its value replaced when the recipe writes it, else a dotted key added to the deepest
    table the recipe writes (after its `[header]`, or inside its inline `{ … }`)."""
    sm, lines = loaded.source_map, loaded.text.splitlines()
    span = sm.span(path)
    if span is not None:
        if span.value is None:
            return None
        r = span.value
        return _edit(r.start_line, r.start_col, r.end_line, r.end_col, value)
    for depth in range(len(path) - 1, 1, -1):
        owner = sm.span(path[:depth])
        if owner is None:
            continue
        rest = _dotted(path[depth:])
        if owner.value is None:  # a `[table]` header: a line right under it
            line = owner.key.start_line + 1
            return _edit(line, 0, line, 0, f"{rest} = {value}\n")
        r = owner.value
        closing = lines[r.end_line][: r.end_col].rstrip() if r.end_line < len(lines) else ""
        if not closing.endswith("}"):
            return None
        inner = closing[:-1].rstrip()
        sep = "" if inner.endswith("{") else ","
        return _edit(r.end_line, len(inner), r.end_line, len(inner), f"{sep} {rest} = {value}")
    return None


def _remove(loaded: LoadedRecipe, path: TomlPath) -> dict[str, Any] | None:
    """Remove the key at `path`: its whole line when it stands alone on it, else the key, its value and one comma."""
    span = loaded.source_map.span(path)
    if span is None or span.value is None:
        return None
    lines = loaded.text.splitlines()
    k, v = span.key, span.value
    before, after = lines[k.start_line][: k.start_col], lines[v.end_line][v.end_col :]
    if not before.strip() and (not after.strip() or after.strip().startswith("#")):
        return _edit(k.start_line, 0, v.end_line + 1, 0, "")
    if k.start_line != v.end_line:
        return None
    if after.lstrip().startswith(","):
        end = v.end_col + len(after) - len(after.lstrip()) + 1
        end += len(lines[v.end_line][end:]) - len(lines[v.end_line][end:].lstrip())
        return _edit(k.start_line, k.start_col, v.end_line, end, "")
    if before.rstrip().endswith(","):
        return _edit(k.start_line, len(before.rstrip()) - 1, v.end_line, v.end_col, "")
    spaces = len(after) - len(after.lstrip(" "))  # the only key of `{ key = 1 }`: `{ }` is left
    return _edit(
        k.start_line, k.start_col, v.end_line, v.end_col + (spaces if after.lstrip().startswith("}") else 0), ""
    )


def _merged(edits: list[dict[str, Any] | None]) -> list[dict[str, Any] | None]:
    """Inserts at one place become one edit (their order kept): editors differ on the order of same-place inserts."""
    out: list[dict[str, Any] | None] = []
    for e in edits:
        same = next((o for o in out if o is not None and e is not None and o["range"] == e["range"]), None)
        if same is not None and e is not None and e["range"][:2] == e["range"][2:]:
            same["newText"] += e["newText"]
        else:
            out.append(e)
    return out


def _checked(loaded: LoadedRecipe, fix: dict[str, Any], wanted: dict[TomlPath, int | None]) -> dict[str, Any] | None:
    """`fix` when every edit was placed and the edited recipe parses and holds `wanted` (None: the key is gone)."""
    edits = fix["edits"]
    if not edits or any(e is None for e in edits):
        return None
    try:
        data: Any = tomllib.loads(apply_edits(loaded.text, edits))
    except tomllib.TOMLDecodeError:
        return None
    for path, value in wanted.items():
        node = data
        for key in path[:-1]:
            node = node.get(key) if isinstance(node, dict) else None
        held = node.get(path[-1]) if isinstance(node, dict) else None
        if held != value:
            return None
    return fix
