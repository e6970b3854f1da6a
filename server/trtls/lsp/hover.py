"""The hover over a recipe: a key's own words (its field's type, description, values and default, from the pydantic
model), the model's declared inputs under an input name or on `onnx` (read in a thread by the server:
`read_in_thread`), on `onnx` what TensorRT said at the engine's last recorded build, and on the engine's table
and its memory keys the peak memory of its last build (`memory_hover`, in the same thread: report/memory_lens.py);
on the engine's table and the keys that decide it, the compute capabilities it will load on (core.loads_on)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from trtls.core.recipe import LoadedRecipe
from trtls.lsp.editor import enum_values, model_for_table, type_name

_READ_NOW = "read now"  # `hover_at` reads the declared inputs itself (the CLI and tests; the server reads first)


def declared_hover(loaded: LoadedRecipe, line: int, col: int) -> str | None:
    """The model's declared inputs for the key at (line, col), or None: it reads the model (a cache miss opens the
    ONNX file), so the server calls it in a thread and hands the answer to `hover_at`."""
    hit = loaded.source_map.path_at(line, col)
    if hit is None:
        return None
    from trtls.onnx_files.assist import hover_text

    return hover_text(loaded, hit[0], hit[1])


def hover_at(
    loaded: LoadedRecipe,
    line: int,
    col: int,
    recorded: Callable[[Path], dict[str, str]] | None = None,
    declared: str | None = _READ_NOW,
    memory: str | None = _READ_NOW,
) -> str | None:
    """The hover at (line, col); `recorded`: where the recipe's recorded runs come from, as for `code_lenses`;
    `declared`: `declared_hover`'s answer when the caller read it already (off the event loop); `memory`:
    `memory_hover`'s, likewise."""
    if memory is _READ_NOW:
        memory = memory_hover(loaded, line, col, recorded)
    text = _hover(loaded, line, col, recorded, declared)
    if memory is None:
        return text
    return f"{text}\n\n---\n\n{memory}" if text else memory


def memory_hover(
    loaded: LoadedRecipe, line: int, col: int, recorded: Callable[[Path], dict[str, str]] | None = None
) -> str | None:
    """On an engine's table or one of its memory keys: the peak memory of its last recorded build and of the builds of
    the same settings (report/memory_lens.py); it reads the build's record and the history, so the server calls it in
    a thread."""
    from trtls.report.capability_lens import latest_runs
    from trtls.report.memory_lens import is_memory_path, recorded_peak_text

    hit = loaded.source_map.path_at(line, col)
    if hit is None or not is_memory_path(hit[0]):
        return None
    build_id = (recorded or latest_runs)(loaded.path).get(str(hit[0][1]))
    said = recorded_peak_text(loaded.path, build_id) if build_id is not None else None
    return f"**Memory** · {said}" if said else None


def _hover(
    loaded: LoadedRecipe,
    line: int,
    col: int,
    recorded: Callable[[Path], dict[str, str]] | None,
    declared: str | None,
) -> str | None:
    hit = loaded.source_map.path_at(line, col)
    if hit is None:
        return None
    path, _ = hit
    if declared is _READ_NOW:
        declared = declared_hover(loaded, line, col)
    if len(path) == 3 and path[0] == "engines" and path[2] == "onnx":  # what TensorRT said of it, as recorded
        said = _recorded_capability(loaded, str(path[1]), recorded)
        above = declared or _key_hover(path)
        if said is not None:
            return f"{above}\n\n---\n\n{said}" if above else said
    text = declared if declared is not None else _key_hover(path)
    loads = _loads_on(loaded, path)
    return f"{text}\n\n---\n\n{loads}" if text and loads else text or loads


# the keys whose hover says where the engine will load (the engine's header, and the keys that decide it)
_LOADS_ON_KEYS = frozenset(
    {(), ("builder_module",), ("builder",), ("builder", "compute_capabilities")}
    | {("builder", "hardware_compatibility_level")}
)


def _loads_on(loaded: LoadedRecipe, path: tuple) -> str | None:
    """Before the build: the compute capabilities the engine will load on (core.loads_on's words)."""
    from trtls.core.loads_on import engine_loads_on

    keys = tuple(p for p in path[2:] if not isinstance(p, int))
    if len(path) < 2 or path[0] != "engines" or keys not in _LOADS_ON_KEYS or loaded.recipe is None:
        return None
    eng = loaded.recipe.engines.get(str(path[1]))
    return f"**Will load on** (compute capabilities): {engine_loads_on(eng).text()}" if eng is not None else None


def _key_hover(path: tuple) -> str | None:
    """The recipe key's own words: its field's type, description, values and default (from the pydantic model)."""
    keys = [p for p in path if not isinstance(p, int)]
    if not keys:
        return None
    model = model_for_table(tuple(path[:-1]) if not isinstance(path[-1], int) else tuple(path[:-2]))
    key = str(keys[-1])
    if model is None or key not in model.model_fields:
        if len(path) == 2 and path[0] == "engines":
            return f"**engine `{path[1]}`** — built by `trtls build --engine {path[1]}` or the Build Engine lens."
        return None
    info = model.model_fields[key]
    text = f"**{key}** · `{type_name(info.annotation)}`\n\n{info.description or ''}"
    values = enum_values(info.annotation)
    if values:
        text += "\n\nOne of: " + ", ".join(f"`{v}`" for v in values)
    if info.default is not None and not callable(info.default) and str(info.default) != "PydanticUndefined":
        text += f"\n\nDefault: `{info.default}`"
    return text


def _recorded_capability(
    loaded: LoadedRecipe, engine: str, recorded: Callable[[Path], dict[str, str]] | None
) -> str | None:
    """The capability answer of the engine's last recorded build (report/capability_lens.py's words), with whether
    the model is still the one that build read (lsp/recorded_runs.model_since: any outcome's record names it)."""
    from trtls.lsp.recorded_runs import model_since
    from trtls.report.capability_lens import capability_hover, latest_runs, recorded_answer

    build_id = (recorded or latest_runs)(loaded.path).get(engine)
    found = recorded_answer(loaded.path, build_id) if build_id is not None else None
    if build_id is None or found is None:
        return None
    summary, answer = found
    return capability_hover(engine, build_id, summary, answer, model_since(loaded, engine, summary))


def read_in_thread(
    loaded: LoadedRecipe, line: int, col: int, runs: dict[str, str] | None
) -> tuple[str | None, str | None]:
    """`declared_hover` and `memory_hover` as the server runs them, in a thread, held there by the test hook
    (`TRTLS_TEST_PAUSE=model_inputs:<folder>`, tests only). `runs`: the server's last reading of the recorded runs
    (lsp/recorded_runs.RecordedRuns.latest, asked on the event loop before the thread starts)."""
    from trtls.lsp.recorded_runs import pause_for_test

    pause_for_test("model_inputs", str(loaded.path))
    return declared_hover(loaded, line, col), memory_hover(loaded, line, col, None if runs is None else lambda _: runs)
