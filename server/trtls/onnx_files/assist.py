"""What the editor shows about a model's inputs: hover text and the input names to complete (no LSP types).

Completion runs on raw text (a half-typed line is not TOML), so the engine's `onnx` path is found by scanning
the text, not by the parser; hover runs on the last parse. Both read the model through the shared cache.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from trtls.core.display import human_bytes
from trtls.core.recipe import LoadedRecipe
from trtls.core.toml_bounded import TomlPath
from trtls.onnx_files.fixes import _inline, fill_shapes, toml_key
from trtls.onnx_files.onnx_reader import CACHE, GraphInput, ModelInputs, ModelInputsCache, NotOnnx

_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?")
_ONNX = re.compile(r"""^\s*onnx\s*=\s*(?:"((?:[^"\\]|\\.)*)"|'([^']*)')""")
_GIVEN = re.compile(r"""^\s*inputs\.("(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_-]+)\s*=""")


def _header_path(text: str) -> tuple[str, ...]:
    return tuple(p.strip().strip("\"'") for p in re.split(r"\.(?=(?:[^\"]*\"[^\"]*\")*[^\"]*$)", text))


def onnx_of_engine_in_text(text: str, engine: str) -> str | None:
    """The `onnx = "…"` of `[engines.ENGINE]`, read from raw text (works while other lines are half typed)."""
    inside = False
    for line in text.splitlines():
        m = _HEADER.match(line)
        if m:
            inside = _header_path(m.group(1)) == ("engines", engine)
            continue
        if inside:
            v = _ONNX.match(line)
            if v:
                return v.group(1) if v.group(1) is not None else v.group(2)
    return None


def model_for_engine(recipe_path: Path, text: str, engine: str, cache: ModelInputsCache = CACHE) -> ModelInputs | None:
    onnx = onnx_of_engine_in_text(text, engine)
    if onnx is None:
        return None
    try:
        return cache.get((recipe_path.parent / onnx).resolve())
    except (NotOnnx, OSError):
        return None


def describe(item: GraphInput, model: ModelInputs) -> str:
    dynamic = "dynamic: every profile must give it" if item.is_dynamic else "static: a profile may only repeat it"
    return f"**{item.name}** · `{item.dtype}` `{item.shape_text()}` — declared in `{model.path.name}` ({dynamic})"


def hover_text(loaded: LoadedRecipe, path: TomlPath, is_value: bool, cache: ModelInputsCache = CACHE) -> str | None:
    """The declared shape and dtype of the input under the cursor, or the model's inputs on its `onnx` value."""
    if len(path) < 3 or path[0] != "engines":
        return None
    engine = str(path[1])
    model = model_for_engine(loaded.path, loaded.text, engine, cache)
    if model is None:
        return None
    if path[2:] == ("onnx",):
        rows = "\n".join(f"- `{i.name}` · `{i.dtype}` `{i.shape_text()}`" for i in model.inputs)
        return f"**{model.path.name}** ({human_bytes(model.size)}, IR {model.ir_version}) inputs:\n\n{rows}"
    rest = path[2:]
    name: str | None = None
    if len(rest) >= 4 and rest[0] == "profiles" and rest[2] == "inputs":
        name = str(rest[3])
    elif len(rest) == 3 and rest[0] == "profiles" and rest[2] == "input" and is_value:
        profiles = loaded.data.get("engines", {}).get(engine, {}).get("profiles")
        if isinstance(profiles, list) and isinstance(rest[1], int) and rest[1] < len(profiles):
            raw = profiles[rest[1]]
            name = raw.get("input") if isinstance(raw, dict) else None
    if not isinstance(name, str):
        return None
    item = model.input(name)
    if item is None:
        return f"`{model.path.name}` has no input `{name}` (inputs: {', '.join(model.names) or 'none'})"
    return describe(item, model)


@dataclass(frozen=True)
class InputCompletion:
    label: str  # what the list shows
    insert_text: str
    detail: str  # dtype and declared shape
    documentation: str


def input_completions(
    model: ModelInputs, lines: list[str], line: int, col: int, profile_start: int
) -> list[InputCompletion]:
    """Input names for a profile table: after `inputs.`, at a new key, or as the shorthand's `input = ` value."""
    before = lines[line][:col] if line < len(lines) else ""
    given = set()
    for n, other in enumerate(lines[profile_start + 1 :], start=profile_start + 1):
        if n == line:
            continue  # the line being typed
        header = _HEADER.match(other)
        if header:  # a `[engines.X.profiles.inputs.NAME]` sub-table belongs to this profile; any other ends it
            parts = _header_path(header.group(1))
            if other.lstrip().startswith("[[") or len(parts) < 2 or parts[-2] != "inputs":
                break
            given.add(parts[-1])
            continue
        m = _GIVEN.match(other)
        if m:
            given.add(m.group(1).strip("\"'"))
    candidates = [i for i in model.inputs if i.name not in given]
    value = re.match(r"^\s*input\s*=\s*[\"']?[\w.-]*$", before)
    dotted = re.match(r"^\s*inputs\.[\w\"'.-]*$", before)
    owner = next((n for n in range(line, profile_start - 1, -1) if n < len(lines) and _HEADER.match(lines[n])), None)
    fresh = owner == profile_start and (before.strip() == "" or re.match(r"^\s*[\w-]+$", before))
    out: list[InputCompletion] = []
    for item in candidates:
        shapes, _ = fill_shapes(item, {})
        detail = f"{item.dtype} {item.shape_text()}"
        doc = f"Input of {model.path.name}" + ("" if item.is_dynamic else " (static)")
        if value:
            quoted = '"' + item.name + '"'
            out.append(InputCompletion(quoted, quoted if '"' not in before else item.name, detail, doc))
        elif dotted:
            out.append(InputCompletion(item.name, f"{toml_key(item.name)} = {_inline(shapes)}", detail, doc))
        elif fresh:
            out.append(
                InputCompletion(f"inputs.{item.name}", f"inputs.{toml_key(item.name)} = {_inline(shapes)}", detail, doc)
            )
    return out


def profile_at(lines: list[str], line: int) -> tuple[str, int] | None:
    """(engine, line of its `[[engines.ENGINE.profiles]]` header) when `line` is inside a profile."""
    for n in range(min(line, len(lines) - 1), -1, -1):
        header = _HEADER.match(lines[n])
        if not header:
            continue
        parts = _header_path(header.group(1))
        if lines[n].lstrip().startswith("[[") and len(parts) == 3 and parts[0] == "engines" and parts[2] == "profiles":
            return parts[1], n
        if not (len(parts) >= 5 and parts[0] == "engines" and parts[2] == "profiles" and parts[3] == "inputs"):
            return None
    return None
