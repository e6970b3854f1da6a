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


def test_tensors_sparse_and_graphs_attributes_of_any_node_are_walked(tmp_path: Path) -> None:
    """Attribute types TENSORS, SPARSE_TENSOR and GRAPHS (a custom op's, as a plugin may take them): the reader
    does not know ops, it reads every attribute that can hold a tensor."""
    import numpy as np
    from onnx import TensorProto, helper

    from tests.onnx_files.external_layouts import external

    def w(name: str, seed: float) -> TensorProto:
        return external(tmp_path, name, np.full(4, seed, np.float32), f"{name}.bin")

    body = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["z"])],
        "body",
        [],
        [helper.make_tensor_value_info("z", 1, [4])],
        [w("g", 4)],
    )
    node = helper.make_node(
        "MyPlugin", ["x"], ["y"], name="plugin0", domain="my.plugins",
        weights=[w("t1", 1), w("t2", 2)],
        mask=helper.make_sparse_tensor(w("sv", 3), helper.make_tensor("si", TensorProto.INT64, [1], [0]), [4]),
        bodies=[body],
    )  # fmt: skip
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", 1, [4])], [helper.make_tensor_value_info("y", 1, [4])]
    )
    path = tmp_path / "model.onnx"
    onnx.save(
        helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("my.plugins", 1)]),
        path,
    )
    found = {e.location: e.where for e in read_model_inputs(path).external}
    assert set(found) == {"t1.bin", "t2.bin", "sv.bin", "g.bin"}
    assert found["t2.bin"] == "tensor attribute 'weights' of MyPlugin node 'plugin0'"
    assert found["sv.bin"] == "sparse tensor attribute 'mask' of MyPlugin node 'plugin0'"
    assert found["g.bin"] == "initializer 'g' in MyPlugin node 'plugin0' › bodies"


def _field(number: int, payload: bytes) -> bytes:
    def varint(n: int) -> bytes:
        out = b""
        while True:
            out += bytes([(n & 0x7F) | (0x80 if n > 0x7F else 0)])
            n >>= 7
            if not n:
                return out

    return varint(number << 3 | 2) + varint(len(payload)) + payload


@pytest.mark.parametrize("depth", [500, 40])
def test_subgraphs_nested_past_any_real_model_are_not_onnx_not_a_crash(tmp_path: Path, depth: int) -> None:
    """A hostile file of 500 If bodies, one in the other (a few kilobytes): a located NotOnnx, never a
    RecursionError traceback. 40 levels: past what protobuf's parsers load (100 nested messages), which passed the
    check and failed the reduction's `onnx.load` (TRT983); 30 levels still read."""
    from trtls.onnx_files.onnx_reader import NotOnnx

    def nested(levels: int) -> Path:
        graph = b""
        for _ in range(levels):
            graph = _field(1, _field(4, b"If") + _field(5, _field(1, b"then_branch") + _field(6, graph)))
        path = tmp_path / f"deep{levels}.onnx"
        path.write_bytes(b"\x08\x08" + _field(7, graph))  # ir_version 8, graph
        return path

    with pytest.raises(NotOnnx, match="nested more than 30 deep"):
        read_model_inputs(nested(depth))
    assert read_model_inputs(nested(30)).ir_version == 8


def test_an_index_an_older_reader_wrote_is_not_taken_for_this_readers(tmp_path: Path) -> None:
    """`.trtls/onnx-external.json` from a checkout whose reader saw only the top graph's initializers: it recorded
    no external file for a model whose Constant reads one. Keyed by the model's sha alone, that record was trusted
    and the Constant's weights left out of the key again (a stale engine after an upgrade)."""
    import hashlib
    import json

    model_path, place = build(tmp_path / "m", "constant")
    state = tmp_path / "m" / ".trtls"
    state.mkdir()
    sha = hashlib.sha256(model_path.read_bytes()).hexdigest()
    (state / "onnx-external.json").write_text(json.dumps({sha: []}))  # what the old reader found: nothing
    key = engine_key({"onnx": str(model_path)}, state)
    assert place in key.parts["files"]["external"], key.parts["files"]
