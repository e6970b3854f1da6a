"""Gate 4's reference is independent of the export: an exporter bug (a dropped activation, swapped weights) rejects
against outputs computed from the checkpoint itself, where a reference running the same ONNX would have agreed.

Real route builds (ONNX routes: no engine), real onnxruntime runs, a real BERT checkpoint in the Hugging Face
layout (random weights, a WordPiece tokenizer.json built with `tokenizers`), golden outputs in Polygraphy's format.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from test_route_build import copy_sample, fresh_sample
from tests.checkpoint._bert import bert_feed, make_bert_checkpoint

from trtls.checkpoint.forward import load_safetensors, reference_forward
from trtls.checkpoint.golden import record_golden_onnx, save_golden, write_recorder
from trtls.checkpoint.lock import lock_route
from trtls.core.recipe import load_recipe
from trtls.gates.run import run_gates
from trtls.route import build as route_build
from trtls.route.exporters import export_bert_encoder
from trtls.runtimes import save_npz


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fresh_sample(tmp_path_factory.mktemp("independent") / "route")


def _gate4(root: Path, route: str) -> dict:
    loaded = load_recipe(root / "trtls.toml")
    assert loaded.recipe is not None, [f.message for f in loaded.findings]
    res = run_gates(loaded, route, gates=[4], write_evidence=False)
    return {c.name: c for c in res.checks}


def _drop_relu(weights, config):
    model = route_build.export_mlp(weights, config)
    relu = next(n for n in model.graph.node if n.op_type == "Relu")
    for node in model.graph.node:  # feed fc2 the pre-activation instead of the Relu's output
        node.input[:] = [relu.input[0] if i == relu.output[0] else i for i in node.input]
    model.graph.node.remove(relu)
    return model


def test_a_dropped_activation_rejects_against_the_checkpoint(sample, tmp_path, monkeypatch):
    root = copy_sample(sample, tmp_path / "route")
    monkeypatch.setitem(route_build.EXPORTERS, "tiny-mlp", _drop_relu)
    result = asyncio.run(route_build.build_route(root / "trtls.toml", "tiny_ort"))
    assert result.ok, result.message
    checks = _gate4(root, "tiny_ort")
    tol = checks["parity.tolerance:logits"]
    assert tol.status == "reject" and tol.code == "TRT805", tol.message
    assert tol.evidence["stats"]["max_abs"] > 0.01
    assert checks["parity.reference_independent"].status == "pass"
    assert checks["parity.deployed_artifact"].status == "pass"  # the buggy ONNX really ran: that is what failed
    # the old set-up, onnxruntime against onnx.reference on the same ONNX, agrees with the bug …
    toml = root / "trtls.toml"
    text = toml.read_text()
    start = text.index("[routes.tiny_ort]")
    end = text.index("[routes.", start + 1)
    table = text[start:end].replace('reference = "checkpoint"', 'reference = "onnx.reference"')
    toml.write_text(text[:start] + table + text[end:])
    same = _gate4(root, "tiny_ort")
    assert same["parity.tolerance:logits"].status == "pass"
    # … and so it can never support the route: the independence check says what was not checked
    assert same["parity.reference_independent"].status == "not_checked"
    assert "an export bug would pass unseen" in same["parity.reference_independent"].message


BERT_RECIPE = """\
[routes.bert]
onnx = "build/bert.onnx"
checkpoint = {{ path = "ck", revision = "{commit}" }}
intended_use = "tests: a BERT encoder on ONNX Runtime"
allowed_licenses = ["apache-2.0"]
bundle = "build/bert.bundle"
runtime = "onnxruntime"
reference = "{reference}"
reference_inputs = "inputs/reference.npz"
tolerances = {{ last_hidden_state = {{ atol = 1e-4, rtol = 1e-3 }} }}
runtime_options = {{ malformed = false, concurrency = 0 }}
{extra}"""


def _bert_route(tmp_path: Path, reference: str = "checkpoint", extra: str = "") -> Path:
    root = tmp_path / "bert"
    make_bert_checkpoint(root / "ck")
    (root / "inputs").mkdir()
    save_npz(root / "inputs" / "reference.npz", bert_feed(batch=3, seq=9))
    (root / "trtls.toml").write_text(BERT_RECIPE.format(commit="b" * 40, reference=reference, extra=extra))
    loaded = load_recipe(root / "trtls.toml")
    assert loaded.recipe is not None, [f.message for f in loaded.findings]
    lock_route(loaded, "bert")
    return root


def test_bert_encoder_route_matches_its_checkpoint_with_dynamic_batch_and_sequence(tmp_path):
    root = _bert_route(tmp_path)
    result = asyncio.run(route_build.build_route(root / "trtls.toml", "bert"))
    assert result.ok, result.message
    import onnx

    model = onnx.load(root / "build" / "bert.onnx")
    dims = {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in model.graph.input}
    assert dims == {"input_ids": ["batch", "sequence"], "attention_mask": ["batch", "sequence"]}
    checks = _gate4(root, "bert")
    assert checks["parity.tolerance:last_hidden_state"].status == "pass", checks["parity.tolerance:last_hidden_state"]
    assert checks["parity.reference_independent"].evidence["family"] == "bert"
    assert checks["parity.deployed_artifact"].status == "pass"


def test_bert_exporter_with_swapped_weights_rejects(tmp_path, monkeypatch):
    root = _bert_route(tmp_path)

    def swapped(weights, config):
        w = dict(weights)
        p = "bert.encoder.layer.1.attention.self."
        w[p + "query.weight"], w[p + "key.weight"] = weights[p + "key.weight"], weights[p + "query.weight"]
        return export_bert_encoder(w, config)

    monkeypatch.setitem(route_build.EXPORTERS, "bert", swapped)
    assert asyncio.run(route_build.build_route(root / "trtls.toml", "bert")).ok
    tol = _gate4(root, "bert")["parity.tolerance:last_hidden_state"]
    assert tol.status == "reject" and tol.evidence["stats"]["max_abs"] > 1e-2


def test_golden_outputs_with_provenance(tmp_path):
    root = tmp_path / "bert"
    ck = make_bert_checkpoint(root / "ck")
    (root / "inputs").mkdir()
    inputs = root / "inputs" / "reference.npz"
    save_npz(inputs, bert_feed(batch=2, seq=5))
    inputs_sha = hashlib.sha256(inputs.read_bytes()).hexdigest()
    # recorded elsewhere (here: the numpy forward pass standing in for another framework), in Polygraphy's format
    golden = reference_forward(
        load_safetensors(ck), json.loads((ck / "config.json").read_text()), dict(np.load(inputs))
    )
    save_golden(root / "golden.json", "numpy-reference", [golden])
    # the record of who recorded them: what TRT812 judges (the recipe's framework string is only a claim)
    ran = {"kind": "checkpoint", "id": "tests/bert", "revision": "b" * 40}
    write_recorder(root / "golden.json", "numpy", np.__version__, ran, inputs_sha)
    extra = (
        f'golden_outputs = {{ path = "golden.json", framework = "numpy", framework_version = "{np.__version__}", '
        f'inputs_sha256 = "{inputs_sha}" }}\n'
    )
    toml = root / "trtls.toml"
    toml.write_text(BERT_RECIPE.format(commit="b" * 40, reference="golden", extra=extra))
    lock_route(load_recipe(toml), "bert")
    assert asyncio.run(route_build.build_route(toml, "bert")).ok
    checks = _gate4(root, "bert")
    assert checks["parity.tolerance:last_hidden_state"].status == "pass"
    ind = checks["parity.reference_independent"]
    assert ind.status == "pass" and ind.evidence["framework"] == "numpy" and ind.evidence["inputs_sha256"] == inputs_sha
    assert f"recorded by numpy {np.__version__} running the checkpoint tests/bert" in ind.message, ind.message
    # without the record, nothing says who recorded them: not_checked, whatever the recipe types
    (root / "golden.json.recorder.json").unlink()
    ind = _gate4(root, "bert")["parity.reference_independent"]
    assert ind.status == "not_checked" and "no record of who recorded the golden outputs" in ind.message, ind.message
    write_recorder(root / "golden.json", "numpy", np.__version__, ran, inputs_sha)
    # outputs recorded for other inputs prove nothing about these: the reference is unavailable, never a pass
    toml.write_text(toml.read_text().replace(inputs_sha, "0" * 64))
    checks = _gate4(root, "bert")
    assert "parity.tolerance:last_hidden_state" not in checks
    assert checks["parity.reference_available"].status == "hold"
    assert "prove nothing about these inputs" in checks["parity.reference_available"].message


def test_golden_outputs_recorded_from_the_deployed_onnx_are_not_independent_whatever_the_recipe_types(tmp_path):
    """Issue 29, item 3: outputs recorded by ONNX Runtime from the very ONNX the route deploys (error exactly 0)
    with `framework = "torch"` typed in the recipe used to pass as "golden outputs recorded by torch"."""
    root = _bert_route(tmp_path)
    toml = root / "trtls.toml"
    assert asyncio.run(route_build.build_route(toml, "bert")).ok
    inputs = root / "inputs" / "reference.npz"
    inputs_sha = hashlib.sha256(inputs.read_bytes()).hexdigest()
    record_golden_onnx(root / "build" / "bert.onnx", dict(np.load(inputs)), inputs_sha, root / "golden.json")
    extra = (
        'golden_outputs = { path = "golden.json", framework = "torch", framework_version = "2.3.0", '
        f'inputs_sha256 = "{inputs_sha}" }}\n'
    )
    toml.write_text(toml.read_text().replace('reference = "checkpoint"', 'reference = "golden"') + extra)
    checks = _gate4(root, "bert")
    tol = checks["parity.tolerance:last_hidden_state"]
    assert tol.status == "pass" and tol.evidence["stats"]["max_abs"] == 0.0  # itself against itself
    ind = checks["parity.reference_independent"]
    assert ind.status == "hold", ind.message
    assert "recorded by onnxruntime" in ind.message and "running bert.onnx" in ind.message
    assert "the export under test checked against itself" in ind.message
    assert "the recipe says framework = 'torch', the record says onnxruntime" in ind.message
    assert "recorded by torch" not in ind.message


def test_a_hand_written_recorder_record_does_not_make_outputs_of_the_deployed_onnx_independent(tmp_path):
    """Issue 29: golden.json.recorder.json is a file anyone can write. Outputs recorded by ONNX Runtime from the very
    ONNX the route deploys, with a record rewritten to say numpy ran the checkpoint's weights, passed TRT812. Every
    output matching the deployed model bit for bit (error exactly 0) is the telltale: it holds, whatever the record
    says; outputs really recorded from the checkpoint (test_golden_outputs_with_provenance) differ in the last bits."""
    root = _bert_route(tmp_path)
    toml = root / "trtls.toml"
    assert asyncio.run(route_build.build_route(toml, "bert")).ok
    inputs = root / "inputs" / "reference.npz"
    inputs_sha = hashlib.sha256(inputs.read_bytes()).hexdigest()
    golden = root / "golden.json"
    record_golden_onnx(root / "build" / "bert.onnx", dict(np.load(inputs)), inputs_sha, golden)
    ran = {"kind": "checkpoint", "id": "bert-test", "revision": "0" * 40}
    write_recorder(golden, "numpy", np.__version__, ran, inputs_sha)  # the lie, in the record's own format
    extra = (
        'golden_outputs = { path = "golden.json", framework = "numpy", framework_version = "1", '
        f'inputs_sha256 = "{inputs_sha}" }}\n'
    )
    toml.write_text(toml.read_text().replace('reference = "checkpoint"', 'reference = "golden"') + extra)
    checks = _gate4(root, "bert")
    assert checks["parity.tolerance:last_hidden_state"].evidence["stats"]["max_abs"] == 0.0
    ind = checks["parity.reference_independent"]
    assert ind.status == "hold", ind.message
    assert "matches the golden outputs bit for bit (error exactly 0" in ind.message
    assert "the recorder record says numpy" in ind.message and "a record is a file anyone can write" in ind.message
    assert ind.evidence["bit_identical"] == ["last_hidden_state"]


def test_bit_identical_needs_every_output_and_every_set_exactly_equal():
    from trtls.core.gate_result import gate_check
    from trtls.gates.parity.independence import bit_identical

    def tol(name: str, max_abs: float, elements: int = 8, **more) -> object:
        evidence = {"stats": {"max_abs": max_abs, "elements": elements}, **more}
        return gate_check(4, f"parity.tolerance:{name}", "pass", "", "TRT805", (), evidence)

    assert bit_identical([tol("a", 0.0), tol("b", 0.0)]) == ["a", "b"]
    assert bit_identical([tol("a", 0.0), tol("b", 1e-9)]) == []  # one output differs: an independent reference
    assert bit_identical([tol("a", 0.0, elements=0)]) == []  # nothing measured
    assert bit_identical([]) == []
    sets = {"short": {"stats": {"max_abs": 0.0, "elements": 4}}, "long": {"stats": {"max_abs": 2e-7, "elements": 4}}}
    assert bit_identical([tol("a", 0.0, input_sets=sets)]) == []  # merged sets: every set counts
