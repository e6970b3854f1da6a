"""Issue 27: models, arrays and weights a user names are read through the door (`trtls.fs.models`), never by the
library's own open. A FIFO named as a model would hang `onnx.load`, a symlink to /dev/zero would fill memory; through
the door each is refused before a byte is read, with the path and why — and the same for a model's external data
file, an inputs .npz and a safetensors shard. Real FIFOs, real links to a real device, real files."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from trtls.core.paths import UnsafeWrite
from trtls.fs.models import NotAnArchive, load_npz, load_onnx, load_safetensors, require_regular


def _model(path: Path, *, external: bool = False) -> onnx.ModelProto:
    weight = numpy_helper.from_array(np.arange(4096, dtype=np.float32).reshape(64, 64), "W")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"], name="mm")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
        [weight],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    if external:
        onnx.save(model, str(path), save_as_external_data=True, location="weights.bin", size_threshold=0)
    else:
        onnx.save(model, str(path))
    return model


def _hostile(tmp_path: Path, name: str) -> list[Path]:
    """The same name as a FIFO and as a symlink to /dev/zero."""
    fifo = tmp_path / "fifo" / name
    fifo.parent.mkdir()
    os.mkfifo(fifo)
    zero = tmp_path / "zero" / name
    zero.parent.mkdir()
    zero.symlink_to("/dev/zero")
    return [fifo, zero]


def test_a_fifo_or_dev_zero_named_as_a_model_is_refused_before_a_byte_is_read(tmp_path: Path) -> None:
    for path in _hostile(tmp_path, "model.onnx"):
        with pytest.raises(UnsafeWrite) as caught:
            load_onnx(path)
        assert caught.value.errno == errno.EINVAL and caught.value.filename == str(path), caught.value
        assert "not a regular file" in str(caught.value), caught.value


def test_a_path_handed_to_tensorrts_parser_or_onnx_runtime_is_a_regular_file_first(tmp_path: Path) -> None:
    """TensorRT's parser and ONNX Runtime must be given the path (they read external data beside it): the worker's
    parse, the TensorRT layer check, the ONNX Runtime adapter and the golden recorder call `require_regular` first,
    which refuses what `load_onnx` refuses (tests/test_one_door.py fails on a call site without it)."""
    from trtls.builds.worker.adapter import parse_onnx

    for path in _hostile(tmp_path, "model.onnx"):
        with pytest.raises(UnsafeWrite, match="not a regular file"):
            require_regular(path)

        class _Trt:  # never reached: the parser is not built for a path the door refused
            def OnnxParser(self, *args: object) -> object:
                raise AssertionError("the parser was handed a FIFO or a device")

        bm = type("BM", (), {"trt": _Trt()})()
        errors = parse_onnx(bm, object(), object(), object(), path)
        assert errors == [f"{path}: is not a regular file (a FIFO, a device or a socket)"], errors
    _model(tmp_path / "ok.onnx")
    require_regular(tmp_path / "ok.onnx")


def test_a_model_and_its_external_data_read_through_the_door_equal_onnx_load(tmp_path: Path) -> None:
    _model(tmp_path / "inline.onnx")
    assert load_onnx(tmp_path / "inline.onnx") == onnx.load(str(tmp_path / "inline.onnx"))
    # the Hugging Face cache layout: the weights are a link into the repository's blobs — followed (TensorRT's parser
    # follows it; onnx >= 1.18 refuses any symlinked location), while it stays inside the repository's folder
    snap = tmp_path / "models--org--m" / "snapshots" / "rev"
    snap.mkdir(parents=True)
    _model(snap / "model.onnx", external=True)
    blobs = tmp_path / "models--org--m" / "blobs"
    blobs.mkdir()
    (snap / "weights.bin").rename(blobs / "sha")
    (snap / "weights.bin").symlink_to("../../blobs/sha")
    got = load_onnx(snap / "model.onnx")
    assert numpy_helper.to_array(got.graph.initializer[0]).tolist() == np.arange(4096).reshape(64, 64).tolist()
    assert not any(t.external_data for t in got.graph.initializer), "the weights are inline once read"
    bare = load_onnx(snap / "model.onnx", external_data=False)
    assert bare.graph.initializer[0].external_data, "without external data, the locations are kept as named"


def test_external_data_that_is_a_fifo_a_device_short_or_outside_the_folder_is_refused(tmp_path: Path) -> None:
    model = tmp_path / "model.onnx"
    _model(model, external=True)
    data = tmp_path / "weights.bin"
    whole = data.read_bytes()
    data.unlink()
    os.mkfifo(data)
    with pytest.raises(UnsafeWrite, match="not a regular file") as caught:
        load_onnx(model)
    assert caught.value.filename == str(data)
    data.unlink()
    data.symlink_to("/dev/zero")
    with pytest.raises(UnsafeWrite, match=r"leads out of .* \(to /dev/zero\)"):
        load_onnx(model)
    data.unlink()
    data.write_bytes(whole[:100])
    with pytest.raises(UnsafeWrite, match=r"shorter than tensor 'W' needs"):
        load_onnx(model)
    proto = onnx.load(str(model), load_external_data=False)
    for entry in proto.graph.initializer[0].external_data:
        if entry.key == "location":
            entry.value = "../outside.bin"
    (tmp_path / "sub").mkdir()
    onnx.save(proto, str(tmp_path / "sub" / "model.onnx"))
    (tmp_path / "outside.bin").write_bytes(whole)
    with pytest.raises(UnsafeWrite, match="outside the model's folder"):
        load_onnx(tmp_path / "sub" / "model.onnx")
    (tmp_path / "sub" / "weights.bin").symlink_to(tmp_path / "outside.bin")  # a link leading out of the tree
    onnx.save(onnx.load(str(model), load_external_data=False), str(tmp_path / "sub" / "model.onnx"))
    with pytest.raises(UnsafeWrite, match="leads out of") as caught:
        load_onnx(tmp_path / "sub" / "model.onnx")
    assert caught.value.errno == errno.EXDEV, caught.value


def test_an_inputs_npz_is_a_regular_zip_of_arrays(tmp_path: Path) -> None:
    for path in _hostile(tmp_path, "inputs.npz"):
        with pytest.raises(UnsafeWrite, match="not a regular file"):
            load_npz(path)
    np.save(tmp_path / "one.npy", np.zeros(3))  # np.load would read it as one array; an inputs file is an archive
    with pytest.raises(NotAnArchive):
        load_npz(tmp_path / "one.npy")
    np.savez(tmp_path / "ok.npz", x=np.ones((2, 3), np.float32))
    got = load_npz(tmp_path / "ok.npz")
    assert list(got) == ["x"] and got["x"].shape == (2, 3)


def test_an_inputs_npz_that_would_take_more_memory_than_it_holds_is_refused_before_loading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 1 MB .npz of deflated zeros took 1.1 GB and 9.5 s before its shape was judged; a 268-byte one whose array
    header claimed (100000, 100000) asked for 37 GiB (a MemoryError, 'the reduction failed'). Both are refused before
    a byte is decompressed: the members' declared sizes against a bound, each header's claim against its member."""
    import io
    import zipfile

    import trtls.fs.models as models

    monkeypatch.setattr(models, "MAX_NPZ_ARRAYS_BYTES", 1 << 20)  # the bound, scaled down: the same rule, less to write
    np.savez_compressed(tmp_path / "bomb.npz", x=np.zeros(1 << 19, np.float32))  # 2 MiB of zeros, a few KB on disk
    assert (tmp_path / "bomb.npz").stat().st_size < 1 << 16
    with pytest.raises(ValueError, match="uncompressed, more than"):
        load_npz(tmp_path / "bomb.npz")
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f4", "fortran_order": False, "shape": (100000, 100000)})
    with zipfile.ZipFile(tmp_path / "claim.npz", "w") as archive:
        archive.writestr("x.npy", header.getvalue() + b"\0" * 16)  # the header writer puts the magic first
    with pytest.raises(ValueError, match="claims 40,000,000,000 bytes"):
        load_npz(tmp_path / "claim.npz")


