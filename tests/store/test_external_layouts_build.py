"""Issue 32 item 1, end to end: a model whose weights are external data referenced from a `Constant` node's `value`
attribute (not an initializer) was keyed without them, so after its weights file changed `trtls build` said "up to
date" and served the engine built from the old weights — here, in every checkout sharing the store. Real `trtls build`
processes with the real TensorRT-RTX: built, the fast path's hit, one byte of the external file changed → rebuilt with
the file named (the fast path's memo sees its stat; the full path's key its bytes), and the engine is another."""

from __future__ import annotations

from pathlib import Path

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
