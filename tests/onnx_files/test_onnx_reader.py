"""The wire-format reader against onnx's own parser, on real files: inputs, dims, dtypes, external data, and
every way a file can fail to be ONNX."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from trtls.onnx_files.onnx_reader import ModelInputsCache, NotOnnx, read_model_inputs


def _declared(path: Path) -> list[tuple[str, str, list]]:
    """What onnx.load says: (name, dtype, dims with dim_param or dim_value or None) of the non-initializer inputs."""
    model = onnx.load(str(path), load_external_data=False)
    inits = {i.name for i in model.graph.initializer}
    out = []
    for v in model.graph.input:
        if v.name in inits:
            continue
        t = v.type.tensor_type
        dtype = helper.tensor_dtype_to_np_dtype(t.elem_type).name
        dims = [
            d.dim_param or (d.dim_value if d.HasField("dim_value") and d.dim_value >= 0 else None) for d in t.shape.dim
        ]
        out.append((v.name, dtype, dims))
    return out


def _ours(path: Path) -> list[tuple[str, str, list]]:
    m = read_model_inputs(path)
    return [(i.name, i.dtype, [d.param or d.value for d in i.dims or ()]) for i in m.inputs]


def test_matches_onnx_on_every_sample_model(sample_models: Path, quickstart_models: Path) -> None:
    paths = sorted(sample_models.glob("*.onnx")) + sorted(quickstart_models.glob("*.onnx"))
    assert len(paths) >= 6
    for path in paths:
        assert _ours(path) == _declared(path), path.name
    enc = read_model_inputs(sample_models / "encoder.onnx")
    assert [(i.name, i.dtype, i.shape_text(), i.is_dynamic) for i in enc.inputs] == [
        ("input_ids", "int64", "[batch, seq]", True),
        ("attention_mask", "int64", "[batch, seq]", True),
    ]
    assert enc.opsets == {"ai.onnx": 17} and enc.ir_version == 8


def _model(path: Path, inputs: list, inits: list | None = None, ir: int = 8) -> Path:
    nodes = [helper.make_node("Identity", [inputs[0].name], ["y"])]
    graph = helper.make_graph(
        nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits or []
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = ir
    onnx.save(model, path)
    return path


def test_static_unnamed_and_negative_dims_and_initializers_listed_as_inputs(tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT16, [None, 3, -1, "w"])
    w = helper.make_tensor_value_info("w0", TensorProto.FLOAT, [4])
    noshape = helper.make_tensor_value_info("free", TensorProto.BOOL, None)
    init = numpy_helper.from_array(np.ones(4, np.float32), "w0")
    m = read_model_inputs(_model(tmp_path / "m.onnx", [x, w, noshape], [init], ir=3))
    assert [i.name for i in m.inputs] == ["x", "free"], "an initializer listed as an input is a weight, not an input"
    x_in = m.input("x")
    assert x_in is not None and x_in.dtype == "float16" and x_in.shape_text() == "[?, 3, ?, w]"
    assert [d.is_static for d in x_in.dims or ()] == [False, True, False, False]
    free = m.input("free")
    assert free is not None and free.dims is None and free.rank is None and free.is_dynamic
    assert m.initializer_count == 1


def test_external_data_missing_and_short(sample_models: Path, tmp_path: Path) -> None:
    folder = tmp_path / "ext"
    folder.mkdir()
    (folder / "external.onnx").write_bytes((sample_models / "external.onnx").read_bytes())
    data = (sample_models / "external.onnx.data").read_bytes()
    m = read_model_inputs(folder / "external.onnx")
    assert m.external and {e.location for e in m.external} == {"external.onnx.data"}
    problems = m.external_problems()
    assert len(problems) == 1 and "external data file" in problems[0] and "missing" in problems[0]
    (folder / "external.onnx.data").write_bytes(data[: len(data) // 2])
    problems = m.external_problems()
    assert len(problems) == 1 and f"{len(data) // 2} bytes" in problems[0]
    (folder / "external.onnx.data").write_bytes(data)
    assert m.external_problems() == []


@pytest.mark.parametrize(
    "content,why",
    [
        (b"", "empty"),
        (b"this is a text file, not a model\n" * 3, None),
        (b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4, None),
        (b"\x08\x08", "no graph"),  # ir_version only
    ],
    ids=["empty", "text", "png", "no-graph"],
)
def test_not_onnx(tmp_path: Path, content: bytes, why: str | None) -> None:
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    with pytest.raises(NotOnnx, match=why):
        read_model_inputs(path)


def test_every_truncation_is_caught(sample_models: Path, tmp_path: Path) -> None:
    """Cut the encoder anywhere: the reader says it is not ONNX (truncated), never returns half a graph."""
    whole = (sample_models / "encoder.onnx").read_bytes()
    path = tmp_path / "cut.onnx"
    for cut in sorted({1, 2, 10, 100, len(whole) // 3, len(whole) // 2, len(whole) - 100, len(whole) - 1}):
        path.write_bytes(whole[:cut])
        with pytest.raises(NotOnnx):
            read_model_inputs(path)


def test_cache_reads_once_per_size_and_mtime(sample_models: Path, tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    path.write_bytes((sample_models / "tokens.onnx").read_bytes())
    cache = ModelInputsCache()
    first = cache.get(path)
    assert cache.get(path) is first and cache.reads == 1
    path.write_bytes((sample_models / "detector.onnx").read_bytes())
    os.utime(path, ns=(1, 1))
    assert cache.get(path).names == ["images"] and cache.reads == 2
    path.write_bytes(b"garbage")
    with pytest.raises(NotOnnx):
        cache.get(path)
    with pytest.raises(NotOnnx):
        cache.get(path)
    assert cache.reads == 3, "a bad file's error is cached too"
