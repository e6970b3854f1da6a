"""Quick fixes for the model checks, as plain text edits on the recipe (no LSP types: faces convert them).

A fix is `{"title": str, "edits": [{"range": [line, col, end_line, end_col], "newText": str}, ...]}` with
0-based positions, end exclusive — JSON, so it travels in a finding's data to the editor and back in a
code-action request unchanged. Fixes edit as little as they can (one inserted line for a missing input)
so a user's comments and layout survive; only a one-input shorthand profile, which cannot hold a second
input, is rewritten into the `inputs.NAME` form.
"""

from __future__ import annotations

import re
from typing import Any

from trtls.core.recipe import LoadedRecipe, OptimizationProfile
from trtls.core.toml_bounded import TomlPath
from trtls.onnx_files.onnx_reader import GraphInput

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")
Shapes = dict[str, list[int]]


def toml_key(name: str) -> str:
    return name if _BARE.match(name) else '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def fill_shapes(declared: GraphInput, known: dict[str, tuple[int, int, int]]) -> tuple[Shapes, bool]:
    """min/opt/max for an input from the model: static dims as declared, a symbolic dim as another input of the
    profile already gives it (attention_mask takes input_ids' batch and seq), else 1. Second value: True when a
    dimension had to be guessed."""
    mins, opts, maxs = [], [], []
    guessed = False
    for dim in declared.dims or ():
        if dim.is_static:
            lo = mid = hi = int(dim.value or 0)
        elif dim.param and dim.param in known:
            lo, mid, hi = known[dim.param]
        else:
            lo = mid = hi = 1
            guessed = True
        mins.append(lo)
        opts.append(mid)
        maxs.append(hi)
    return {"min": mins, "opt": opts, "max": maxs}, guessed or declared.dims is None


def symbol_values(prof: OptimizationProfile | None, declared: dict[str, GraphInput]) -> dict[str, tuple[int, int, int]]:
    """Symbolic dimension → (min, opt, max) as the profile's given inputs set it."""
    out: dict[str, tuple[int, int, int]] = {}
    for name, shapes in (prof.shapes() if prof is not None else {}).items():
        model_input = declared.get(name)
        if model_input is None or model_input.dims is None:
            continue
        for j, dim in enumerate(model_input.dims):
            if dim.param and j < len(shapes.min) == len(shapes.opt) == len(shapes.max):
                out.setdefault(dim.param, (shapes.min[j], shapes.opt[j], shapes.max[j]))
    return out


def _inline(shapes: Shapes) -> str:
    return "{ " + ", ".join(f"{k} = {shapes[k]}" for k in ("min", "opt", "max")) + " }"


def _edit(line: int, col: int, end_line: int, end_col: int, text: str) -> dict[str, Any]:
    return {"range": [line, col, end_line, end_col], "newText": text}


def _title(verb: str, names: list[str], guessed: bool) -> str:
    quoted = ", ".join(f"'{n}'" for n in names)
    return f"{verb} {quoted} with dimensions from the model" + (" (set the dynamic ones: guessed 1)" if guessed else "")


def _lines_of(loaded: LoadedRecipe, prefix: TomlPath) -> tuple[int, int] | None:
    """First and last line holding a key or value under `prefix`."""
    lines: list[int] = []
    for path, span in loaded.source_map.spans.items():
        if path[: len(prefix)] == prefix:
            lines += [span.key.start_line, (span.value or span.key).end_line]
    return (min(lines), max(lines)) if lines else None


