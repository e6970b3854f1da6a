"""The TensorRT engine's layer-wise comparison, the parts that run here: every layer output of a real TensorRT-RTX
network parsed from an ONNX is marked (and the marked network builds); where no engine can execute, the answer is
`not_checked` with the reason detected at runtime — before building, and from the runtime itself when it refuses
the built engine — never a verdict; and TensorRT is imported only in the child process."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.triage.diverge_model import RECIPE, write_model
from trtls.triage.trt_layers_run import UNAVAILABLE, execution_blocker

needs_builder = pytest.mark.skipif(
    not any(importlib.util.find_spec(m) for m in ("tensorrt", "tensorrt_rtx")), reason="no TensorRT builder module"
)


@needs_builder
def test_every_layer_output_of_a_real_network_is_marked_and_the_network_builds(tmp_path: Path) -> None:
    from trtls.builds.worker.adapter import load_builder_module
    from trtls.triage.trt_layers import Logged, build_marked, network_outputs, parse_marked

    write_model(tmp_path / "enc.onnx")
    bm = load_builder_module("auto")
    logged = Logged()
    builder, network, _parser, marked = parse_marked(bm, tmp_path / "enc.onnx", logged)
    layer_outputs = [
        network.get_layer(i).get_output(j).name
        for i in range(network.num_layers)
        for j in range(network.get_layer(i).num_outputs)
    ]
    assert marked == layer_outputs, "every output of every layer, in layer order"
    assert sorted(network_outputs(network)) == sorted(layer_outputs), "the network's outputs are exactly those"
    assert {"h0", "a0", "h", "n", "y"} <= set(marked), "each ONNX node's tensor is among them"
    engine = build_marked(bm, builder, network, {"x": np.ones((4, 64), np.float32)}, logged)
    assert len(engine) > 0


def test_where_no_engine_can_run_the_answer_is_not_checked_with_the_reason() -> None:
    blocker = execution_blocker()
    if blocker is None:
        pytest.skip("an engine can execute here: the comparison runs instead")
    from trtls.triage.trt_layers_run import tensorrt_layers

    result = tensorrt_layers(Path("/nonexistent.onnx"), Path("/nonexistent.onnx"), {}, Path("/nonexistent"),
                             None, 0.03, {})  # fmt: skip
    assert result.status == "not_checked" and result.reason == f"{UNAVAILABLE}: {blocker}"
    assert "firstDiverging" not in result, "no verdict"


@needs_builder
def test_the_runtime_refusing_the_built_engine_is_not_checked_with_its_own_error(tmp_path: Path) -> None:
    """Past the device check (check_device=False): the marked network is built for real and the runtime asked to
    deserialize it; where it refuses (no GPU, or a GPU TensorRT-RTX does not accept), its error is the reason."""
    from trtls.triage.trt_layers import layerwise

    if execution_blocker() is None:
        pytest.skip("an engine can execute here")
    write_model(tmp_path / "enc.onnx")
    np.savez(tmp_path / "in.npz", x=np.ones((4, 64), np.float32))
    job = {"reference": str(tmp_path / "enc.onnx"), "onnx": str(tmp_path / "enc.onnx"), "rtol": 0.03,
           "inputs": str(tmp_path / "in.npz"), "result": str(tmp_path / "r.json")}  # fmt: skip
    result = layerwise(job, check_device=False)
    assert result["status"] == "not_checked", result
    assert result["reason"].startswith(f"{UNAVAILABLE}: the TensorRT runtime refused the engine on this device: ")
    assert result["detected"] == "deserializing the built engine" and result["markedOutputs"] == 12
    assert "firstDiverging" not in result and "tensors" not in result


def test_tensorrt_is_imported_only_in_the_child() -> None:
    code = (
        "import sys, trtls.triage.diverge_run, trtls.triage.trt_layers_run, trtls.cli.reduce;"
        "bad = [m for m in ('tensorrt', 'tensorrt_rtx', 'trtls.triage.trt_layers') if m in sys.modules];"
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.skipif(
    not os.environ.get("TRTLS_REQUIRE_PRECISION") and importlib.util.find_spec("modelopt") is None,
    reason="the precision extra (nvidia-modelopt) is not installed",
)
def test_the_cli_says_not_checked_plainly_and_records_it(tmp_path: Path) -> None:
    blocker = execution_blocker()
    if blocker is None:
        pytest.skip("an engine can execute here")
    (tmp_path / "models").mkdir()
    write_model(tmp_path / "models" / "enc.onnx")
    (tmp_path / "trtls.toml").write_text(RECIPE)
    proc = subprocess.run(
        [sys.executable, "-m", "trtls", "reduce", str(tmp_path), "--engine", "enc", "--diverge", "--tensorrt"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"tensorrt layers: not_checked: {UNAVAILABLE}: {blocker}" in proc.stdout.splitlines()
    assert "from node proj_tiny" in proc.stdout, "the ONNX Runtime verdict stands beside it"
    folder = Path(proc.stderr.strip().splitlines()[-1].removeprefix("evidence: ")).parent
    record = json.loads((folder / "divergence.json").read_text())
    assert record["tensorrt"]["status"] == "not_checked" and record["tensorrt"]["reason"].endswith(blocker)
