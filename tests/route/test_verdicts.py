"""Verdicts that say what they measured (issue 20, section 4), on copies of the supported route sample: a route build
runs gate 1's content checks first; `route lock` before `route build`; a TensorRT-RTX route is `tensorrt_rtx`; an
unmeasured route still lists its release checks as not_checked; TRT906 and TRT801 give advice that fits."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

import pytest
from _lifecycle_sample import ROUTE, add_engine_route, copy, trtls

from trtls.core.recipe import load_recipe
from trtls.gates.run import run_gates

SNAPSHOT = "checkpoints/models--trtls--tiny-mlp/snapshots/d065c296e0fef52b015f4755c02dda4b3064c1d2"


@pytest.fixture
def root(prepared, tmp_path) -> Path:
    return copy(prepared, tmp_path / "route")


def change_weights(root: Path) -> None:
    link = root / SNAPSHOT / "model.safetensors"
    data = bytearray(link.resolve().read_bytes())
    data[-1] ^= 0x10  # still a sound safetensors file: only the lock can tell
    sha = hashlib.sha256(data).hexdigest()
    (root / "checkpoints/models--trtls--tiny-mlp/blobs" / sha).write_bytes(bytes(data))
    link.unlink()
    os.symlink(Path("..") / ".." / "blobs" / sha, link)


def test_route_build_refuses_weights_changed_after_locking(root):
    bundle = root / "build" / "tiny_ort.bundle"
    before = bundle.read_bytes()
    change_weights(root)
    r = trtls("route", "build", "--route", ROUTE, cwd=root)
    assert r.returncode == 4, r.stdout + r.stderr
    assert "TRT512 error: gate 1 rejects the checkpoint: lock:" in r.stderr and "not built" in r.stderr
    assert bundle.read_bytes() == before  # nothing exported or written


def test_route_build_refuses_a_pickle_found_by_content(root):
    ckpt = root / "checkpoints" / "innocent"
    shutil.copytree(root / SNAPSHOT, ckpt, symlinks=False)  # a plain folder: the files themselves
    (ckpt / "extra_weights.dat").write_bytes(b"\x80\x04\x95\x00\x00\x00\x00\x00\x00\x00\x00.")  # pickle protocol 4
    text = (root / "trtls.toml").read_text()
    (root / "trtls.toml").write_text(
        text + '\n[routes.pk]\nonnx = "build/pk.onnx"\ncheckpoint = { path = "checkpoints/innocent", revision = '
        '"d065c296e0fef52b015f4755c02dda4b3064c1d2" }\nintended_use = "tests"\nallowed_licenses = ["apache-2.0"]\n'
        'bundle = "build/pk.bundle"\n'
    )
    r = trtls("route", "build", "--route", "pk", cwd=root)
    assert r.returncode == 4 and "TRT509" in r.stderr and "pickle" in r.stderr, r.stdout + r.stderr
    assert not (root / "build" / "pk.bundle").exists() and not (root / "build" / "pk.onnx").exists()
    r = trtls("route", "build", "--route", "pk", "--unverified-checkpoint", cwd=root)
    assert "WARNING (building anyway: --unverified-checkpoint)" in r.stderr and "TRT509" in r.stderr


def test_route_lock_comes_before_route_build_even_when_the_engine_onnx_is_not_written_yet(root):
    add_engine_route(root)
    path = root / "trtls.toml"
    path.write_text(path.read_text().replace('onnx = "model.onnx"', 'onnx = "build/tiny-export.onnx"', 1))
    r = trtls("route", "lock", "--route", "trt", cwd=root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "route trt: locked" in r.stdout


def test_a_tensorrt_rtx_route_is_tensorrt_rtx_and_lists_its_unmeasured_release_checks(root):
    add_engine_route(root)
    loaded = load_recipe(root / "trtls.toml")
    result = run_gates(loaded, "trt", [3, 5], write_evidence=False)
    assert result.summary.runtime_target == "tensorrt_rtx"
    got = {c.name: c for c in result.checks}
    for name in ("release.latency", "release.throughput", "release.memory", "release.warmup", "release.baseline"):
        assert got[name].status == "not_checked" and got[name].message.startswith("not measured: "), name


def test_trt906_names_the_flag_that_records_a_baseline():
    from trtls.gates.release import Measurement
    from trtls.gates.release.baseline import check_baseline
    from trtls.gates.release.measure import Thresholds

    m = Measurement("ort", 10, 1, 1.0, 1.0, 1.0, 1.0, 100.0, 10.0, None, 0.1, 0.1, 0.2)
    c = check_baseline(m, None, Thresholds())
    assert c.status == "hold" and "--record-baseline" in c.message and "update_baseline" not in c.message


@pytest.mark.skipif(
    Path("/proc/driver/nvidia/version").exists() or shutil.which("nvidia-smi") is not None,
    reason="this host has an NVIDIA driver",
)
def test_no_check_tells_a_host_without_a_gpu_to_install_cuda_python(tmp_path):
    """The TensorRT adapter says why an engine cannot run here before it looks for cuda-python, so every check that
    passes its reason on (TRT801, TRT811, gate 5's release.*) reads the same plain words."""
    import numpy as np

    from trtls.runtimes import RuntimeSpec, benchmark

    engine = tmp_path / "model.engine"
    engine.write_bytes(b"not run")
    res = benchmark(RuntimeSpec(kind="tensorrt", model=str(engine)), [{"x": np.zeros(2, np.float32)}], warmup=0,
                    iterations=1)  # fmt: skip
    assert res.status == "unavailable", res.summary()
    assert "no NVIDIA GPU or driver on this machine" in res.message and "pip install" not in res.message


def test_gate_3_alone_links_the_route_build_record_itself(root):
    loaded = load_recipe(root / "trtls.toml")
    result = run_gates(loaded, ROUTE, [3], write_evidence=False)
    (prov,) = [c for c in result.checks if c.name == "bundle.provenance.build"]
    assert prov.status == "pass", prov.message
    assert result.gates_decision == "supported"


def test_the_bundle_carries_the_files_a_deployment_reads_beside_the_weights(root):
    from trtls.bundle import read_bundle

    r = trtls("route", "build", "--route", ROUTE, cwd=root)
    assert r.returncode == 0, r.stdout + r.stderr
    b = read_bundle(root / "build" / "tiny_ort.bundle")
    assert "tokenizer_config.json" in b.sections
    carried = b"".join(b.iter_section("tokenizer_config.json"))
    assert carried == (root / SNAPSHOT / "tokenizer_config.json").read_bytes()
