"""Several named reference input sets on one route (issue 20 §4): `reference_inputs = { short = "…", long = "…" }`.

Gate 4 runs every set and records the evidence per set, naming the set that failed; gate 5 measures on every set;
a set's name is a safe name (TRT119, located on it); the write policy protects every set's file; the triage
divergence takes the first set or the one named. Real route builds (an ONNX route: no engine), real onnxruntime
runs, a real BERT checkpoint in the Hugging Face layout with random weights (tests/checkpoint/_bert.py).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
from tests.checkpoint._bert import bert_feed, make_bert_checkpoint

from trtls.checkpoint.lock import lock_route
from trtls.core.recipe import load_recipe
from trtls.gates.run import run_gates
from trtls.route import build as route_build
from trtls.route.exporters import export_bert_encoder
from trtls.runtimes import save_npz

RECIPE = """\
[routes.bert]
onnx = "build/bert.onnx"
checkpoint = {{ path = "ck", revision = "{commit}" }}
intended_use = "tests: a BERT encoder on ONNX Runtime, short and long sequences"
allowed_licenses = ["apache-2.0"]
bundle = "build/bert.bundle"
runtime = "onnxruntime"
reference = "checkpoint"
reference_inputs = {inputs}
tolerances = {{ last_hidden_state = {{ atol = 1e-4, rtol = 1e-3 }} }}
runtime_options = {{ malformed = false, concurrency = 0 }}
"""
SETS = '{ short = "inputs/short.npz", long = "inputs/long.npz" }'
SHORT, LONG = 6, 24  # sequence lengths: the long set reaches positions the short one never does


def _route(tmp_path: Path, inputs: str = SETS) -> Path:
    root = tmp_path / "bert"
    make_bert_checkpoint(root / "ck")
    (root / "inputs").mkdir()
    save_npz(root / "inputs" / "short.npz", bert_feed(batch=2, seq=SHORT))
    save_npz(root / "inputs" / "long.npz", bert_feed(batch=2, seq=LONG, seed=2))
    (root / "trtls.toml").write_text(RECIPE.format(commit="b" * 40, inputs=inputs))
    loaded = load_recipe(root / "trtls.toml")
    assert loaded.recipe is not None, [f.message for f in loaded.findings]
    lock_route(loaded, "bert")
    return root


def _gates(root: Path, gates: list[int]) -> dict:
    loaded = load_recipe(root / "trtls.toml")
    assert loaded.recipe is not None, [f.message for f in loaded.findings]
    res = run_gates(loaded, "bert", gates=gates, write_evidence=False)
    return {c.name: c for c in res.checks}


def test_two_sets_of_different_lengths_both_pass_parity_with_evidence_per_set(tmp_path):
    root = _route(tmp_path)
    assert asyncio.run(route_build.build_route(root / "trtls.toml", "bert")).ok
    checks = _gates(root, [4, 5])
    tol = checks["parity.tolerance:last_hidden_state"]
    assert tol.status == "pass", tol.message
    per_set = tol.evidence["input_sets"]
    assert list(per_set) == ["short", "long"]
    assert all(s["status"] == "pass" and s["stats"]["max_abs"] < 1e-4 for s in per_set.values())
    assert "set short:" in tol.message and "set long:" in tol.message
    run = checks["parity.run"]
    assert run.status == "pass" and set(run.evidence["input_sets"]) == {"short", "long"}
    assert checks["parity.signature"].status == "pass"
    assert checks["parity.deployed_artifact"].status == "pass"
    # the per-set findings are located on their own set's key
    assert tol.evidence["input_set"] == "short"
    measure = checks["release.measure"]
    assert measure.status == "pass", measure.message
    assert (
        list(measure.evidence["input_sets"]) == ["short", "long"] and "per input set (short, long)" in measure.message
    )
    # latency is judged per set, never pooled over both shapes: each set's own percentiles over its own requests
    latency = checks["release.latency"]
    per = latency.evidence["input_sets"]
    assert list(per) == ["short", "long"] and "set short:" in latency.message and "set long:" in latency.message
    assert all(per[n]["iterations"] == measure.evidence["input_sets"][n]["iterations"] == 50 for n in per)
    assert per["short"]["p50_ms"] != per["long"]["p50_ms"]


def _positions_cut_at_16(weights, config):
    """An exporter bug only long sequences see: positions from 16 on lose their embedding."""
    w = dict(weights)
    pos = w["bert.embeddings.position_embeddings.weight"].copy()
    pos[16:] = 0.0
    w["bert.embeddings.position_embeddings.weight"] = pos
    return export_bert_encoder(w, config)


def test_a_set_that_mismatches_rejects_parity_naming_that_set(tmp_path, monkeypatch):
    root = _route(tmp_path)
    monkeypatch.setitem(route_build.EXPORTERS, "bert", _positions_cut_at_16)
    assert asyncio.run(route_build.build_route(root / "trtls.toml", "bert")).ok
    checks = _gates(root, [4])
    tol = checks["parity.tolerance:last_hidden_state"]
    assert tol.status == "reject" and tol.code == "TRT805"
    assert tol.message.startswith("set long: "), tol.message
    assert "set short" not in tol.message.split(" (passes on")[0]
    assert tol.message.endswith("(passes on set short)")
    assert tol.evidence["input_set"] == "long" and tol.evidence["stats"]["max_abs"] > 1e-2
    assert tol.evidence["input_sets"]["short"]["status"] == "pass"
    assert tol.evidence["input_sets"]["long"]["status"] == "reject"


def test_the_one_file_form_is_unchanged(tmp_path):
    root = _route(tmp_path, '"inputs/long.npz"')
    assert asyncio.run(route_build.build_route(root / "trtls.toml", "bert")).ok
    tol = _gates(root, [4])["parity.tolerance:last_hidden_state"]
    assert tol.status == "pass" and not tol.message.startswith("set ")
    assert "input_sets" not in tol.evidence and tol.path == ("routes", "bert", "tolerances", "last_hidden_state")


def _findings(tmp_path: Path, inputs: str) -> dict[tuple, object]:
    root = tmp_path / "r"
    (root / "ck").mkdir(parents=True)
    (root / "inputs").mkdir()
    save_npz(root / "inputs" / "short.npz", {"x": np.zeros((1, 2), np.float32)})
    (root / "trtls.toml").write_text(RECIPE.format(commit="b" * 40, inputs=inputs))
    loaded = load_recipe(root / "trtls.toml")
    return {(f.code, f.path): f for f in loaded.findings}


@pytest.mark.parametrize(
    ("inputs", "code", "where", "words"),
    [
        ('{ "short seq" = "inputs/short.npz" }', "TRT119", ("short seq",), "'short_seq'"),
        ('{ ".." = "inputs/short.npz" }', "TRT119", ("..",), "cannot name evidence"),
        ('{ short = "inputs/short.npz", long = "inputs/none.npz" }', "TRT104", ("long",), "of set 'long' not found"),
        ('{ short = "inputs/short.npz", long = 3 }', "TRT102", ("long",), "must be a string, not the number 3"),
        ("{}", "TRT102", (), "empty table"),
        ("3", "TRT102", (), "table of named input sets"),
    ],
)
def test_a_bad_set_is_a_located_error(tmp_path, inputs, code, where, words):
    found = _findings(tmp_path, inputs)
    key = (code, ("routes", "bert", "reference_inputs", *where))
    assert key in found, list(found)
    assert words in found[key].message  # type: ignore[attr-defined]


def test_a_good_table_has_no_finding_on_its_sets(tmp_path):
    found = _findings(tmp_path, '{ short = "inputs/short.npz", "s-1.x" = "inputs/short.npz" }')
    assert [k for k in found if k[1][:3] == ("routes", "bert", "reference_inputs")] == []


def test_every_sets_file_is_protected_from_writes(tmp_path):
    from trtls.core.write_policy import route_write_findings

    root = _route(tmp_path)
    text = (root / "trtls.toml").read_text().replace('bundle = "build/bert.bundle"', 'bundle = "inputs/long.npz"')
    (root / "trtls.toml").write_text(text)
    loaded = load_recipe(root / "trtls.toml")
    assert loaded.recipe is not None
    found = [f for f in route_write_findings(loaded, "bert") if f.code == "TRT109"]
    assert found and "reference inputs (set 'long')" in found[0].message, [f.message for f in found]


def test_divergence_takes_the_first_set_or_the_one_named(tmp_path):
    from trtls.triage.diverge_run import DivergenceUnavailable, _route_setup

    root = tmp_path / "r"
    root.mkdir()
    (root / "trtls.toml").write_text(
        '[routes.e]\nengine = "e"\ncheckpoint = { path = "ck", revision = "' + "c" * 40 + '" }\n'
        'intended_use = "t"\nallowed_licenses = ["mit"]\nbundle = "e.bundle"\n'
        'reference_inputs = { short = "inputs/short.npz", long = "inputs/long.npz" }\n'
    )
    loaded = load_recipe(root / "trtls.toml")
    _, first, _ = _route_setup(loaded, "e")
    assert first == loaded.resolve("inputs/short.npz")
    _, named, _ = _route_setup(loaded, "e", "long")
    assert named == loaded.resolve("inputs/long.npz")
    with pytest.raises(DivergenceUnavailable, match="no reference input set 'mid' \\(its sets: short, long\\)"):
        _route_setup(loaded, "e", "mid")


def test_the_onnx_runtime_session_settings_are_route_keys_every_measurement_uses(tmp_path):
    """Issue 29 item 6: intra/inter-op threads, graph optimisation level and provider are runtime_options of the route;
    gate 4 and gate 5 run with them and the evidence says which; a wrong value holds at its key; a provider this
    ONNX Runtime does not have is said, never silently replaced by the CPU."""
    root = _route(tmp_path, '"inputs/short.npz"')
    assert asyncio.run(route_build.build_route(root / "trtls.toml", "bert")).ok
    recipe = root / "trtls.toml"
    text = recipe.read_text()
    settings = 'threads = 2, inter_threads = 2, graph_optimization = "basic", '
    recipe.write_text(text.replace("runtime_options = { ", "runtime_options = { " + settings))
    checks = _gates(root, [4, 5])
    measure = checks["release.measure"]
    assert measure.status == "pass", measure.message
    assert measure.evidence["session"] == {
        "intra_op_threads": 2,
        "inter_op_threads": 2,
        "graph_optimization": "basic",
        "provider": "CPUExecutionProvider",
    }
    assert "2 intra-op / 2 inter-op thread(s), graph optimisation basic" in measure.message
    assert checks["parity.tolerance:last_hidden_state"].status == "pass"
    # the bundle was built with the defaults: what was measured is not what it deploys
    session = checks["release.session"]
    assert session.status == "hold" and session.code == "TRT912"
    assert "intra_op_threads 1 in the bundle, 2 measured" in session.message
    assert "graph_optimization 'all' in the bundle, 'basic' measured" in session.message
    assert asyncio.run(route_build.build_route(recipe, "bert")).ok  # rebuilt: the bundle records the route's session
    session = _gates(root, [5])["release.session"]
    assert session.status == "pass" and session.evidence["recorded"] == session.evidence["measured"]
    assert session.evidence["recorded"]["inter_op_threads"] == 2

    recipe.write_text(text.replace("runtime_options = { ", 'runtime_options = { graph_optimization = "max", '))
    config = _gates(root, [4])["parity.config"]
    assert config.status == "hold" and "graph_optimization 'max' is not one of disabled, basic" in config.message

    recipe.write_text(
        text.replace("runtime_options = { ", 'runtime_options = { provider = "NoSuchExecutionProvider", ')
    )
    checks = _gates(root, [4, 5])
    assert checks["parity.runtime_available"].status != "pass"
    assert "has no NoSuchExecutionProvider" in checks["parity.runtime_available"].message
    assert checks["release.measure"].status == "not_checked"
