"""A real Hugging Face family through the route builder: a BERT encoder checkpoint in the Hugging Face layout
(config.json `model_type = "bert"`, model.safetensors, a WordPiece tokenizer.json) → ONNX with two dynamic inputs →
a real TensorRT-RTX engine built with one optimization profile covering both → a bundle. On this machine the engine
cannot run, so gate 4 holds on it with the plain reason, while gates 1–3 check the real build."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from tests.checkpoint._bert import bert_feed, make_bert_checkpoint

from trtls.bundle import read_bundle
from trtls.checkpoint.lock import lock_route
from trtls.core.recipe import load_recipe
from trtls.gates.run import run_gates
from trtls.route.build import build_route
from trtls.runtimes import save_npz

RECIPE = """\
[engines.bert]
onnx = "build/bert.onnx"
output = "build/bert.engine"
builder_module = "tensorrt_rtx"

[[engines.bert.profiles]]
inputs.input_ids      = { min = [1, 1], opt = [2, 8], max = [4, 32] }
inputs.attention_mask = { min = [1, 1], opt = [2, 8], max = [4, 32] }

[routes.bert]
engine = "bert"
checkpoint = { path = "ck", revision = "cccccccccccccccccccccccccccccccccccccccc" }
intended_use = "tests: a BERT encoder on TensorRT-RTX"
allowed_licenses = ["apache-2.0"]
bundle = "build/bert.bundle"
runtime = "tensorrt_rtx"
reference = "checkpoint"
reference_inputs = "inputs/reference.npz"
tolerances = { last_hidden_state = { atol = 1e-3, rtol = 1e-2 } }
waive = { "revision_verified" = "test checkpoint made in place; its identity is the lock" }
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("bert-engine")
    make_bert_checkpoint(root / "ck")
    (root / "inputs").mkdir()
    save_npz(root / "inputs" / "reference.npz", bert_feed(batch=2, seq=8))
    (root / "trtls.toml").write_text(RECIPE)
    # the ONNX does not exist until the route build exports it: the recipe has that one error until then
    lock_route(load_recipe(root / "trtls.toml"), "bert")
    result = asyncio.run(build_route(root / "trtls.toml", "bert"))
    assert result.ok, result.message
    return root


def test_bert_engine_is_built_with_one_profile_for_both_dynamic_inputs(built: Path) -> None:
    bundle = read_bundle(built / "build" / "bert.bundle")
    assert {"engine", "model.onnx", "config.json", "tokenizer.json"} <= set(bundle.sections)
    io_map = bundle.header["io_map"]
    assert set(io_map["inputs"]) == {"input_ids", "attention_mask"}
    for name in ("input_ids", "attention_mask"):
        spec = io_map["inputs"][name]
        assert spec["dtype"] == "int64" and spec["shape"] == ["batch", "sequence"]
        assert spec["profile"] == {"min": [1, 1], "opt": [2, 8], "max": [4, 32]}
    assert bundle.header["model_type"] == "bert"
    summary = json.loads(next((built / ".trtls" / "runs").glob("*/summary.json")).read_text())
    assert summary["outcome"] == "built"


def test_bert_engine_route_holds_here_on_the_engine_that_cannot_run(built: Path) -> None:
    loaded = load_recipe(built / "trtls.toml")
    assert loaded.recipe is not None, [f.message for f in loaded.findings]
    res = run_gates(loaded, "bert", write_evidence=False)
    by = {c.name: c for c in res.checks}
    assert res.gate_status(1) == "supported", [
        (c.name, c.message) for c in res.checks if c.gate == 1 and c.status != "pass"
    ]
    assert res.gate_status(3) == "supported", [
        (c.name, c.message) for c in res.checks if c.gate == 3 and c.status != "pass"
    ]
    deployed = by["parity.deployed_artifact"]
    gpu = (res.summary.environment or {}).get("gpu_name")
    if not gpu:
        assert deployed.status == "hold" and "no GPU that TensorRT accepts" in deployed.message
        assert res.decision == "hold" and res.summary.engine_executed is False
    assert by["parity.reference_independent"].evidence["family"] == "bert"
