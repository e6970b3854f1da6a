"""Issue 32 item 1 (the reader's half): external data referenced from anywhere in a model — a Constant's `value`
attribute, an If branch's initializer, a Constant two If levels deep, a Loop body, a sparse initializer, a local
function — is listed by the wire-format reader, so the engine key covers its bytes (a changed weight is never served
a stale engine) and `trtls check` locates a missing file wherever it is referenced from."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx.external_data_helper import _get_all_tensors, uses_external_data

from tests.onnx_files.external_layouts import LAYOUTS, build
from trtls.cli.main import main
from trtls.onnx_files.onnx_reader import read_model_inputs
from trtls.store.key import engine_key


def _flip_one_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_the_reader_lists_every_external_reference_onnx_itself_finds(tmp_path: Path, layout: str) -> None:
    model_path, place = build(tmp_path / layout, layout)
    ours = {e.location for e in read_model_inputs(model_path).external}
    model = onnx.load(str(model_path), load_external_data=False)
    theirs = {
        {entry.key: entry.value for entry in t.external_data}["location"]
        for t in _get_all_tensors(model)
        if uses_external_data(t)
    }
    assert place in ours
    assert theirs <= ours, "every tensor onnx's own helper would load from a file is one the key hashes"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_changing_one_byte_of_any_external_file_changes_the_engine_key(tmp_path: Path, layout: str) -> None:
    """The stale-engine report: weights of a Constant or an If branch changed, the key stayed, the old engine was
    served as 'up to date'."""
    model_path, place = build(tmp_path / layout, layout)
    job = {"onnx": str(model_path), "settings": {}, "profiles": []}
    before = engine_key(job, None)
    assert place in before.parts["files"]["external"]
    _flip_one_byte(model_path.parent / place)
    after = engine_key(job, None)
    assert after.hex != before.hex
    assert after.parts["files"]["external"][place] != before.parts["files"]["external"][place]


def test_the_key_covers_a_constant_and_an_if_branch_in_one_model_each_on_its_own(tmp_path: Path) -> None:
    """Both places at once: each file counts, not only the first one found."""
    folder = tmp_path / "both"
    model_path, _ = build(folder, "if-branch")
    model = onnx.load(str(model_path), load_external_data=False)
    constant, _ = build(tmp_path / "c", "constant")
    const_node = onnx.load(str(constant), load_external_data=False).graph.node[0]
    (folder / "constant.bin").write_bytes((tmp_path / "c" / "constant.bin").read_bytes())
    model.graph.node.insert(0, const_node)
    model.graph.output.append(onnx.helper.make_tensor_value_info("cw", onnx.TensorProto.FLOAT, [4]))
    onnx.save(model, str(model_path))
    onnx.checker.check_model(str(model_path))
    job = {"onnx": str(model_path)}
    keys = [engine_key(job, None).hex]
    for name in ("constant.bin", "if-branch.bin"):
        _flip_one_byte(folder / name)
        keys.append(engine_key(job, None).hex)
    assert len(set(keys)) == 3


def _recipe(folder: Path) -> Path:
    recipe = folder / "trtls.toml"
    recipe.write_text('[engines.m]\nonnx = "model.onnx"\noutput = "build/m.engine"\n')
    return recipe


@pytest.mark.parametrize("layout", ["if-branch", "nested-if-constant", "loop-body-constant", "function"])
def test_check_reports_a_subgraphs_missing_external_file_located(
    tmp_path: Path, layout: str, capsys: pytest.CaptureFixture[str]
) -> None:
    model_path, place = build(tmp_path / layout, layout)
    recipe = _recipe(model_path.parent)
    assert main(["check", str(recipe)]) == 0, capsys.readouterr()
    capsys.readouterr()
    (model_path.parent / place).unlink()
    assert main(["check", str(recipe)]) == 2
    out = capsys.readouterr().out
    assert f"{recipe}:2:8: TRT111 error: external data file {model_path.parent / place} missing" in out, out
    where = {
        "if-branch": "initializer 'tw' in If node 'if0' › then_branch",
        "nested-if-constant": "Constant node 'deep' in If node 'if0' › then_branch › If node 'if_inner' › then_branch",
        "loop-body-constant": "Constant node 'k' in Loop node 'loop0' › body",
        "function": "Constant node 'fc' in function 'AddWeights'",
    }[layout]
    assert where in out, out
