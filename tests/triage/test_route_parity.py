"""`trtls reduce --route NAME` on a real parity reject (issue 21 §2, the third real case), end to end with real
processes: a model made here whose one layer an fp16 AutoCast conversion breaks on large activations — a Softplus
(Mamba's dt, Mish's inner op) on activations of ~100: ONNX Runtime's float16 Softplus returns NaN there, its float32
kernel x — is deployed converted, and

1. `trtls gates --route r --gate 4` rejects it with TRT805 (parity, the real gate code);
2. `trtls reduce --route r` names the first diverging tensor and its node, the injected one, with its error
   statistics, and writes its record atomically under .trtls/reduce/<id>/;
3. `trtls reduce --route r --fix` excludes that node from the conversion, converts again and runs gate 4 again: the
   parity checks pass, and the recipe edit is exactly the exclude_nodes addition.

The route runs its parity through ONNX Runtime on the converted ONNX the engine is built from
(`runtime_options.model`), against the unconverted ONNX through ONNX's reference evaluator. Its bundle's engine
section is a placeholder: no engine runs here (no GPU), so TRT811 holds, as it says; the parity verdicts are real.
"""

from __future__ import annotations

import difflib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from trtls.builds.precision import run_precision_step
from trtls.bundle import write_bundle
from trtls.core.cancel import CancelToken
from trtls.triage.parity_rerun import apply_edits

pytestmark = pytest.mark.skipif(
    not os.environ.get("TRTLS_REQUIRE_PRECISION") and importlib.util.find_spec("modelopt") is None,
    reason="the precision extra (nvidia-modelopt) is not installed",
)

INJECTED = "dt_softplus"
SCALE = 30.0  # reference inputs of std 30: dt_proj's outputs reach ~100, where fp16 Softplus gives NaN

RECIPE = """\
[engines.enc]
onnx = "models/enc.onnx"
output = "build/enc.engine"

[engines.enc.precision]
convert = "fp16"

[[engines.enc.profiles]]
input = "x"
min = [1, 32]
opt = [4, 32]
max = [8, 32]

[routes.r]
engine = "enc"
checkpoint = { path = "ck", id = "a/b", revision = "0000000000000000000000000000000000000000" }
intended_use = "test: an fp16 conversion that breaks one layer"
allowed_licenses = ["mit"]
bundle = "build/r.bundle"
runtime = "onnxruntime"
runtime_options = { model = "build/enc.fp16.onnx" }
reference = "onnx.reference"
reference_inputs = "inputs/reference.npz"
tolerances = { y = { atol = 5e-3, rtol = 5e-3 } }
"""


def write_model(path: Path) -> None:
    """x → dt_proj (MatMul) → dt_softplus (Softplus, the injected problem) → norm (LayerNormalization) → head."""
    rng = np.random.default_rng(0)
    init = [
        numpy_helper.from_array((rng.standard_normal((32, 32)) * 0.2).astype(np.float32), "W0"),
        numpy_helper.from_array(np.ones(32, np.float32), "gamma"),
        numpy_helper.from_array(np.zeros(32, np.float32), "beta"),
        numpy_helper.from_array((rng.standard_normal((32, 8)) * 0.2).astype(np.float32), "W2"),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "W0"], ["h"], name="dt_proj"),
        helper.make_node("Softplus", ["h"], ["g"], name=INJECTED),
        helper.make_node("LayerNormalization", ["g", "gamma", "beta"], ["n"], name="norm", axis=-1),
        helper.make_node("MatMul", ["n", "W2"], ["y"], name="head"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 8])],
        init,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    onnx.save(model, str(path))


def _workspace(ws: Path) -> None:
    for d in ("models", "inputs", "build", "ck"):
        (ws / d).mkdir()
    write_model(ws / "models" / "enc.onnx")
    x = (np.random.default_rng(7).standard_normal((4, 32)) * SCALE).astype(np.float32)
    np.savez(ws / "inputs" / "reference.npz", x=x)
    (ws / "trtls.toml").write_text(RECIPE)
    # the route's converted ONNX: the build's own precision step (ModelOpt AutoCast, its cache in .trtls/precision)
    converted = run_precision_step(
        ws / "models" / "enc.onnx", {"convert": "fp16"}, ws / ".trtls" / "precision", CancelToken()
    )
    shutil.copyfile(converted.onnx, ws / "build" / "enc.fp16.onnx")
    header = {
        "model_id": "a/b",
        "model_type": "test",
        "family": "test",
        "trt_version": "none (no engine runs here)",
        "trt_abi": "none",
        "gpu_name": "none",
        "created_at": "2026-01-01T00:00:00Z",
        "precision": "fp16",
        "runtime_strategy": "onnxruntime",
        "io_map": {},
    }
    sections = {
        "engine": b"placeholder: no engine runs here",
        "model.onnx": (ws / "build" / "enc.fp16.onnx").read_bytes(),
    }
    write_bundle(ws / "build" / "r.bundle", header, sections, provenance=None)


