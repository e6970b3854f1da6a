"""A model that ships only as an export enters a route (issue 29, item 9): an ONNX file, golden outputs recorded by
whoever ran the original model (with the record of who did), and its tokenizer.json — no checkpoint. Before, the
recipe was refused (`TRT103 missing required key 'checkpoint'`).

The export is made here the way a supplier would: a BERT checkpoint exported to ONNX, its golden outputs recorded by
the numpy forward pass of that checkpoint (an independent runner, recorded as such), then the checkpoint taken away —
the route sees only the ONNX, the golden outputs and the tokenizer. Asserted: gate 1's twelve checks are
`not_checked`, each by name with its reason; gate 3 matches the bundle to the shipped files and holds when the ONNX is
changed after the build; gate 4 compares the deployed ONNX with the golden outputs and judges their independence from
the recorder record; a route with no checkpoint and no golden outputs is refused, saying what an export route needs."""

from __future__ import annotations

import asyncio
import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
from tests.checkpoint._bert import bert_feed, make_bert_checkpoint

from trtls.bundle import read_bundle
from trtls.checkpoint.forward import load_safetensors, reference_forward
from trtls.checkpoint.golden import save_golden, write_recorder
from trtls.core.recipe import load_recipe
from trtls.gates.export_source import NOT_CHECKED
from trtls.gates.run import run_gates
from trtls.route.build import build_route
from trtls.route.exporters import export_bert_encoder
from trtls.runtimes import save_npz

RECIPE = """\
[routes.shipped]
onnx = "export/model.onnx"
tokenizer_files = ["export/tokenizer.json"]
intended_use = "tests: a BERT encoder shipped as an ONNX export"
allowed_licenses = ["apache-2.0"]
bundle = "build/shipped.bundle"
runtime = "onnxruntime"
reference = "golden"
reference_inputs = "inputs/reference.npz"
tolerances = {{ last_hidden_state = {{ atol = 1e-4, rtol = 1e-3 }} }}
runtime_options = {{ malformed = false, concurrency = 0 }}
{golden}"""


def shipped_export(root: Path) -> Path:
    """The supplier's side: export, record golden outputs from the checkpoint, ship the export, keep the weights."""
    ck = make_bert_checkpoint(root / "supplier" / "ck")
    weights, config = load_safetensors(ck), json.loads((ck / "config.json").read_text())
    (root / "export").mkdir()
    (root / "export" / "model.onnx").write_bytes(export_bert_encoder(weights, config).SerializeToString())
    shutil.copy(ck / "tokenizer.json", root / "export" / "tokenizer.json")
    (root / "inputs").mkdir()
    inputs = root / "inputs" / "reference.npz"
    save_npz(inputs, bert_feed(batch=2, seq=6))
    inputs_sha = hashlib.sha256(inputs.read_bytes()).hexdigest()
    save_golden(
        root / "export" / "golden.json", "numpy-reference", [reference_forward(weights, config, dict(np.load(inputs)))]
    )
    ran = {"kind": "checkpoint", "id": "supplier/bert", "revision": "d" * 40}
    write_recorder(root / "export" / "golden.json", "numpy", np.__version__, ran, inputs_sha)
    shutil.rmtree(root / "supplier")  # the route never sees the checkpoint
    golden = (
        f'golden_outputs = {{ path = "export/golden.json", framework = "numpy", '
        f'framework_version = "{np.__version__}", inputs_sha256 = "{inputs_sha}" }}\n'
    )
    (root / "trtls.toml").write_text(RECIPE.format(golden=golden))
    return root


def test_an_onnx_with_golden_outputs_and_no_checkpoint_goes_through_the_route(tmp_path: Path) -> None:
    root = shipped_export(tmp_path)
    loaded = load_recipe(root / "trtls.toml")
    assert loaded.recipe is not None and not loaded.errors, [(f.code, f.message) for f in loaded.findings]
    result = asyncio.run(build_route(root / "trtls.toml", "shipped"))
    assert result.ok, result.message
    bundle = read_bundle(root / "build" / "shipped.bundle")
    assert set(bundle.sections) == {"model.onnx", "tokenizer.json"}
    assert bundle.read_section("model.onnx") == (root / "export" / "model.onnx").read_bytes()  # as shipped
    prov = bundle.header["trtls"]["provenance"]
    assert prov["source"] == "export" and prov["checkpoint_revision"] is None
    assert set(prov["checkpoint_files"]) == {"export/model.onnx", "export/golden.json", "export/tokenizer.json"}

    res = run_gates(load_recipe(root / "trtls.toml"), "shipped", [1, 3, 4], write_evidence=False)
    by = {c.name: c for c in res.checks}
    gate1 = [c for c in res.checks if c.gate == 1]
    assert [(c.name, c.code) for c in gate1] == [(n, code) for n, code, _ in NOT_CHECKED]
    assert all(c.status == "not_checked" and "starts from an export (no checkpoint)" in c.message for c in gate1)
    assert "allowed_licenses records the review only" in by["license"].message
    assert res.gate_status(3) == "supported", [
        (c.name, c.message) for c in res.checks if c.gate == 3 and c.status != "pass"
    ]
    assert by["bundle.provenance.checkpoint"].evidence["source"].startswith("the export's files")
    assert by["parity.tolerance:last_hidden_state"].status == "pass"
    ind = by["parity.reference_independent"]
    assert ind.status == "pass" and "recorded by numpy" in ind.message, ind.message

    # the shipped ONNX changed after the build: the bundle is not the export any more
    (root / "export" / "model.onnx").write_bytes((root / "export" / "model.onnx").read_bytes() + b"\0")
    res = run_gates(load_recipe(root / "trtls.toml"), "shipped", [3], write_evidence=False)
    by = {c.name: c for c in res.checks}
    assert (
        by["bundle.provenance.checkpoint"].status == "hold"
        and "export/model.onnx" in by["bundle.provenance.checkpoint"].message
    )
    assert by["bundle.artifacts"].status == "hold"


def test_a_route_with_no_checkpoint_says_what_an_export_route_needs(tmp_path: Path) -> None:
    root = shipped_export(tmp_path)
    text = (root / "trtls.toml").read_text()
    (root / "trtls.toml").write_text(
        text.split("golden_outputs =")[0].replace('reference = "golden"', 'reference = "onnx.reference"')
    )
    found = [f for f in load_recipe(root / "trtls.toml").errors if f.path[:2] == ("routes", "shipped")]
    assert found and "no `checkpoint`" in found[0].message and "golden_outputs" in found[0].message, found
    assert "missing required key 'checkpoint'" not in " ".join(f.message for f in found)
    (root / "trtls.toml").write_text(text.replace('"export/tokenizer.json"', '"export/missing.json"'))
    found = [f for f in load_recipe(root / "trtls.toml").errors if f.path[-2:] == ("tokenizer_files", 0)]
    assert found and found[0].code == "TRT104"


def test_the_cli_locks_nothing_and_builds_with_no_checkpoint_for_gate_1_to_read(tmp_path: Path) -> None:
    import subprocess
    import sys

    root = shipped_export(tmp_path)

    def cli(*args: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "trtls.cli.main", *args]
        return subprocess.run(command, cwd=root, capture_output=True, text=True, timeout=600)

    r = cli("route", "lock", "--route", "shipped")
    assert r.returncode == 0 and "nothing to lock: it starts from an export" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr and not (root / "trtls.lock.json").exists()
    r = cli("route", "build", "--route", "shipped")
    assert r.returncode == 0 and "the ONNX as shipped, no engine" in r.stdout, r.stdout + r.stderr
    assert "gate 1 has no checkpoint to read" in r.stderr
