"""Issue 32 item 1, end to end: a model whose weights are external data referenced from a `Constant` node's `value`
attribute (not an initializer) was keyed without them, so after its weights file changed `trtls build` said "up to
date" and served the engine built from the old weights — here, in every checkout sharing the store. Real `trtls build`
processes with the real TensorRT-RTX: built, the fast path's hit, one byte of the external file changed → rebuilt with
the file named (the fast path's memo sees its stat; the full path's key its bytes), and the engine is another."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.onnx_files.external_layouts import build
from tests.store.helpers import run_build, summaries, with_store

CONSTANT_FILE = "constant.bin"


def _flip_one_byte(path: Path) -> None:
    """One byte of the weights changed in place (the same size; a low mantissa bit: still a finite float)."""
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def _built(ws: Path) -> dict:
    done = run_build(ws)
    assert done.returncode == 0, done.stdout + done.stderr
    return summaries(ws)[-1]


def test_a_constant_attributes_external_weights_changed_are_rebuilt_on_the_fast_and_the_full_path(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    model, place = build(ws, "constant")
    assert place == CONSTANT_FILE and model == ws / "model.onnx"
    (ws / "trtls.toml").write_text('[engines.demo]\nonnx = "model.onnx"\noutput = "build/demo.engine"\n')
    with_store(ws, tmp_path / "store")

    first = _built(ws)
    assert first["outcome"] == "built" and first["store"]["warnings"] == [], first
    hit = _built(ws)
    assert hit["outcome"] == "reused" and any("not re-read" in n for n in hit["notes"]), hit["notes"]

    # the fast path: its memo holds the external file's stat, so it does not answer; the key then differs by it
    _flip_one_byte(ws / CONSTANT_FILE)
    second = _built(ws)
    named = f"external data {CONSTANT_FILE} bytes changed"
    assert second["outcome"] == "built", "an engine built from the old weights was served as up to date"
    assert named in second["rebuiltBecause"], second["rebuiltBecause"]
    assert second["engineKey"] != first["engineKey"]
    assert second["engineArtifact"]["sha256"] != first["engineArtifact"]["sha256"]  # the weights are in the plan

    # the full path alone (no memo, as in a fresh checkout): the key hashes the file's bytes
    for memo in (ws / ".trtls" / "engines").glob("*.hit.json"):
        memo.unlink()
    _flip_one_byte(ws / CONSTANT_FILE)  # back to the first weights: the first engine, from the store
    back = _built(ws)
    assert back["outcome"] == "reused" and back["engineKey"] == first["engineKey"]
    assert not any("not re-read" in n for n in back["notes"]), "the full path computed this key"
    for memo in (ws / ".trtls" / "engines").glob("*.hit.json"):
        memo.unlink()
    data = bytearray((ws / CONSTANT_FILE).read_bytes())
    data[0] ^= 0x01
    (ws / CONSTANT_FILE).write_bytes(bytes(data))
    third = _built(ws)
    assert third["outcome"] == "built" and named in third["rebuiltBecause"], third["rebuiltBecause"]
    assert third["engineKey"] not in (first["engineKey"], second["engineKey"])


@pytest.mark.parametrize("layout", ["graph-in-parts", "constant-in-parts", "constant-long-tag"])
def test_weights_of_a_model_written_in_parts_changed_are_rebuilt(tmp_path: Path, layout: str) -> None:
    """The attack's two models and a third of their kind: the graph written twice (its initializer in the first part),
    a Constant's `value` in two parts, an attribute tag in its long form. TensorRT's parser reads each as protobuf
    merges it and builds from the external file; the key's reader kept only the last `graph`, and its byte filters
    missed the long tag, so after the file changed the build said "up to date" with the old weights' engine."""
    ws = tmp_path / "ws"
    _, place = build(ws, layout)
    (ws / "trtls.toml").write_text('[engines.demo]\nonnx = "model.onnx"\noutput = "build/demo.engine"\n')
    with_store(ws, tmp_path / "store")
    first = _built(ws)
    assert first["outcome"] == "built", first
    _flip_one_byte(ws / place)
    second = _built(ws)
    assert second["outcome"] == "built", "an engine built from the old weights was served as up to date"
    assert f"external data {place} bytes changed" in second["rebuiltBecause"], second["rebuiltBecause"]
    assert second["engineArtifact"]["sha256"] != first["engineArtifact"]["sha256"]  # TensorRT read the file


def test_a_fast_path_memo_does_not_outlive_the_reader_that_listed_its_files() -> None:
    """The memo stats every file the key read; a memo a reader wrote that missed an external file never stats it, so
    after an upgrade of that reader the memo would still answer "up to date" while the file changed. The reader's
    modules are among the code whose change ends every memo (a new trtls version ends them too)."""
    import trtls
    from trtls.builds.avoidance.memo import KEY_CODE
    from trtls.onnx_files import external_data, onnx_reader, protobuf_wire

    pkg = Path(trtls.__file__).parent
    for module in (onnx_reader, protobuf_wire, external_data):
        assert Path(module.__file__).relative_to(pkg).as_posix() in KEY_CODE, module.__name__