def _trtls(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trtls", *args], capture_output=True, text=True, timeout=900)


def _json(proc: subprocess.CompletedProcess[str]) -> dict:
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(lines[-1])


def test_a_parity_reject_is_traced_to_the_injected_layer_and_the_fix_passes_gate_4(tmp_path: Path) -> None:
    _workspace(tmp_path)
    before = (tmp_path / "trtls.toml").read_text()
    user_files = {p: p.read_bytes() for p in (tmp_path / "build").iterdir()}

    # 1. the parity gate rejects the route, TRT805 on the output
    gates = _trtls("gates", str(tmp_path), "--route", "r", "--gate", "4", "--format", "json")
    assert gates.returncode == 4, gates.stdout[-3000:] + gates.stderr[-3000:]
    report = json.loads(gates.stdout)
    checks = report["gates"]["4"]["checks"]
    assert report["gates_decision"] == "reject"
    tolerance = [c for c in checks if c["name"] == "parity.tolerance:y"]
    assert tolerance and tolerance[0]["status"] == "reject" and tolerance[0]["code"] == "TRT805", tolerance

    # 2. the first diverging tensor is the injected layer's, with its statistics; the record is under .trtls/reduce
    t0 = time.monotonic()
    found = _trtls("reduce", str(tmp_path), "--route", "r", "--json")
    search_s = time.monotonic() - t0
    assert found.returncode == 0, found.stderr[-3000:]
    record = _json(found)
    first = record["firstDiverging"]
    assert (first["node"], first["tensor"], first["op"]) == (INJECTED, "g", "Softplus"), first
    assert first["overflow"] is True and first["nonFinite"] > 0 and not first["withinTolerance"], first
    tensors = record["rounds"][0]["tensors"]
    assert tensors[0]["tensor"] == "h" and tensors[0]["withinTolerance"], "dt_proj's output, before it, holds"
    assert tensors[0]["rangeError"] < record["rangeRtol"] and tensors[0]["maxAbsError"] > 0
    assert record["route"] == "r" and record["engine"] == "enc"
    assert record["inputs"] == str(tmp_path / "inputs" / "reference.npz")
    assert record["outputTolerances"] == {"y": {"atol": 5e-3, "rtol": 5e-3}}
    assert record["proposal"] == {"precision.exclude_nodes": [INJECTED]}
    folder = Path(record["folder"])
    assert folder.parent == tmp_path / ".trtls" / "reduce"
    assert [p.name for p in folder.iterdir()] == ["divergence.json"], "written atomically: no temp file left"
    on_disk = json.loads((folder / "divergence.json").read_text())
    assert on_disk["firstDiverging"] == first and on_disk["parityRerun"] is None
    human = _trtls("reduce", str(tmp_path), "--route", "r")
    assert f"from node {INJECTED} (Softplus): overflow:" in human.stdout, human.stdout + human.stderr
    assert f"proposal: [precision] exclude_nodes = ['{INJECTED}']" in human.stdout

    # 3. --fix: excluded, converted again, gate 4 run again — parity passes; the edit is exactly exclude_nodes
    t0 = time.monotonic()
    fixed_proc = _trtls("reduce", str(tmp_path), "--route", "r", "--fix", "--json")
    fix_s = time.monotonic() - t0
    assert fixed_proc.returncode == 0, fixed_proc.stderr[-3000:]
    fixed = _json(fixed_proc)
    assert fixed["fixed"] is True and fixed["excludeNodes"] == [INJECTED], fixed["rounds"]
    assert len(fixed["rounds"]) == 2 and fixed["rounds"][1]["outputsPass"]
    rerun = fixed["parityRerun"]
    assert rerun["status"] == "ran" and rerun["gates"] == [4], rerun
    assert rerun["parityPasses"] is True
    by_name = {c["name"]: c for c in rerun["checks"]}
    assert by_name["parity.tolerance:y"]["status"] == "pass" and by_name["parity.tolerance:y"]["code"] == "TRT805"
    assert by_name["parity.finite"]["status"] == "pass"
    assert not [c for c in rerun["checks"] if c["status"] == "reject"], rerun["checks"]
    # what is left holds, and says why: the placeholder engine the route deploys was not executed here (TRT811)
    assert rerun["decision"] == "hold" and by_name["parity.deployed_artifact"]["status"] == "hold"
    # the model gate 4 ran is the reduction's copy of the conversion without the injected node
    ran = onnx.load(str(tmp_path / rerun["runtimeModel"]))
    casts = {n.name for n in ran.graph.node if n.op_type == "Cast"}
    assert {"h_cast_to_fp32", "g_cast_to_fp16"} <= casts, casts
    edited = apply_edits(before, rerun["recipeEdit"]["edits"])
    diff = [ln for ln in difflib.unified_diff(before.splitlines(), edited.splitlines(), lineterm="", n=0)]
    changed = [ln for ln in diff if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
    assert changed == [f'+exclude_nodes = ["{INJECTED}"]'], diff
    assert edited.index("exclude_nodes") > edited.index("[engines.enc.precision]") > 0
    human = _trtls("reduce", str(tmp_path), "--route", "r", "--fix")
    assert "gate 4 re-run with exclude_nodes += ['dt_softplus']" in human.stdout, human.stdout + human.stderr
    assert "pass        TRT805 parity.tolerance:y" in human.stdout

    # nothing the user owns was written: the recipe, the converted ONNX and the bundle are as they were
    assert (tmp_path / "trtls.toml").read_text() == before
    assert {p: p.read_bytes() for p in (tmp_path / "build").iterdir()} == user_files
    print(f"\nsearch {search_s:.1f} s (1 round), fix {fix_s:.1f} s ({len(fixed['rounds'])} rounds + gate 4)")
