"""Runtime contract: real onnxruntime / onnx.reference children, a hanging and a crashing `command`, TensorRT
unavailable."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import trtls.runtimes as R


def tiny_model(path: Path, dim: int = 4) -> Path:
    """y = tanh(x @ W), x: [batch, dim] float32 (dynamic batch)."""
    w = (np.arange(dim * dim, dtype=np.float32).reshape(dim, dim) / (dim * dim)).ravel().tolist()
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Tanh", ["m"], ["y"])],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", dim])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", dim])],
        [helper.make_tensor("w", TensorProto.FLOAT, [dim, dim], w)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def feed(seed: int = 0, batch: int = 3) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(seed).standard_normal((batch, 4)).astype(np.float32)}


def expected(x: np.ndarray) -> np.ndarray:
    w = np.arange(16, dtype=np.float32).reshape(4, 4) / 16
    return np.tanh(x.astype(np.float64) @ w.astype(np.float64))


def script(tmp_path: Path, name: str, body: str) -> list[str]:
    p = tmp_path / name
    p.write_text(body)
    return [sys.executable, str(p)]


@pytest.fixture
def model(tmp_path: Path) -> Path:
    return tiny_model(tmp_path / "tiny.onnx")


@pytest.mark.parametrize("kind", ["onnxruntime", "onnx_reference"])
def test_python_adapters_run_real_models_in_a_child(model, kind):
    inputs = [feed(0), feed(1, batch=1)]
    res = R.run_inputs(R.RuntimeSpec(kind, model=str(model)), inputs)
    assert res.ok, res.summary()
    assert len(res.outputs) == 2
    for got, inp in zip(res.outputs, inputs, strict=True):
        np.testing.assert_allclose(got["y"], expected(inp["x"]), atol=1e-5)
        assert got["y"].dtype == np.float32
    assert res.peak_rss_bytes and res.peak_rss_bytes > 1024 * 1024  # a real python child was measured
    assert len(res.latencies_s) == 2 and res.load_s is not None


def test_npz_paths_are_accepted_as_inputs(model, tmp_path):
    p = R.save_npz(tmp_path / "in.npz", feed(2))
    res = R.run_inputs(R.RuntimeSpec("onnxruntime", model=str(model)), [p])
    assert res.ok
    np.testing.assert_allclose(res.outputs[0]["y"], expected(feed(2)["x"]), atol=1e-5)


@pytest.mark.parametrize(
    "bad, words",
    [
        ({"x": feed()["x"].astype(np.float64)}, "dtype float64"),
        ({"x": feed()["x"][..., None]}, "rank 3"),
        ({"x": np.zeros((0, 4), np.float32)}, "empty"),
        ({"x": np.full((2, 4), np.nan, np.float32)}, "NaN"),
        ({"x": np.zeros((20000, 4), np.float32)}, "oversized"),
        ({"z": feed()["x"]}, "missing input"),
    ],
)
def test_malformed_inputs_get_a_clean_error(model, bad, words):
    res = R.run_inputs(R.RuntimeSpec("onnxruntime", model=str(model), max_input_bytes=64 * 1024), [bad])
    assert res.status == "error"
    assert words in res.message


def test_a_hanging_command_is_cut_by_the_timeout_with_a_clean_error(tmp_path):
    argv = script(tmp_path, "hang.py", "import time\nwhile True:\n    time.sleep(1)\n")
    res = R.run_inputs(R.RuntimeSpec("command", command=argv, timeout_s=1.0), [feed()])
    assert res.status == "timeout"
    assert "timed out after 1 s" in res.message and "process group was killed" in res.message


def test_timeout_kills_the_whole_process_group(tmp_path):
    marker = tmp_path / "grandchild.pid"
    argv = script(
        tmp_path,
        "spawner.py",
        "import subprocess, sys, time\n"
        f"p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        f"open({str(marker)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(600)\n",
    )
    res = R.run_inputs(R.RuntimeSpec("command", command=argv, timeout_s=2.0), [feed()])
    assert res.status == "timeout"
    pid = int(marker.read_text())

    def state() -> str:
        try:
            return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return "gone"

    # SIGKILL went to the runtime's process group: the grandchild dies (gone, or a zombie when no init reaps it);
    # give the kernel a moment to finish tearing it down (R while exiting), but a live sleeper stays "S" forever
    for _ in range(100):
        if state() in ("gone", "Z", "X"):
            break
        time.sleep(0.05)
    assert state() in ("gone", "Z", "X")


def test_a_crashing_command_is_reported_as_a_crash(tmp_path):
    argv = script(tmp_path, "crash.py", "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
    res = R.run_inputs(R.RuntimeSpec("command", command=argv), [feed()])
    assert res.status == "crash"
    assert "SIGSEGV" in res.message


def test_command_runner_contract_in_npz_out_npz(tmp_path):
    argv = script(
        tmp_path,
        "runner.py",
        "import sys, numpy as np\n"
        "x = np.load(sys.argv[1])['x']\n"
        "if not np.isfinite(x).all():\n"
        "    sys.stderr.write('refused: NaN in x\\n'); sys.exit(2)\n"
        "np.savez(sys.argv[2], y=np.tanh(x.astype(np.float64) @ (np.arange(16, dtype=np.float32).reshape(4, 4) / "
        "16).astype(np.float64)).astype(np.float32))\n",
    )
    spec = R.RuntimeSpec("command", command=argv)
    ok = R.run_inputs(spec, [feed(3)])
    assert ok.ok, ok.summary()
    np.testing.assert_allclose(ok.outputs[0]["y"], expected(feed(3)["x"]), atol=1e-6)
    bad = R.run_inputs(spec, [{"x": np.full((1, 4), np.nan, np.float32)}])
    assert bad.status == "error" and "refused: NaN in x" in bad.message and bad.returncode == 2


def test_command_that_exits_zero_without_output_is_an_error(tmp_path):
    argv = script(tmp_path, "silent.py", "pass\n")
    res = R.run_inputs(R.RuntimeSpec("command", command=argv), [feed()])
    assert res.status == "error" and "missing or unreadable" in res.message


def test_missing_command_is_unavailable(tmp_path):
    res = R.run_inputs(R.RuntimeSpec("command", command=[str(tmp_path / "no-such-runner")]), [feed()])
    assert res.status == "unavailable" and "not found" in res.message


def test_tensorrt_reports_unavailable_here_without_crashing(tmp_path):
    engine = tmp_path / "tiny.engine"
    engine.write_bytes(b"not an engine, and there is no GPU to try it on anyway")
    spec = R.RuntimeSpec("tensorrt", model=str(engine))
    for res in (R.probe(spec), R.run_inputs(spec, [feed()])):
        assert res.status == "unavailable", res.summary()
        assert res.message  # the reason: no TensorRT module / no cuda-python / no CUDA device
        assert not res.outputs


def test_concurrent_requests_return_one_output_each(model):
    res = R.run_concurrent(R.RuntimeSpec("onnxruntime", model=str(model)), feed(4), 4)
    assert res.ok and len(res.outputs) == 4
    for out in res.outputs:
        np.testing.assert_array_equal(out["y"], res.outputs[0]["y"])


def test_benchmark_records_latencies_after_warmup(model):
    res = R.benchmark(R.RuntimeSpec("onnxruntime", model=str(model)), [feed()], warmup=2, iterations=7)
    assert res.ok
    assert len(res.latencies_s) == 7 and all(t > 0 for t in res.latencies_s)
    assert (
        res.first_run_s is not None and res.timed_wall_s is not None and res.timed_wall_s >= sum(res.latencies_s) * 0.5
    )


def test_perturb_is_fault_injection_and_changes_outputs(model):
    clean = R.run_inputs(R.RuntimeSpec("onnxruntime", model=str(model)), [feed()])
    noisy_spec = R.RuntimeSpec("onnxruntime", model=str(model), perturb=1e-3)
    noisy = R.run_inputs(noisy_spec, [feed()])
    assert "FAULT INJECTION" in noisy_spec.label
    diff = np.abs(noisy.outputs[0]["y"] - clean.outputs[0]["y"])
    assert 1e-5 < diff.mean() < 1e-2


def test_invalid_spec_is_an_error_not_an_exception():
    res = R.run_inputs(R.RuntimeSpec("nonsense"), [feed()])
    assert res.status == "error" and "unknown runtime kind" in res.message
    assert R.run_inputs(R.RuntimeSpec("command", command=["x"], perturb=0.1), [feed()]).status == "error"