def test_a_safetensors_shard_is_read_from_the_regular_file_the_door_opened(tmp_path: Path) -> None:
    safetensors_numpy = pytest.importorskip("safetensors.numpy")
    for path in _hostile(tmp_path, "model.safetensors"):
        with pytest.raises(UnsafeWrite, match="not a regular file"):
            load_safetensors(path)
    safetensors_numpy.save_file({"w": np.arange(6, dtype=np.float32)}, str(tmp_path / "ok.safetensors"))
    got = load_safetensors(tmp_path / "ok.safetensors")
    assert list(got) == ["w"] and got["w"].tolist() == [0, 1, 2, 3, 4, 5]


def test_reduce_diverge_with_a_fifo_or_dev_zero_as_a_model_or_inputs_is_a_located_usage_error(tmp_path: Path) -> None:
    """The CLI end to end: `trtls reduce --diverge --candidate <FIFO>` and `--inputs <link to /dev/zero>` end in
    a TRT104 on the recipe (exit 2), not a hang, a traceback or memory filled by /dev/zero."""
    from tests.triage.test_diverge_pair import _pair, _refused

    candidate = _pair(tmp_path)
    fifo, zero = _hostile(tmp_path, "other.onnx")
    for bad in (fifo, zero):
        said = _refused(tmp_path, "--engine", "enc", "--diverge", "--candidate", str(bad))
        assert said.startswith(f"the candidate model {bad} ") and "Traceback" not in said, said
    (tmp_path / "npz").mkdir()
    fifo_npz, zero_npz = _hostile(tmp_path / "npz", "inputs.npz")
    for bad in (fifo_npz, zero_npz):
        said = _refused(tmp_path, "--engine", "enc", "--diverge", "--candidate", str(candidate), "--inputs", str(bad))
        assert said.startswith(f"the inputs file {bad} "), said
