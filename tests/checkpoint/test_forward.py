"""The independent reference: numpy forward passes from the checkpoint's safetensors agree with the exported ONNX
run by onnxruntime, and disagree with an export that has a bug."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from tests.checkpoint._bert import bert_feed, make_bert_checkpoint
from trtls.checkpoint.forward import ForwardError, load_safetensors, reference_forward
from trtls.route.bert_export import export_bert


def _run(model, feed: dict) -> dict:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feed), strict=True))


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict]:
    folder = make_bert_checkpoint(tmp_path_factory.mktemp("bert"))
    return json.loads((folder / "config.json").read_text()), load_safetensors(folder)


@pytest.mark.parametrize(("batch", "seq"), [(1, 3), (2, 7), (3, 16)])
def test_bert_export_matches_the_checkpoint_math_at_dynamic_shapes(
    bert: tuple[dict, dict], batch: int, seq: int
) -> None:
    config, weights = bert
    model = export_bert(weights, config)
    feed = bert_feed(batch, seq)
    got = _run(model, feed)["last_hidden_state"]
    ref = reference_forward(weights, config, feed)["last_hidden_state"]
    assert got.shape == ref.shape == (batch, seq, config["hidden_size"])
    assert np.max(np.abs(got - ref)) < 1e-4


def test_an_export_bug_is_visible_against_the_reference(bert: tuple[dict, dict]) -> None:
    config, weights = bert
    swapped = dict(weights)
    p = "bert.encoder.layer.0.attention.self."
    swapped[p + "query.weight"], swapped[p + "key.weight"] = weights[p + "key.weight"], weights[p + "query.weight"]
    feed = bert_feed()
    ref = reference_forward(weights, config, feed)["last_hidden_state"]
    bad = _run(export_bert(swapped, config), feed)["last_hidden_state"]
    assert np.max(np.abs(bad - ref)) > 1e-2


def test_reference_refuses_what_it_cannot_compute(bert: tuple[dict, dict]) -> None:
    config, weights = bert
    with pytest.raises(ForwardError, match="no reference forward pass for model_type 'gpt2'"):
        reference_forward(weights, {**config, "model_type": "gpt2"}, bert_feed())
    with pytest.raises(ForwardError, match="outside the vocabulary"):
        reference_forward(weights, config, {"input_ids": np.array([[999]], np.int64)})


def test_load_refuses_a_lying_header(tmp_path: Path) -> None:
    import struct

    blob = json.dumps({"w": {"dtype": "F32", "shape": [100], "data_offsets": [0, 8]}}).encode()
    (tmp_path / "model.safetensors").write_bytes(struct.pack("<Q", len(blob)) + blob + b"\0" * 8)
    with pytest.raises(ForwardError, match="is 400 bytes but data_offsets"):
        load_safetensors(tmp_path)