def insert_inputs_fix(
    loaded: LoadedRecipe,
    engine: str,
    index: int,
    prof: OptimizationProfile,
    missing: list[GraphInput],
    model_inputs: tuple[GraphInput, ...] = (),
) -> dict[str, Any] | None:
    """Add the missing inputs to profile `index` of `engine`."""
    declared = {i.name: i for i in (*model_inputs, *missing)}
    known = symbol_values(prof, declared)
    guessed = False
    given = prof_entries(prof)
    added: list[tuple[str, Shapes]] = []
    for item in missing:
        shapes, g = fill_shapes(item, known)
        guessed |= g
        added.append((item.name, shapes))
    title = _title("Add", [m.name for m in missing], guessed)
    ppath: TomlPath = ("engines", engine, "profiles", index)
    span = loaded.source_map.span(ppath)
    if span is None:
        return None
    if span.value is not None:  # an inline table in `profiles = [...]`: rewrite the item
        body = ", ".join(f"{toml_key(n)} = {_inline(s)}" for n, s in [*given, *added])
        r = span.value
        edit = _edit(r.start_line, r.start_col, r.end_line, r.end_col, f"{{ inputs = {{ {body} }} }}")
        return {"title": title, "edits": [edit]}
    if prof.is_shorthand:  # a shorthand holds one input: its lines become inputs.NAME lines
        rows = [loaded.source_map.span(ppath + (k,)) for k in ("input", "min", "opt", "max")]
        if any(r is None or r.value is None for r in rows):
            return None
        first = min(r.key.start_line for r in rows)  # type: ignore[union-attr]
        last = max(r.value.end_line for r in rows)  # type: ignore[union-attr]
        text = "".join(f"inputs.{toml_key(n)} = {_inline(s)}\n" for n, s in [*given, *added])
        return {"title": title, "edits": [_edit(first, 0, last + 1, 0, text)]}
    header_line = span.key.start_line
    direct = [
        (s.value or s.key).end_line
        for p, s in loaded.source_map.spans.items()
        if p[: len(ppath)] == ppath
        and len(p) > len(ppath)
        and s.key.start_line > header_line
        and _owner_header(loaded, s.key.start_line) == header_line
    ]
    at = (max(direct) if direct else header_line) + 1
    text = "".join(f"inputs.{toml_key(n)} = {_inline(s)}\n" for n, s in added)
    return {"title": title, "edits": [_edit(at, 0, at, 0, text)]}


def prof_entries(prof: OptimizationProfile) -> list[tuple[str, Shapes]]:
    return [(name, s.model_dump()) for name, s in prof.shapes().items()]


def _owner_header(loaded: LoadedRecipe, line: int) -> int:
    """The line of the table header whose body holds `line`."""
    owner = -1
    for header_line, _ in loaded.source_map.tables:
        if header_line > line:
            break
        owner = header_line
    return owner


def insert_profile_fix(loaded: LoadedRecipe, engine: str, dynamic: list[GraphInput]) -> dict[str, Any]:
    """Add a first profile to an engine that has none, every dynamic input filled from the model."""
    declared = {i.name: i for i in dynamic}
    known: dict[str, tuple[int, int, int]] = {}
    guessed = False
    entries: list[tuple[str, Shapes]] = []
    for item in dynamic:
        shapes, g = fill_shapes(item, known | symbol_values(None, declared))
        guessed |= g
        entries.append((item.name, shapes))
    title = _title("Add a profile with", [i.name for i in dynamic], guessed)
    empty = loaded.source_map.span(("engines", engine, "profiles"))
    if empty is not None and empty.value is not None:  # `profiles = []`
        body = ", ".join(f"{toml_key(n)} = {_inline(s)}" for n, s in entries)
        r = empty.value
        return {
            "title": title,
            "edits": [_edit(r.start_line, r.start_col, r.end_line, r.end_col, f"[{{ inputs = {{ {body} }} }}]")],
        }
    extent = _lines_of(loaded, ("engines", engine))
    at = extent[1] + 1 if extent else len(loaded.text.splitlines())
    header = f"[[engines.{toml_key(engine)}.profiles]]\n"
    text = "\n" + header + "".join(f"inputs.{toml_key(n)} = {_inline(s)}\n" for n, s in entries)
    return {"title": title, "edits": [_edit(at, 0, at, 0, text)]}


def rename_fix(
    loaded: LoadedRecipe, path: TomlPath, on_value: bool, name: str, suggestion: str
) -> dict[str, Any] | None:
    """Replace a misspelt input name (a key, a sub-table header or the shorthand's value) by the model's."""
    span = loaded.source_map.span(path)
    if span is None:
        return None
    r = span.value if on_value and span.value is not None else span.key
    lines = loaded.text.splitlines()
    if r.start_line != r.end_line or r.start_line >= len(lines):
        return None
    segment = lines[r.start_line][r.start_col : r.end_col]
    if on_value:
        new = '"' + suggestion.replace("\\", "\\\\").replace('"', '\\"') + '"'
        return {
            "title": f"Rename to '{suggestion}'",
            "edits": [_edit(r.start_line, r.start_col, r.end_line, r.end_col, new)],
        }
    for written in (f'"{name}"', f"'{name}'", name):
        at = segment.rfind(written)
        if at >= 0:
            col = r.start_col + at
            edit = _edit(r.start_line, col, r.start_line, col + len(written), toml_key(suggestion))
            return {"title": f"Rename to '{suggestion}'", "edits": [edit]}
    return None
