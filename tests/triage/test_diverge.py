"""`trtls reduce --diverge`: a real ModelOpt AutoCast fp16 conversion of a model with one layer fp16 cannot hold
(weights below fp16's normal range), compared layer by layer through ONNX Runtime: the first tensor out of tolerance
is that layer's, the proposal keeps it in fp32, and the fix, checked here independently, brings the outputs back."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from tests.triage.diverge_model import RECIPE
from tests.triage.diverge_model import write_model as _model

# A mark, not a module-level skip (as tests/builds/test_precision.py): CI sets TRTLS_REQUIRE_PRECISION, so there a
# missing ModelOpt fails instead of skipping.
pytestmark = pytest.mark.skipif(
    not os.environ.get("TRTLS_REQUIRE_PRECISION") and importlib.util.find_spec("modelopt") is None,
    reason="the precision extra (nvidia-modelopt) is not installed",
)


def _run(ws: Path, *args: str) -> tuple[int, dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "trtls", "reduce", str(ws), "--json", *args], capture_output=True, text=True, timeout=600
    )
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    assert lines, proc.stderr[-2000:]
    return proc.returncode, json.loads(lines[-1])


def test_the_first_diverging_layer_is_the_injected_one_and_the_fix_holds(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    _model(tmp_path / "models" / "enc.onnx")
    (tmp_path / "trtls.toml").write_text(RECIPE)
    x = np.random.default_rng(7).standard_normal((4, 64)).astype(np.float32)
    np.savez(tmp_path / "inputs.npz", x=x)
    code, record = _run(tmp_path, "--engine", "enc", "--diverge", "--inputs", str(tmp_path / "inputs.npz"))
    assert code == 0, record
    first = record["firstDiverging"]
    assert (first["node"], first["tensor"], first["op"]) == ("proj_tiny", "h", "MatMul")
    assert first["rangeError"] > record["rangeRtol"]
    assert [t["tensor"] for t in record["rounds"][0]["tensors"]][:2] == ["h0", "a0"], "compared in graph order"
    assert all(t["withinTolerance"] for t in record["rounds"][0]["tensors"][:2]), "what precedes it holds"
    assert record["proposal"] == {"precision.exclude_nodes": ["proj_tiny"]}

    code, fixed = _run(tmp_path, "--engine", "enc", "--diverge", "--fix", "--inputs", str(tmp_path / "inputs.npz"))
    assert code == 0 and fixed["fixed"] is True and fixed["excludeNodes"] == ["proj_tiny"], fixed
    # independently of the tool: the converted model it settled on, run here, against the fp32 model
    converted = fixed["rounds"][-1]["convertedModel"]
    assert any(n.name == "proj_tiny" and n.op_type == "MatMul" for n in onnx.load(converted).graph.node)
    ref = ort.InferenceSession(str(tmp_path / "models" / "enc.onnx")).run(None, {"x": x})[0]
    got = ort.InferenceSession(converted).run(None, {"x": x})[0]
    before = ort.InferenceSession(record["rounds"][0]["convertedModel"]).run(None, {"x": x})[0]
    assert np.abs(got - ref).max() / np.abs(ref).max() <= record["rangeRtol"]
    assert np.abs(before - ref).max() > 5 * np.abs(got - ref).max(), "the exclusion is what made the difference"


ENGINE_ROUTE = '\n[routes.r]\nengine = "enc"\n'
ONNX_ROUTE = '[routes.r]\nonnx = "models/enc.onnx"\n'
ROUTE_REST = (
    'checkpoint = { path = "ck", id = "a/b", revision = "' + "0" * 40 + '" }\n'
    'intended_use = "test"\nallowed_licenses = ["mit"]\nbundle = "build/r.bundle"\n'
)


@pytest.mark.parametrize(
    ("recipe", "said"),
    [
        # an engine route whose engine has no conversion
        (RECIPE.replace('[engines.enc.precision]\nconvert = "fp16"\n', "") + ENGINE_ROUTE, "no [precision] convert"),
        # a route that deploys its ONNX with no [routes.r.precision]
        (ONNX_ROUTE, "no [routes.r.precision] convert"),
    ],
    ids=["engine-route", "onnx-route"],
)
def test_a_route_that_deploys_its_onnx_unconverted_has_nothing_to_compare(
    tmp_path: Path, recipe: str, said: str
) -> None:
    (tmp_path / "trtls.toml").write_text(recipe + ROUTE_REST)
    (tmp_path / "models").mkdir()
    (tmp_path / "ck").mkdir()
    _model(tmp_path / "models" / "enc.onnx")
    proc = subprocess.run(
        [sys.executable, "-m", "trtls", "reduce", str(tmp_path), "--route", "r"], capture_output=True, text=True
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert said in proc.stderr and "Traceback" not in proc.stderr


def _strict(text: str) -> dict:
    """Standard JSON only: `Infinity`/`NaN` (Python's default) are refused, as browsers' and other parsers do."""

    def refuse(token: str) -> None:
        raise AssertionError(f"non-standard JSON constant {token}")

    return json.loads(text, parse_constant=refuse)


def test_an_fp16_overflow_is_recorded_as_standard_json_and_drawn_as_overflow(tmp_path: Path) -> None:
    """Inputs of ~3e4 overflow fp16 (max 65504) in the first MatMul of the real conversion: the converted tensors
    hold inf/NaN. The record says `overflow` with null errors (not `Infinity`), and the page draws no `nan`."""
    (tmp_path / "models").mkdir()
    _model(tmp_path / "models" / "enc.onnx")
    (tmp_path / "trtls.toml").write_text(RECIPE)
    x = (np.random.default_rng(7).standard_normal((4, 64)) * 3e4).astype(np.float32)
    np.savez(tmp_path / "inputs.npz", x=x)
    proc = subprocess.run(
        [sys.executable, "-m", "trtls", "reduce", str(tmp_path), "--engine", "enc", "--diverge", "--json"]
        + ["--inputs", str(tmp_path / "inputs.npz")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    printed = _strict(proc.stdout.strip().splitlines()[-1])
    folder = Path(printed["folder"])
    record = _strict((folder / "divergence.json").read_text())
    first = record["firstDiverging"]
    assert first["node"] == "embed" and first["overflow"] is True and first["nonFinite"] > 0, first
    assert first["rangeError"] is None and first["maxAbsError"] is None and not first["withinTolerance"]
    assert record["rounds"][0]["outputErrors"] == {"y": None}
    assert "overflow" in record["rule"]
    human = subprocess.run(
        [sys.executable, "-m", "trtls", "reduce", str(tmp_path), "--engine", "enc", "--diverge"]
        + ["--inputs", str(tmp_path / "inputs.npz")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert human.returncode == 0 and "from node embed (MatMul): overflow:" in human.stdout, human.stdout + human.stderr
    page = subprocess.run(
        [sys.executable, "-m", "trtls", "report", "--reduction", folder.name, "--recipe", str(tmp_path), "-o", "-"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert page.returncode == 0, page.stderr[-2000:]
    svg = page.stdout[page.stdout.index("<svg") : page.stdout.index("</svg>")]
    assert "nan" not in svg.replace("inf/NaN values", "").lower()
    assert '<rect class="overflow"' in svg and ">overflow</text>" in svg


def test_timeout_stops_the_divergence_search_with_exit_124_and_says_so(tmp_path: Path) -> None:
    """--timeout is a stop with source ci_timeout, as for the build reduction: the conversion (a child process that
    takes seconds to import ModelOpt, in a fresh workspace with no precision cache) is ended, exit 124."""
    (tmp_path / "models").mkdir()
    _model(tmp_path / "models" / "enc.onnx")
    (tmp_path / "trtls.toml").write_text(RECIPE)
    code, record = _run(tmp_path, "--engine", "enc", "--diverge", "--timeout", "0.01")
    assert code == 124, record
    assert record["cancelled"] is True and record["cancelSource"] == "ci_timeout"
    assert record["firstDiverging"] is None and record["rounds"] == []
    on_disk = _strict((Path(record["folder"]) / "divergence.json").read_text())
    assert on_disk["cancelSource"] == "ci_timeout"
