"""Damaged ONNX files never crash the model checks: the wire-format reader returns the inputs or raises NotOnnx
(nothing else), and a recipe naming the file gets located findings only. Inputs: real models (the samples'
encoder and the quickstart's demo) with bytes flipped, cut, inserted or deleted anywhere."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trtls.onnx_files.onnx_reader import ModelInputs, ModelInputsCache, NotOnnx, read_model_inputs
from trtls.onnx_files.profile_checks import check_recipe

EXAMPLES = int(os.environ.get("TRTLS_FUZZ_EXAMPLES", "200"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

RECIPE = """\
[engines.m]
onnx = "m.onnx"
output = "m.engine"

[[engines.m.profiles]]
inputs.input_ids = { min = [1, 1], opt = [1, 8], max = [2, 16] }
"""


@st.composite
def damaged(draw: st.DrawFn, original: bytes) -> bytes:
    data = bytearray(original)
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "delete"]))
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip" and data:
            data[at] ^= draw(st.integers(1, 255))
        elif kind == "cut":
            del data[at:]
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif data:
            del data[at : at + draw(st.integers(1, 64))]
    return bytes(data)


def _models() -> list[bytes]:
    root = Path(__file__).resolve().parents[2] / "samples"
    return [
        (root / "models" / "models" / "encoder.onnx").read_bytes(),
        (root / "quickstart" / "models" / "demo.onnx").read_bytes(),
    ]


def _damaged_models() -> st.SearchStrategy[bytes]:
    return st.sampled_from([0, 1]).flatmap(lambda i: damaged(_models()[i]))


@FUZZ
@given(data=st.data())
def test_damaged_models_read_or_say_not_onnx(
    tmp_path: Path, sample_models: Path, quickstart_models: Path, data
) -> None:
    blob = data.draw(_damaged_models())
    path = tmp_path / "m.onnx"
    path.write_bytes(blob)
    try:
        assert isinstance(read_model_inputs(path), ModelInputs)
    except NotOnnx as exc:
        assert str(exc)
    (tmp_path / "trtls.toml").write_text(RECIPE)
    loaded = check_recipe(tmp_path / "trtls.toml", cache=ModelInputsCache())
    lines = RECIPE.split("\n")
    for f in loaded.findings:
        r = loaded.source_map.range(f.path, f.on_value)
        assert 0 <= r.start_line < len(lines) and f.message


@FUZZ
@given(blob=st.binary(max_size=512))
def test_random_bytes_never_crash_the_reader(tmp_path: Path, blob: bytes) -> None:
    path = tmp_path / "r.onnx"
    path.write_bytes(blob)
    try:
        read_model_inputs(path)
    except NotOnnx:
        pass
