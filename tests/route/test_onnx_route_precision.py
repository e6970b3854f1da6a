"""An ONNX Runtime route whose deployed model is converted (`[routes.X.precision] convert = "fp16"`), built for real
from the route sample's checkpoint: `trtls route build` exports the ONNX, converts it with ModelOpt AutoCast (the
build's precision step and cache) and bundles the conversion; gate 3 matches the bundle's model.onnx to the
conversion of the ONNX on disk with the recipe's settings (TRT707, from the conversion record in the provenance);
gate 4's runtime under test, ONNX Runtime, executes it (TRT811). A recipe edit the bundle was not rebuilt for holds.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from _lifecycle_sample import GENERATED, ROUTE, SAMPLE, only_tiny_ort, trtls
from onnx import TensorProto

from trtls.bundle import read_bundle, verify_bundle

pytestmark = pytest.mark.skipif(
    not os.environ.get("TRTLS_REQUIRE_PRECISION") and importlib.util.find_spec("modelopt") is None,
    reason="the precision extra (nvidia-modelopt) is not installed",
)

PRECISION = f'\n[routes.{ROUTE}.precision]\nconvert = "fp16"\n'


def _checks(root: Path, gate: int) -> dict[str, dict]:
    r = trtls("gates", "--route", ROUTE, "--gate", str(gate), "--format", "json", cwd=root)
    report = json.loads(r.stdout)
    return {c["name"]: c for c in report["gates"][str(gate)]["checks"]}


def test_a_converted_onnx_route_bundles_the_conversion_and_gate_3_ties_it_to_the_onnx_on_disk(tmp_path: Path) -> None:
    root = tmp_path / "route"
    shutil.copytree(SAMPLE, root, ignore=shutil.ignore_patterns(*GENERATED))
    (root / "trtls.toml").write_text(only_tiny_ort((root / "trtls.toml").read_text()) + PRECISION)
    r = subprocess.run([sys.executable, "make_checkpoint.py"], cwd=root, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    for args in (("route", "lock", "--route", ROUTE), ("route", "build", "--route", ROUTE)):
        r = trtls(*args, cwd=root)
        assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "converted to fp16" in r.stdout + r.stderr

    bundle_path = root / "build" / f"{ROUTE}.bundle"
    bundle = read_bundle(bundle_path)
    deployed = bundle.read_section("model.onnx")
    exported = (root / "build" / f"{ROUTE}.onnx").read_bytes()
    assert deployed != exported, "the bundle deploys the conversion, the recipe's onnx stays the export"
    model = onnx.load_from_string(deployed)
    assert any(n.op_type == "Cast" for n in model.graph.node)
    assert any(t.data_type == TensorProto.FLOAT16 for t in model.graph.initializer)
    assert bundle.header["precision"] == "fp16"
    conversion = bundle.header["trtls"]["provenance"]["precision_conversion"]
    assert conversion["low_precision_type"] == "fp16" and conversion["exclude_nodes"] == []
    assert conversion["output_sha256"] == bundle.section_sha256("model.onnx")
    assert verify_bundle(bundle_path) == []

    gate3 = _checks(root, 3)
    assert gate3["bundle.artifacts"]["status"] == "pass", gate3["bundle.artifacts"]
    assert "fp16 conversion" in gate3["bundle.artifacts"]["message"]
    gate4 = _checks(root, 4)
    assert gate4["parity.deployed_artifact"]["status"] == "pass", gate4["parity.deployed_artifact"]

    # the recipe now keeps fc1 in fp32, the bundle was not rebuilt: gate 3 says the bundle is stale, and why
    text = (root / "trtls.toml").read_text()
    (root / "trtls.toml").write_text(text.replace('convert = "fp16"\n', 'convert = "fp16"\nexclude_nodes = ["fc1"]\n'))
    gate3 = _checks(root, 3)
    stale = gate3["bundle.artifacts"]
    assert stale["status"] == "hold" and "exclude_nodes = []" in stale["message"], stale
    assert "['fc1']" in stale["message"]


def test_precision_on_an_engine_route_is_a_located_error(tmp_path: Path) -> None:
    from trtls.core.recipe import load_recipe

    (tmp_path / "ck").mkdir()
    (tmp_path / "m.onnx").write_bytes(b"onnx")
    (tmp_path / "trtls.toml").write_text(
        '[engines.e]\nonnx = "m.onnx"\noutput = "e.engine"\n\n[routes.r]\nengine = "e"\n'
        'checkpoint = { path = "ck", revision = "' + "0" * 40 + '" }\nintended_use = "t"\n'
        'allowed_licenses = ["mit"]\nbundle = "r.bundle"\nprecision = { convert = "fp16" }\n'
    )
    loaded = load_recipe(tmp_path / "trtls.toml")
    found = [f for f in loaded.findings if f.path[:3] == ("routes", "r", "precision")]
    assert [f.code for f in found] == ["TRT109"], [(f.code, f.path, f.message) for f in loaded.findings]
    assert "[engines.e.precision]" in found[0].message
    assert loaded.location(found[0]).startswith(str(tmp_path / "trtls.toml") + ":11:")
