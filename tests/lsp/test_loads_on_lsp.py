"""Will it load there, in the editor before any build (issue 33): the engine's lens and hover say the compute
capabilities it will load on, in core.loads_on's words (the one rule; tests/core/test_loads_on.py)."""

from __future__ import annotations

from pathlib import Path

from tests.lsp.lsp_helpers import write_static_onnx
from trtls.core.recipe import load_recipe
from trtls.lsp.editor import code_lenses
from trtls.lsp.hover import hover_at

RECIPE = """version = 1

[engines.rtx]
onnx = "m.onnx"
output = "build/rtx.engine"
builder_module = "tensorrt_rtx"

[engines.sm89]
onnx = "m.onnx"
output = "build/sm89.engine"
builder_module = "tensorrt_rtx"
builder = { compute_capabilities = ["SM89"] }

[engines.auto]
onnx = "m.onnx"
output = "build/auto.engine"
"""


def test_the_engine_lens_says_where_it_will_load(tmp_path: Path) -> None:
    write_static_onnx(tmp_path / "m.onnx")
    (tmp_path / "trtls.toml").write_text(RECIPE)
    loaded = load_recipe(tmp_path / "trtls.toml")
    assert loaded.recipe is not None, loaded.findings
    lenses = code_lenses(loaded, "file:///x", {}, {}, recorded=lambda _: {})
    said = {lens.range.start.line: lens.command.title for lens in lenses if lens.command and lens.command.command == ""}
    assert said == {
        2: "loads on 8.0 8.6 8.9 12.0 12.1 >12.0 (builder default (TensorRT-RTX))",
        7: 'loads on 8.9 (compute_capabilities = ["SM89"])',
    }  # `auto`: which module builds it is not known before the build, so no lens claims it


def test_the_hover_on_the_engine_and_the_keys_that_decide_it(tmp_path: Path) -> None:
    write_static_onnx(tmp_path / "m.onnx")
    (tmp_path / "trtls.toml").write_text(RECIPE)
    loaded = load_recipe(tmp_path / "trtls.toml")
    assert loaded.recipe is not None, loaded.findings

    def hover(line: int, col: int) -> str:
        return hover_at(loaded, line, col, recorded=lambda _: {}, declared=None, memory=None) or ""

    assert "**Will load on** (compute capabilities): 8.0 8.6 8.9 12.0 12.1 >12.0" in hover(2, 3)
    key = hover(11, 15)  # on compute_capabilities: the key's own words, then where it loads
    assert key.startswith("**compute_capabilities**") and key.endswith(
        '**Will load on** (compute capabilities): 8.9 (compute_capabilities = ["SM89"])'
    )
    assert 'not known before the build: builder_module = "auto"' in hover(13, 3)
    assert "Will load on" not in hover(4, 2)  # on `output`: nothing to say about it
