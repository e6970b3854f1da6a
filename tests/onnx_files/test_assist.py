"""Hover text and input-name completion for profiles, as plain functions (the LSP layer only wraps them)."""

from __future__ import annotations

from pathlib import Path

from trtls.core.recipe import load_recipe
from trtls.onnx_files.assist import hover_text, input_completions, model_for_engine, onnx_of_engine_in_text, profile_at
from trtls.onnx_files.onnx_reader import ModelInputsCache

TEXT = """\
[engines.enc]
onnx = "models/encoder.onnx"
output = "e.engine"

[[engines.enc.profiles]]
inputs.input_ids = { min = [1, 1], opt = [2, 8], max = [4, 16] }

[[engines.enc.profiles]]
[engines.enc.profiles.inputs.attention_mask]
min = [1, 1]
opt = [1, 1]
max = [1, 1]

[engines.tok]
onnx = 'models/tokens.onnx'
output = "t.engine"

[[engines.tok.profiles]]
input = "tokens"
min = [1, 16]
opt = [1, 16]
max = [1, 16]
"""


def test_hover_on_input_names_and_on_onnx(models_ws: Path) -> None:
    path = models_ws / "check.toml"
    path.write_text(TEXT)
    loaded = load_recipe(path)
    cache = ModelInputsCache()
    ids = hover_text(loaded, ("engines", "enc", "profiles", 0, "inputs", "input_ids"), False, cache)
    assert ids is not None and "`int64` `[batch, seq]`" in ids and "dynamic" in ids
    sub = hover_text(loaded, ("engines", "enc", "profiles", 1, "inputs", "attention_mask"), False, cache)
    assert sub is not None and "**attention_mask**" in sub
    tok = hover_text(loaded, ("engines", "tok", "profiles", 0, "input"), True, cache)
    assert tok is not None and "`[batch, 16]`" in tok
    onnx = hover_text(loaded, ("engines", "enc", "onnx"), True, cache)
    assert onnx is not None and "`input_ids` · `int64` `[batch, seq]`" in onnx and "`attention_mask`" in onnx
    assert hover_text(loaded, ("engines", "enc", "output"), True, cache) is None
    assert cache.reads == 2, "each model read once, then from the cache"


def test_completion_positions(models_ws: Path) -> None:
    assert onnx_of_engine_in_text(TEXT, "tok") == "models/tokens.onnx"
    model = model_for_engine(models_ws / "trtls.toml", TEXT, "enc")
    assert model is not None and model.names == ["input_ids", "attention_mask"]
    lines = (TEXT.split("[engines.tok]")[0] + "inputs.\n").splitlines()
    where = profile_at(lines, len(lines) - 1)
    assert where == ("enc", 7), "inside the second profile (its sub-table counts as the profile)"
    # the second profile already has attention_mask (in a sub-table): only input_ids is offered
    dotted = input_completions(model, lines, len(lines) - 1, len("inputs."), where[1])
    assert [c.label for c in dotted] == ["input_ids"] and dotted[0].insert_text.startswith("input_ids = { min = [1, 1]")
    first = TEXT.split("[[engines.enc.profiles]]\n[engines")[0].splitlines() + [""]
    fresh = input_completions(model, first, len(first) - 1, 0, profile_at(first, len(first) - 1)[1])  # type: ignore[index]
    assert [c.label for c in fresh] == ["inputs.attention_mask"]
    value = ["[[engines.enc.profiles]]", 'input = "']
    names = input_completions(model, value, 1, len(value[1]), 0)
    assert {c.label for c in names} == {'"input_ids"', '"attention_mask"'}
    assert {c.insert_text for c in names} == {"input_ids", "attention_mask"}, "the quote is already typed"
    assert profile_at(["[engines.enc]", "onnx = 1"], 1) is None
