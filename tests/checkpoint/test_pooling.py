"""sentence-transformers pooling: the exporter's graph (`route.bert_export`, run by onnxruntime) and the independent
numpy reference (`checkpoint.forward`) agree for every exported mode, with and without Normalize; the reference
follows sentence-transformers' own definitions, written out here once more; what neither computes is refused."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from tests.checkpoint._bert import bert_feed, make_bert_checkpoint
from trtls.checkpoint.forward import ForwardError, load_safetensors, pool_tokens, reference_forward, st_pooling
from trtls.route.bert_export import BertExportError, export_bert

MODES = ("mean", "cls", "max", "mean_sqrt_len")


@pytest.fixture(scope="module")
def bert(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict]:
    folder = make_bert_checkpoint(tmp_path_factory.mktemp("bert"))
    return json.loads((folder / "config.json").read_text()), load_safetensors(folder)


def _run(model, feed: dict) -> dict:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feed), strict=True))


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("mode", MODES)
def test_exported_pooling_matches_the_numpy_reference(bert: tuple[dict, dict], mode: str, normalize: bool) -> None:
    config, weights = bert
    feed = bert_feed(batch=3, seq=9)
    feed["attention_mask"][2, -5:] = 0  # a third row with more padding than the first
    got = _run(export_bert(weights, config, pooling=mode, normalize=normalize), feed)
    ref = reference_forward(weights, config, feed, {"mode": mode, "normalize": normalize})
    assert got["sentence_embedding"].shape == (3, config["hidden_size"])
    np.testing.assert_allclose(got["last_hidden_state"], ref["last_hidden_state"], atol=1e-4, rtol=1e-3)
    np.testing.assert_allclose(got["sentence_embedding"], ref["sentence_embedding"], atol=1e-4, rtol=1e-3)
    if normalize:
        np.testing.assert_allclose(np.linalg.norm(got["sentence_embedding"], axis=1), 1.0, atol=1e-5)
    if mode != "cls":  # padding does not change a row's embedding: the mask is honoured
        n = int(feed["attention_mask"][2].sum())
        alone = _run(
            export_bert(weights, config, pooling=mode, normalize=normalize),
            {k: v[2:, :n] for k, v in feed.items()},
        )["sentence_embedding"]
        np.testing.assert_allclose(alone[0], got["sentence_embedding"][2], atol=1e-4, rtol=1e-3)


def test_the_reference_pools_as_sentence_transformers_defines_it() -> None:
    rng = np.random.default_rng(3)
    tokens = rng.standard_normal((2, 4, 3))
    mask = np.array([[1, 1, 1, 0], [1, 0, 0, 0]])
    np.testing.assert_allclose(pool_tokens(tokens, mask, "cls", False), tokens[:, 0])
    np.testing.assert_allclose(pool_tokens(tokens, mask, "mean", False)[0], tokens[0, :3].mean(0))
    np.testing.assert_allclose(pool_tokens(tokens, mask, "mean_sqrt_len", False)[0], tokens[0, :3].sum(0) / np.sqrt(3))
    np.testing.assert_allclose(pool_tokens(tokens, mask, "max", False)[1], tokens[1, 0])
    unit = pool_tokens(tokens, mask, "mean", True)
    np.testing.assert_allclose(
        unit,
        pool_tokens(tokens, mask, "mean", False)
        / np.linalg.norm(pool_tokens(tokens, mask, "mean", False), axis=1, keepdims=True),
    )
    # an all-padding row: sentence-transformers clamps the count at 1e-9 (zeros, not NaN)
    assert np.all(pool_tokens(tokens, np.zeros((2, 4)), "mean", False) == 0)


def _st_folder(tmp_path: Path, modules: list[str], pooling: dict) -> dict[str, Path]:
    (tmp_path / "1_Pooling").mkdir(exist_ok=True)
    entries = [
        {"idx": i, "name": str(i), "path": p, "type": f"sentence_transformers.models.{t}"}
        for i, (t, p) in enumerate((m, {"Transformer": "", "Pooling": "1_Pooling"}.get(m, f"{m}_x")) for m in modules)
    ]
    (tmp_path / "modules.json").write_text(json.dumps(entries))
    (tmp_path / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    return {"modules.json": tmp_path / "modules.json", "1_Pooling/config.json": tmp_path / "1_Pooling" / "config.json"}


def test_the_reference_reads_modules_json_and_refuses_what_it_does_not_compute(tmp_path: Path) -> None:
    mean = {"pooling_mode_mean_tokens": True, "pooling_mode_cls_token": False}
    files = _st_folder(tmp_path, ["Transformer", "Pooling", "Normalize"], mean)
    assert st_pooling(files) == {"mode": "mean", "normalize": True, "config": "1_Pooling/config.json"}
    assert st_pooling({}) is None
    for modules, pooling, words in (
        (["Transformer", "Pooling", "Dense"], mean, "Dense"),
        (["Transformer", "Pooling"], {"pooling_mode_weightedmean_tokens": True}, "weightedmean"),
        (["Transformer", "Pooling"], {"pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": True}, "max"),
        (["Pooling", "Transformer"], mean, "Transformer → Pooling"),
    ):
        with pytest.raises(ForwardError, match=words):
            st_pooling(_st_folder(tmp_path, modules, pooling))


def test_exporter_refuses_an_unknown_mode(bert: tuple[dict, dict]) -> None:
    config, weights = bert
    with pytest.raises(BertExportError, match="lasttoken"):
        export_bert(weights, config, pooling="lasttoken")
