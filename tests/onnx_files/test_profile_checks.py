"""The recipe checked against the real sample models (no LSP): each problem located, each quick fix applied to
the text and re-checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from trtls.core.tomlpos import apply_edits
from trtls.onnx_files.onnx_reader import ModelInputsCache
from trtls.onnx_files.profile_checks import check_recipe

ENCODER = """\
[engines.enc]
onnx = "models/encoder.onnx"
output = "build/enc.engine"

[[engines.enc.profiles]]   # short
inputs.input_ids = { min = [1, 1], opt = [2, 64], max = [4, 128] }
inputs.attention_mask = { min = [1, 1], opt = [2, 64], max = [4, 128] }
"""


def check(ws: Path, text: str):
    path = ws / "check.toml"
    path.write_text(text)
    return check_recipe(path, cache=ModelInputsCache())


def where(loaded, code: str) -> list[str]:
    return [loaded.source_map.range(f.path, f.on_value).human() for f in loaded.findings if f.code == code]


def apply_fix(text: str, fix: dict) -> str:
    return apply_edits(text, fix["edits"])


def test_a_good_two_input_recipe_is_clean(models_ws: Path) -> None:
    loaded = check(models_ws, ENCODER)
    assert loaded.findings == [] and loaded.recipe is not None


def test_the_shipped_sample_is_clean(models_ws: Path) -> None:
    loaded = check_recipe(models_ws / "trtls.toml", cache=ModelInputsCache())
    assert loaded.findings == []


def test_missing_input_is_located_on_the_profile_and_the_fix_copies_dims(models_ws: Path) -> None:
    text = ENCODER.replace("inputs.attention_mask = { min = [1, 1], opt = [2, 64], max = [4, 128] }\n", "")
    loaded = check(models_ws, text)
    assert loaded.recipe is None
    assert where(loaded, "TRT113") == ["5:1"]
    finding = next(f for f in loaded.findings if f.code == "TRT113")
    assert "attention_mask" in finding.message and "[batch, seq]" in finding.message
    fixed = apply_fix(text, finding.data["fix"])
    assert "inputs.attention_mask = { min = [1, 1], opt = [2, 64], max = [4, 128] }" in fixed, fixed
    assert fixed.index("attention_mask") > fixed.index("inputs.input_ids"), "inserted after the profile's keys"
    assert check(models_ws, fixed).findings == []


def test_a_shorthand_profile_is_rewritten_to_hold_the_second_input(models_ws: Path) -> None:
    text = ENCODER.replace(
        ENCODER[ENCODER.index("inputs.input_ids") :],
        'input = "input_ids"\nmin = [1, 1]\nopt = [1, 8]\nmax = [2, 16]\n\n'
        '[engines.other]\nonnx = "models/tokens.onnx"\n'
        'output = "build/t.engine"\nprofiles = [{ input = "tokens", min = [1, 16], opt = [1, 16], max = [1, 16] }]\n',
    )
    loaded = check(models_ws, text)
    assert where(loaded, "TRT113") == ["5:1"]
    fixed = apply_fix(text, next(f for f in loaded.findings if f.code == "TRT113").data["fix"])
    assert "inputs.input_ids = { min = [1, 1], opt = [1, 8], max = [2, 16] }" in fixed
    assert "inputs.attention_mask = { min = [1, 1], opt = [1, 8], max = [2, 16] }" in fixed
    assert 'input = "input_ids"' not in fixed
    assert check(models_ws, fixed).findings == []


def test_no_profile_at_all_and_the_inserted_profile(models_ws: Path) -> None:
    text = (
        ENCODER[: ENCODER.index("[[engines.enc.profiles]]")]
        + '[engines.det]\nonnx = "models/detector.onnx"\noutput = "d.engine"\n'
    )
    loaded = check(models_ws, text)
    assert sorted(where(loaded, "TRT113")) == ["1:1", "5:1"]
    enc = next(f for f in loaded.findings if f.code == "TRT113" and f.path == ("engines", "enc"))
    fixed = apply_fix(text, enc.data["fix"])
    assert "[[engines.enc.profiles]]\ninputs.input_ids = " in fixed and "guessed" in enc.data["fix"]["title"]
    assert fixed.index("[[engines.enc.profiles]]") < fixed.index("[engines.det]"), "inserted under its own engine"
    det = next(f for f in check(models_ws, fixed).findings if f.code == "TRT113")
    fixed = apply_fix(fixed, det.data["fix"])
    assert "inputs.images = { min = [1, 3, 1, 1], opt = [1, 3, 1, 1], max = [1, 3, 1, 1] }" in fixed, "static 3 kept"
    assert check(models_ws, fixed).findings == []


def test_inline_array_profile_gets_the_missing_input(models_ws: Path) -> None:
    text = ENCODER[: ENCODER.index("[[engines.enc.profiles]]")].replace(
        'output = "build/enc.engine"\n',
        'output = "build/enc.engine"\nprofiles = [{ input = "input_ids", min = [1, 4], opt = [1, 4], max = [1, 4] }]\n',
    )
    loaded = check(models_ws, text)
    fixed = apply_fix(text, next(f for f in loaded.findings if f.code == "TRT113").data["fix"])
    assert "attention_mask = { min = [1, 4]" in fixed
    assert check(models_ws, fixed).findings == []


@pytest.mark.parametrize(
    "old,new,code,at",
    [
        ("inputs.attention_mask =", "inputs.attention_mask_ =", "TRT112", "7:1"),
        ("inputs.input_ids = { min = [1, 1]", "inputs.input_ids = { min = [1, 1, 1]", "TRT114", "6:28"),
        ("max = [4, 128] }\ninputs.attention", "max = [4, 128, 2] }\ninputs.attention", "TRT114", "6:57"),
    ],
    ids=["unknown-name", "rank-min", "rank-max"],
)
def test_names_and_ranks(models_ws: Path, old: str, new: str, code: str, at: str) -> None:
    assert old in ENCODER
    loaded = check(models_ws, ENCODER.replace(old, new))
    assert at in where(loaded, code), [(f.code, loaded.location(f), f.message) for f in loaded.findings]
    assert loaded.recipe is None


def test_misspelt_name_fix_renames_it(models_ws: Path) -> None:
    for old, new in (
        ("inputs.attention_mask =", "inputs.atention_mask ="),
        ("inputs.attention_mask =", 'inputs."attention-mask" ='),
    ):
        loaded = check(models_ws, ENCODER.replace(old, new))
        f = next(f for f in loaded.findings if f.code == "TRT112")
        assert f.data["suggestion"] == "attention_mask" and "did you mean 'attention_mask'" in f.message
        assert check(models_ws, apply_fix(ENCODER.replace(old, new), f.data["fix"])).findings == []
    text = '[engines.t]\nonnx = "models/tokens.onnx"\noutput = "t.engine"\n[[engines.t.profiles]]\ninput = "token"\n'
    text += "min = [1, 16]\nopt = [1, 16]\nmax = [1, 16]\n"
    loaded = check(models_ws, text)
    f = next(f for f in loaded.findings if f.code == "TRT112")
    assert where(loaded, "TRT112") == ["5:9"]
    assert check(models_ws, apply_fix(text, f.data["fix"])).findings == []


def test_static_dims_must_match(models_ws: Path) -> None:
    text = '[engines.t]\nonnx = "models/tokens.onnx"\noutput = "t.engine"\n[[engines.t.profiles]]\ninput = "tokens"\n'
    text += "min = [1, 16]\nopt = [1, 16]\nmax = [4, 32]\n"
    loaded = check(models_ws, text)
    assert where(loaded, "TRT115") == ["8:11"]
    assert "fixes it at 16" in next(f.message for f in loaded.findings if f.code == "TRT115")


def test_min_opt_max_still_checked_with_a_model(models_ws: Path) -> None:
    loaded = check(
        models_ws,
        ENCODER.replace("opt = [2, 64], max = [4, 128] }\ninputs.att", "opt = [8, 64], max = [4, 128] }\ninputs.att"),
    )
    assert "6:43" in where(loaded, "TRT105")


def test_other_engines_are_checked_while_one_is_broken(models_ws: Path) -> None:
    """As you type, one engine's typo must not hide another engine's model problems."""
    text = ENCODER.replace("inputs.attention_mask", "inputs.attention_masc") + "\n[engines.broken]\nonnx = 3\n"
    loaded = check(models_ws, text)
    assert {"TRT102", "TRT112", "TRT113"} <= {f.code for f in loaded.findings}


@pytest.mark.parametrize(
    "damage,code,text",
    [
        ("text", "TRT110", "not a valid ONNX model"),
        ("truncated", "TRT110", "truncated"),
        ("no-data", "TRT111", "external data file"),
    ],
)
def test_bad_model_files_are_located_on_onnx(models_ws: Path, damage: str, code: str, text: str) -> None:
    models = models_ws / "models"
    if damage == "text":
        (models / "encoder.onnx").write_text("def main():\n    pass\n")
    elif damage == "truncated":
        data = (models / "encoder.onnx").read_bytes()
        (models / "encoder.onnx").write_bytes(data[: len(data) // 2])
    else:
        (models / "external.onnx.data").unlink()
    loaded = check_recipe(models_ws / "trtls.toml", cache=ModelInputsCache())
    found = [f for f in loaded.findings if f.code == code]
    assert len(found) == 1 and text in found[0].message, [f.message for f in loaded.findings]
    engine = "external" if damage == "no-data" else "encoder"
    assert found[0].path == ("engines", engine, "onnx") and found[0].on_value
    assert loaded.recipe is None
