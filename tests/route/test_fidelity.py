"""Export fidelity (TRT814–TRT816) on a real BERT encoder checkpoint laid out as sentence-transformers does
(modules.json, 1_Pooling/config.json, sentence_bert_config.json): a real ONNX route build, then gates 1 and 4. The
route exports the declared pooling as `sentence_embedding` (TRT816 passes, its values match the reference), holds
when the bundle's pooling is not the checkpoint's, and refuses to build a pooling it does not export."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from pathlib import Path

import pytest
from tests.checkpoint._bert import bert_feed, make_bert_checkpoint

from trtls.bundle import read_bundle
from trtls.core.recipe import load_recipe
from trtls.gates.run import run_gates
from trtls.route.build import RouteBuildError, build_route
from trtls.runtimes import save_npz

ORT_ROUTE = """\
[routes.st]
onnx = "build/st.onnx"
checkpoint = { path = "ck", revision = "cccccccccccccccccccccccccccccccccccccccc" }
intended_use = "tests: a sentence-transformers encoder"
allowed_licenses = ["apache-2.0"]
bundle = "build/st.bundle"
runtime = "onnxruntime"
reference_inputs = "inputs/reference.npz"
"""
ENGINE = """
[engines.st]
onnx = "build/st.onnx"
output = "build/st.engine"
builder_module = "tensorrt_rtx"

[[engines.st.profiles]]
inputs.input_ids      = { min = [1, 1], opt = [2, 8], max = [4, 32] }
inputs.attention_mask = { min = [1, 1], opt = [2, 8], max = [4, 32] }

