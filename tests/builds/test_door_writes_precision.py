"""The precision step's child writes the converted model only through the door (issue 27): atomically, inside the
folder it was given, never through a symlink planted at the model's name; a model past protobuf's single-file
ceiling keeps its large tensors in `<model>.data` beside it, read back by ONNX as the same numbers. A real ONNX
model of the quickstart, real files and a real symlink."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from trtls.builds.worker import autocast_child
from trtls.core.paths import UnsafeWrite


def _weights(model: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def test_a_model_past_the_single_file_ceiling_keeps_its_tensors_beside_it(
    quickstart_models: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = onnx.load(quickstart_models / "demo.onnx")
    want = _weights(source)
    monkeypatch.setattr(autocast_child, "SINGLE_FILE_LIMIT", 1000)  # the demo model stands in for a 2 GiB one
    out = tmp_path / "entry" / "model.onnx"
    out.parent.mkdir()
    autocast_child.save(source, out, tmp_path)
    assert sorted(p.name for p in out.parent.iterdir()) == ["model.onnx", "model.onnx.data"]
    got = _weights(onnx.load(out))  # ONNX reads the external data back from beside the model
    assert got.keys() == want.keys() and all(np.array_equal(got[k], want[k]) for k in want)
    assert out.stat().st_size < sum(a.nbytes for a in want.values())


def test_a_symlink_planted_at_the_model_name_is_refused_and_never_written_through(
    quickstart_models: Path, tmp_path: Path
) -> None:
    precious = tmp_path / "precious.onnx"
    precious.write_bytes(b"someone's model")
    out = tmp_path / "entry" / "model.onnx"
    out.parent.mkdir()
    out.symlink_to(precious)
    with pytest.raises(UnsafeWrite):
        autocast_child.save(onnx.load(quickstart_models / "demo.onnx"), out, tmp_path)
    assert precious.read_bytes() == b"someone's model"
