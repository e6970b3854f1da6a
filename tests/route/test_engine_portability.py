"""Engine portability as a route hold (issue 33, "Will it load there"), through real gates runs on a copy of the route
sample whose engine is really built here (TensorRT-RTX, ahead of time): gate 5's `release.engine_portability` reads
the linked build's `engineValidity`. Built here (no GPU) it is not_checked with the reason; the same record carrying
what TensorRT-RTX answered on the lent H200 (tests/data/engine_validity/h200.json) holds, with the named reason and
TensorRT's sentence; a target outside what the engine loads on (core.loads_on) holds as "engine portability"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _lifecycle_sample import add_engine_route, copy, trtls

from trtls.builds.worker.engine_validity import NO_GPU, validity_record
from trtls.core.recipe import load_recipe
from trtls.gates.run import run_gates

H200 = json.loads((Path(__file__).parents[1] / "data" / "engine_validity" / "h200.json").read_text())
SENTENCE = H200["cases"]["default"]["logged"][0][1]


@pytest.fixture
def root(prepared, tmp_path) -> Path:
    root = copy(prepared, tmp_path / "route")
    add_engine_route(root, 'targets = ["SM89", "SM90", "NVIDIA H200"]\n')
    r = trtls("build", "--engine", "tiny", cwd=root)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    return root


def the_build(root: Path) -> Path:
    (summary,) = (root / ".trtls" / "runs").glob("tiny-*/summary.json")
    return summary


def as_on_the_h200(root: Path, case: str = "default") -> None:
    """The build's record as the same build on the H200 writes it: the device it saw and TensorRT-RTX's answer."""
    path = the_build(root)
    record = json.loads(path.read_text())
    status, code = H200["cases"][case]["returned"]
    record["engineValidity"] = validity_record(status.lower(), code, [tuple(x) for x in H200["cases"][case]["logged"]])
    record["target"].update(device=H200["device"], deviceComputeCapability=H200["deviceComputeCapability"])
    path.write_text(json.dumps(record, indent=2))


def gates(root: Path):
    loaded = load_recipe(root / "trtls.toml")
    assert loaded.recipe is not None
    result = run_gates(loaded, "trt", [2, 5], write_evidence=False)
    return result, {c.name: c for c in result.checks}


def test_built_here_without_a_gpu_it_is_not_checked_with_the_reason_never_a_pass(root):
    result, got = gates(root)
    check = got["release.engine_portability"]
    assert check.status == "not_checked" and check.code == "TRT911"
    assert check.message == f"engine portability: not measured: {NO_GPU}"
    assert check.path == ("routes", "trt", "engine")
    assert f"release.engine_portability: {check.message}" in result.summary.hold_reasons
    # the targets: the builder default loads on 8.9 but was not run there; 9.0 is none of its targets
    assert (
        got["release.portability:SM89"].status == "hold" and "not validated" in got["release.portability:SM89"].message
    )
    sm90 = got["release.portability:SM90"]
    assert sm90.status == "hold" and sm90.message == (
        "target SM90: engine portability: the engine will not load on it "
        "(it loads on 8.0 8.6 8.9 12.0 12.1 >12.0 (builder default (TensorRT-RTX)))"
    )
    assert sm90.evidence["loads_on"]["computeCapabilities"] == ["8.0", "8.6", "8.9", "12.0", "12.1", ">12.0"]
    # the route's runtime target carries the same answer, and the faces print it
    assert result.summary.runtime_target == "tensorrt_rtx"
    assert result.summary.runtime_target_loads_on == {
        "module": "tensorrt_rtx",
        "computeCapabilities": ["8.0", "8.6", "8.9", "12.0", "12.1", ">12.0"],
        "basis": "builder default (TensorRT-RTX)",
    }
    r = trtls("gates", "--route", "trt", "--gate", "5", cwd=root)
    assert "runtime tensorrt_rtx (loads on 8.0 8.6 8.9 12.0 12.1 >12.0 (builder default (TensorRT-RTX)))" in r.stdout, (
        r.stdout[-3000:] + r.stderr[-2000:]
    )


def test_an_onnx_route_s_runtime_target_loads_on_nothing_said(prepared, tmp_path):
    loaded = load_recipe(copy(prepared, tmp_path / "route") / "trtls.toml")
    result = run_gates(loaded, "tiny_ort", [5], write_evidence=False)
    assert result.summary.runtime_target == "onnxruntime" and result.summary.runtime_target_loads_on is None
    assert "release.engine_portability" not in {c.name for c in result.checks}


def test_what_tensorrt_rtx_said_on_the_h200_holds_the_route_with_its_own_sentence(root):
    as_on_the_h200(root)
    result, got = gates(root)
    check = got["release.engine_portability"]
    assert check.status == "hold" and check.code == "TRT911"
    assert check.message.startswith(
        "engine portability: the engine will not load on NVIDIA H200 (compute capability 9.0)"
    )
    assert check.message.endswith(SENTENCE)
    assert check.evidence["status"] == "invalid" and check.evidence["diagnosticsNames"] == ["UNSUPPORTED_CC"]
    assert check.evidence["supportedComputeCapabilities"] == ["8.0", "8.6", "8.9", "12.0", "12.1", ">12.0"]
    assert any(r.startswith("release.engine_portability: engine portability:") for r in result.summary.hold_reasons)
    h200 = got["release.portability:NVIDIA H200"]  # the GPU TensorRT-RTX was asked about, named as a target
    assert h200.status == "hold" and h200.message.startswith("target NVIDIA H200: engine portability:")


def test_a_valid_answer_passes_and_says_where(root):
    path = the_build(root)
    record = json.loads(path.read_text())
    record["engineValidity"] = validity_record("valid", 0, [])
    record["target"].update(device="NVIDIA GeForce RTX 4090", deviceComputeCapability="8.9")
    path.write_text(json.dumps(record))
    _, got = gates(root)
    check = got["release.engine_portability"]
    assert check.status == "pass"
    assert check.message == "engine portability: TensorRT-RTX says the engine loads on NVIDIA GeForce RTX 4090 " \
        "(compute capability 8.9)"  # fmt: skip


def test_with_no_build_recorded_it_is_not_checked_and_names_the_command(root):
    the_build(root).unlink()
    _, got = gates(root)
    check = got["release.engine_portability"]
    assert check.status == "not_checked"
    assert "no successful build of engine tiny is recorded (trtls build --engine tiny)" in check.message