[routes.st_trt]
engine = "st"
checkpoint = { path = "ck", revision = "cccccccccccccccccccccccccccccccccccccccc" }
intended_use = "tests: the same encoder on TensorRT-RTX"
allowed_licenses = ["apache-2.0"]
bundle = "build/st_trt.bundle"
runtime = "tensorrt_rtx"
"""


def sentence_transformers_checkpoint(folder: Path) -> Path:
    make_bert_checkpoint(folder)
    (folder / "modules.json").write_text(
        json.dumps(
            [
                {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
            ]
        )
    )
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps({"pooling_mode_mean_tokens": True, "pooling_mode_cls_token": False})
    )
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 16, "do_lower_case": False}))
    return folder


def test_pooling_dropped_inputs_and_sequence_length_are_flagged(tmp_path):
    sentence_transformers_checkpoint(tmp_path / "ck")
    (tmp_path / "inputs").mkdir()
    save_npz(tmp_path / "inputs" / "reference.npz", bert_feed(batch=2, seq=8))
    (tmp_path / "trtls.toml").write_text(ORT_ROUTE)
    result = asyncio.run(build_route(tmp_path / "trtls.toml", "st"))
    assert result.ok, result.message
    sections = read_bundle(tmp_path / "build" / "st.bundle").sections
    assert {"modules.json", "1_Pooling__config.json", "sentence_bert_config.json"} <= set(sections)
    checks = {
        c.name: c for c in run_gates(load_recipe(tmp_path / "trtls.toml"), "st", [1, 4], write_evidence=False).checks
    }
    pooling = checks["parity.pooling"]
    assert pooling.status == "pass" and pooling.code == "TRT816", pooling.message
    assert "mean pooling, normalize" in pooling.message
    assert read_bundle(tmp_path / "build" / "st.bundle").header["trtls"]["provenance"]["pooling"]["mode"] == "mean"
    emb = checks["parity.tolerance:sentence_embedding"]
    assert emb.status == "pass", emb.message
    dropped = checks["parity.inputs"]
    assert dropped.status == "not_checked" and dropped.code == "TRT815" and "token_type_ids" in dropped.message
    # the same bundle's io_map under an engine route whose profile allows 32 tokens; the tokenizer stops at 16
    shutil.copy(tmp_path / "build" / "st.bundle", tmp_path / "build" / "st_trt.bundle")
    (tmp_path / "trtls.toml").write_text(ORT_ROUTE + ENGINE)
    checks = {
        c.name: c
        for c in run_gates(load_recipe(tmp_path / "trtls.toml"), "st_trt", [1, 4], write_evidence=False).checks
    }
    assert "parity.sequence_length" in checks, [
        (c.name, c.status, c.message[:150]) for c in checks.values() if c.gate == 4
    ]
    seq = checks["parity.sequence_length"]
    assert seq.status == "hold" and seq.code == "TRT814"
    assert "truncates at 16" in seq.message and "max sequence is 32" in seq.message


def test_a_pooling_that_differs_from_modules_json_holds(tmp_path):
    """The bundle exported mean pooling; the checkpoint now declares cls without Normalize (as if the bundle came
    from another checkpoint): TRT816 holds with both named, and the reference (which reads modules.json itself)
    disagrees with the deployed sentence_embedding."""
    ck = sentence_transformers_checkpoint(tmp_path / "ck")
    (tmp_path / "inputs").mkdir()
    save_npz(tmp_path / "inputs" / "reference.npz", bert_feed(batch=2, seq=8))
    (tmp_path / "trtls.toml").write_text(ORT_ROUTE)
    assert asyncio.run(build_route(tmp_path / "trtls.toml", "st")).ok
    (ck / "1_Pooling" / "config.json").write_text(json.dumps({"pooling_mode_cls_token": True}))
    modules = json.loads((ck / "modules.json").read_text())[:2]
    (ck / "modules.json").write_text(json.dumps(modules))
    checks = {
        c.name: c for c in run_gates(load_recipe(tmp_path / "trtls.toml"), "st", [1, 4], write_evidence=False).checks
    }
    pooling = checks["parity.pooling"]
    assert pooling.status == "hold" and pooling.code == "TRT816"
    assert "is mean pooling, normalize but the checkpoint's modules.json declares cls pooling" in pooling.message
    assert pooling.evidence["recorded"]["mode"] == "mean"
    assert checks["parity.tolerance:sentence_embedding"].status == "reject"


@pytest.mark.parametrize(
    ("modules", "pooling", "words"),
    [
        (["Transformer", "Pooling", "Dense"], {"pooling_mode_mean_tokens": True}, "Dense module"),
        (["Transformer", "Pooling"], {"pooling_mode_lasttoken": True}, "pooling_mode_lasttoken (last-token)"),
        (["Transformer", "Pooling"], {"pooling_mode_cls_token": True, "pooling_mode_max_tokens": True}, "exactly one"),
        (["Transformer", "Pooling"], {"pooling_mode_mean_tokens": True, "include_prompt": False}, "include_prompt"),
    ],
)
def test_route_build_refuses_a_pooling_it_does_not_export(tmp_path, modules, pooling, words):
    ck = sentence_transformers_checkpoint(tmp_path / "ck")
    paths = {"Transformer": "", "Pooling": "1_Pooling", "Dense": "2_Dense"}
    entries = [{"idx": i, "path": paths[m], "type": f"sentence_transformers.models.{m}"} for i, m in enumerate(modules)]
    (ck / "modules.json").write_text(json.dumps(entries))
    (ck / "1_Pooling" / "config.json").write_text(json.dumps(pooling))
    (tmp_path / "inputs").mkdir()
    save_npz(tmp_path / "inputs" / "reference.npz", bert_feed(batch=2, seq=8))
    (tmp_path / "trtls.toml").write_text(ORT_ROUTE)
    with pytest.raises(RouteBuildError, match=re.escape(words)) as err:
        asyncio.run(build_route(tmp_path / "trtls.toml", "st"))
    assert err.value.path == ("checkpoint", "path")
    assert not (tmp_path / "build" / "st.onnx").exists() and not (tmp_path / "build" / "st.bundle").exists()
