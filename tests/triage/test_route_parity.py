"""`trtls reduce --route NAME` on a real parity reject (issue 21 §2, the third real case), end to end with real
processes: a model made here whose one layer an fp16 AutoCast conversion breaks on large activations — a Softplus
(Mamba's dt, Mish's inner op) on activations of ~100: ONNX Runtime's float16 Softplus returns NaN there, its float32
kernel x — is deployed converted.

The route deploys its ONNX through ONNX Runtime (no engine): `[routes.r.precision] convert = "fp16"`, so its bundle's
model.onnx is the export converted by the build's precision step (`route.onnx_route.deployed_onnx`, what `trtls route
build` runs after the export; this made-up model has no checkpoint exporter, so the test writes the bundle with it),
and gate 4's reference (`onnx.reference`) runs the unconverted `onnx`. Everything gate 4 judges runs here:

1. `trtls gates --route r --gate 4` rejects it with TRT805 (parity, the real gate code) — ONNX Runtime executed the
   deployed artifact (TRT811 passes);
2. `trtls reduce --route r` names the first diverging tensor and its node, the injected one, with its error
   statistics, and writes its record atomically under .trtls/reduce/<id>/;
3. `trtls reduce --route r --fix` excludes that node from the conversion, converts again and runs gate 4 again on a
   what-if bundle (the route's, with the fixed model.onnx): every check passes and gate 4 is `supported`; the recipe
   edit is exactly the exclude_nodes addition to [routes.r.precision];
4. with that edit applied and the bundle rebuilt, `trtls gates --route r --gate 4` measures `supported` on the
   user's own files.

The engine route (`[engines.enc.precision]`, runtime under test ONNX Runtime on the converted ONNX the engine is built
from) is kept as the second case: there the fix's parity checks pass, and TRT811 holds, as it says, because the
TensorRT engine the route deploys cannot execute here (no GPU).
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
from trtls.bundle import read_bundle, write_bundle
from trtls.core.cancel import CancelToken
from trtls.core.recipe import load_recipe
from trtls.core.route import route_model
from trtls.core.tomlpos import apply_edits
from trtls.route.onnx_route import deployed_onnx

pytestmark = pytest.mark.skipif(
    not os.environ.get("TRTLS_REQUIRE_PRECISION") and importlib.util.find_spec("modelopt") is None,
    reason="the precision extra (nvidia-modelopt) is not installed",
)

INJECTED = "dt_softplus"
SCALE = 30.0  # reference inputs of std 30: dt_proj's outputs reach ~100, where fp16 Softplus gives NaN
WAIVER = "the reference is the unconverted export: this route checks the conversion, not the export"

ROUTE = """checkpoint = { path = "ck", id = "a/b", revision = "0000000000000000000000000000000000000000" }
intended_use = "test: an fp16 conversion that breaks one layer"
allowed_licenses = ["mit"]
bundle = "build/r.bundle"
runtime = "onnxruntime"
reference = "onnx.reference"
reference_inputs = "inputs/reference.npz"
tolerances = { y = { atol = 5e-3, rtol = 5e-3 } }
"""

ONNX_RECIPE = f"""\
[routes.r]
onnx = "models/enc.onnx"
{ROUTE}tolerance_precision = "fp16"
waive = {{ "parity.reference_independent" = "{WAIVER}" }}

[routes.r.precision]
convert = "fp16"
"""

ENGINE_RECIPE = f"""\
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
{ROUTE}runtime_options = {{ model = "build/enc.fp16.onnx" }}
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


HEADER = {
    "model_id": "a/b",
    "model_type": "test",
    "family": "test",
    "trt_version": "none (the route deploys the ONNX model)",
    "trt_abi": "none",
    "gpu_name": "none (ONNX Runtime on the CPU)",
    "created_at": "2026-01-01T00:00:00Z",
    "precision": "fp16",
    "runtime_strategy": "onnxruntime",
    "io_map": {},
}


def build_onnx_bundle(ws: Path) -> None:
    """The route's bundle as `trtls route build` writes it after the export: model.onnx is `deployed_onnx`'s, the
    export converted with the recipe's [routes.r.precision] as it reads now (the precision cache in .trtls)."""
    loaded = load_recipe(ws / "trtls.toml")
    assert loaded.recipe is not None, [f.message for f in loaded.findings]
    onnx_path = ws / "models" / "enc.onnx"
    deployed, conversion = deployed_onnx(loaded, route_model(loaded, "r"), onnx_path, onnx_path.read_bytes())
    assert conversion is not None and conversion["low_precision_type"] == "fp16"
    write_bundle(ws / "build" / "r.bundle", HEADER, {"model.onnx": deployed}, provenance={"precision": conversion})


def _workspace(ws: Path, recipe: str) -> None:
    for d in ("models", "inputs", "build", "ck"):
        (ws / d).mkdir()
    write_model(ws / "models" / "enc.onnx")
    x = (np.random.default_rng(7).standard_normal((4, 32)) * SCALE).astype(np.float32)
    np.savez(ws / "inputs" / "reference.npz", x=x)
    (ws / "trtls.toml").write_text(recipe)
    if recipe is ONNX_RECIPE:
        build_onnx_bundle(ws)
        return
    # the engine route: its converted ONNX, the build's own precision step (ModelOpt AutoCast, cache in .trtls)
    converted = run_precision_step(
        ws / "models" / "enc.onnx", {"convert": "fp16"}, ws / ".trtls" / "precision", CancelToken()
    )
    shutil.copyfile(converted.onnx, ws / "build" / "enc.fp16.onnx")
    sections = {
        "engine": b"placeholder: no engine runs here",
        "model.onnx": (ws / "build" / "enc.fp16.onnx").read_bytes(),
    }
    write_bundle(ws / "build" / "r.bundle", {**HEADER, "trt_version": "none (no engine runs here)"}, sections)


def _trtls(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trtls", *args], capture_output=True, text=True, timeout=900)


def _json(proc: subprocess.CompletedProcess[str]) -> dict:
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(lines[-1])


def _gate4(ws: Path) -> tuple[subprocess.CompletedProcess[str], dict, dict]:
    gates = _trtls("gates", str(ws), "--route", "r", "--gate", "4", "--format", "json")
    report = json.loads(gates.stdout)
    return gates, report, {c["name"]: c for c in report["gates"]["4"]["checks"]}


def _only_change(before: str, edits: list[dict]) -> tuple[str, list[str]]:
    edited = apply_edits(before, edits)
    diff = list(difflib.unified_diff(before.splitlines(), edited.splitlines(), lineterm="", n=0))
    return edited, [ln for ln in diff if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]


def test_a_parity_reject_is_traced_to_the_injected_layer_and_the_fix_ends_gate_4_supported(tmp_path: Path) -> None:
    _workspace(tmp_path, ONNX_RECIPE)
    before = (tmp_path / "trtls.toml").read_text()
    user_files = {p: p.read_bytes() for p in (tmp_path / "build").iterdir()}
    deployed = read_bundle(tmp_path / "build" / "r.bundle").read_section("model.onnx")
    assert deployed != (tmp_path / "models" / "enc.onnx").read_bytes(), "the bundle deploys the conversion"

    # 1. the parity gate rejects the route, TRT805 on the output; ONNX Runtime executed the deployed artifact
    gates, report, by_name = _gate4(tmp_path)
    assert gates.returncode == 4, gates.stdout[-3000:] + gates.stderr[-3000:]
    assert report["gates_decision"] == "reject"
    assert by_name["parity.tolerance:y"]["status"] == "reject" and by_name["parity.tolerance:y"]["code"] == "TRT805"
    assert by_name["parity.deployed_artifact"]["status"] == "pass", by_name["parity.deployed_artifact"]

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
    assert record["route"] == "r" and record["engine"] is None and record["precisionTable"] == "routes.r.precision"
    assert record["reference"] == str(tmp_path / "models" / "enc.onnx")
    assert record["inputs"] == str(tmp_path / "inputs" / "reference.npz")
    assert record["outputTolerances"] == {"y": {"atol": 5e-3, "rtol": 5e-3}}
    assert record["proposal"] == {"precision.exclude_nodes": [INJECTED]}
    folder = Path(record["folder"])
    assert folder.parent == tmp_path / ".trtls" / "reduce" and folder.name.startswith("diverge-r-")
    assert [p.name for p in folder.iterdir()] == ["divergence.json"], "written atomically: no temp file left"
    on_disk = json.loads((folder / "divergence.json").read_text())
    assert on_disk["firstDiverging"] == first and on_disk["parityRerun"] is None
    human = _trtls("reduce", str(tmp_path), "--route", "r")
    assert f"from node {INJECTED} (Softplus): overflow:" in human.stdout, human.stdout + human.stderr
    assert f"proposal: [precision] exclude_nodes = ['{INJECTED}']" in human.stdout

    # 3. --fix: excluded, converted again, gate 4 run again on the what-if bundle — every check passes
    t0 = time.monotonic()
    fixed_proc = _trtls("reduce", str(tmp_path), "--route", "r", "--fix", "--json")
    fix_s = time.monotonic() - t0
    assert fixed_proc.returncode == 0, fixed_proc.stderr[-3000:]
    fixed = _json(fixed_proc)
    assert fixed["fixed"] is True and fixed["excludeNodes"] == [INJECTED], fixed["rounds"]
    assert len(fixed["rounds"]) == 2 and fixed["rounds"][1]["outputsPass"]
    rerun = fixed["parityRerun"]
    assert rerun["status"] == "ran" and rerun["gates"] == [4], rerun
    assert rerun["bundleIsTheConversion"] is True, "the route's bundle deploys the conversion the search compared"
    checks = {c["name"]: c for c in rerun["checks"]}
    assert rerun["parityPasses"] is True and rerun["decision"] == "supported", rerun["checks"]
    assert checks["parity.tolerance:y"]["status"] == "pass" and checks["parity.tolerance:y"]["code"] == "TRT805"
    assert checks["parity.finite"]["status"] == "pass"
    assert checks["parity.deployed_artifact"]["status"] == "pass", "ONNX Runtime executed the fixed bundle's model"
    assert checks["parity.reference_independent"]["waived"] == WAIVER
    assert all(c["status"] == "pass" or c.get("waived") for c in rerun["checks"]), rerun["checks"]
    # the bundle gate 4 ran is the route's with model.onnx the reduction's conversion without the injected node
    what_if = read_bundle(tmp_path / rerun["bundle"])
    fix_folder = Path(fixed["folder"]).relative_to(tmp_path)
    assert Path(rerun["bundle"]).parent == Path(rerun["runtimeModel"]).parent == fix_folder
    assert what_if.read_section("model.onnx") == (tmp_path / rerun["runtimeModel"]).read_bytes()
    assert what_if.header["trtls"]["provenance"]["what_if"]["exclude_nodes_added"] == [INJECTED]
    ran = onnx.load(str(tmp_path / rerun["runtimeModel"]))
    casts = {n.name for n in ran.graph.node if n.op_type == "Cast"}
    assert {"h_cast_to_fp32", "g_cast_to_fp16"} <= casts, casts
    edited, changed = _only_change(before, rerun["recipeEdit"]["edits"])
    assert changed == [f'+exclude_nodes = ["{INJECTED}"]'], changed
    assert edited.index("exclude_nodes") > edited.index("[routes.r.precision]") > 0
    human = _trtls("reduce", str(tmp_path), "--route", "r", "--fix")
    assert f"gate 4 re-run with exclude_nodes += ['{INJECTED}']" in human.stdout, human.stdout + human.stderr
    assert "): supported" in human.stdout and "pass        TRT805 parity.tolerance:y" in human.stdout

    # nothing the user owns was written: the recipe and the bundle are as they were
    assert (tmp_path / "trtls.toml").read_text() == before
    assert {p: p.read_bytes() for p in (tmp_path / "build").iterdir()} == user_files

    # 4. the quick fix applied, the bundle rebuilt: the gate measures the same on the user's files
    (tmp_path / "trtls.toml").write_text(edited)
    build_onnx_bundle(tmp_path)
    assert read_bundle(tmp_path / "build" / "r.bundle").read_section("model.onnx") == what_if.read_section("model.onnx")
    gates, report, by_name = _gate4(tmp_path)
    assert gates.returncode == 0 and report["gates_decision"] == "supported", gates.stdout[-3000:]
    assert by_name["parity.tolerance:y"]["status"] == by_name["parity.deployed_artifact"]["status"] == "pass"
    print(f"\nsearch {search_s:.1f} s (1 round), fix {fix_s:.1f} s ({len(fixed['rounds'])} rounds + gate 4)")


def test_on_an_engine_route_the_fix_passes_parity_and_trt811_holds_for_the_engine(tmp_path: Path) -> None:
    _workspace(tmp_path, ENGINE_RECIPE)
    before = (tmp_path / "trtls.toml").read_text()
    fixed_proc = _trtls("reduce", str(tmp_path), "--route", "r", "--fix", "--json")
    assert fixed_proc.returncode == 0, fixed_proc.stderr[-3000:]
    fixed = _json(fixed_proc)
    assert fixed["firstDiverging"]["node"] == INJECTED and fixed["engine"] == "enc"
    assert fixed["precisionTable"] == "engines.enc.precision"
    rerun = fixed["parityRerun"]
    assert rerun["status"] == "ran" and rerun["parityPasses"] is True, rerun
    checks = {c["name"]: c for c in rerun["checks"]}
    assert checks["parity.tolerance:y"]["status"] == "pass"
    assert not [c for c in rerun["checks"] if c["status"] == "reject"], rerun["checks"]
    # what is left holds, and says why: the placeholder engine the route deploys was not executed here (TRT811)
    assert rerun["decision"] == "hold" and checks["parity.deployed_artifact"]["status"] == "hold"
    assert "bundle" not in rerun, "the engine route's own bundle is read, no what-if bundle"
    edited, changed = _only_change(before, rerun["recipeEdit"]["edits"])
    assert changed == [f'+exclude_nodes = ["{INJECTED}"]'], changed
    assert edited.index("exclude_nodes") > edited.index("[engines.enc.precision]") > 0
    assert (tmp_path / "trtls.toml").read_text() == before
