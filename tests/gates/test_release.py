"""Gate 5 on real runs: measurements against thresholds (reject), baseline (missing → hold; regression →
reject), build time from summary.json, canary, and a rollback drill that really restores bytes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from trtls.bundle import sidecar_path, write_bundle
from trtls.core.gate_result import decide
from trtls.gates import release as G
from trtls.runtimes import RunResult, RuntimeSpec

ROUTE = ("routes", "tiny")
PATHS = {"route": ROUTE}
HEADER = {"model_id": "trtls/tiny", "model_type": "mlp", "trt_version": "10.13.0"}


def tiny_model(path: Path, scale: float = 1.0, nan: bool = False) -> Path:
    w = np.arange(16, dtype=np.float32).reshape(4, 4) / 16 * scale
    if nan:
        w[0, 0] = np.nan
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Tanh", ["m"], ["y"])],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])],
        [helper.make_tensor("w", TensorProto.FLOAT, [4, 4], w.ravel().tolist())],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def feed(seed: int = 0) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(seed).standard_normal((2, 4)).astype(np.float32)}


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def bundles(tmp_path: Path) -> tuple[Path, Path]:
    """(active = the new bundle in place, previous = the retained artifact), different models."""
    new_model = tiny_model(tmp_path / "new.onnx", scale=1.0)
    old_model = tiny_model(tmp_path / "old.onnx", scale=0.5)
    (tmp_path / "deploy").mkdir()
    (tmp_path / "store").mkdir()
    active = tmp_path / "deploy" / "tiny.bundle"
    previous = tmp_path / "store" / "tiny-prev.bundle"
    write_bundle(active, HEADER, {"model.onnx": new_model})
    write_bundle(previous, HEADER, {"model.onnx": old_model})
    return active, previous


@pytest.fixture
def spec(tmp_path: Path) -> RuntimeSpec:
    return RuntimeSpec("onnxruntime", model=str(tiny_model(tmp_path / "m.onnx")))


# ------------------------------------------------------------------------------------------ rollback


def test_rollback_restores_the_previous_bytes_then_the_new_ones(bundles):
    active, previous = bundles
    new_sha, prev_sha = sha(active), sha(previous)
    new_sidecar = sidecar_path(active).read_bytes()
    seen = {}

    def smoke(path: Path) -> RunResult:
        seen["sha_during_smoke"] = sha(path)  # what the runtime would load at that moment
        seen["sidecar_during_smoke"] = json.loads(sidecar_path(path).read_text())["file_sha256"]
        return G.bundle_smoke(path, [feed()])

    check = G.rollback_drill(active, previous, smoke, ROUTE + ("previous_bundle",))
    assert check.status == "pass", check.message
    assert check.code == "TRT908" and check.path == ROUTE + ("previous_bundle",)
    assert seen["sha_during_smoke"] == prev_sha  # the previous bundle really was in place
    assert seen["sidecar_during_smoke"] == prev_sha
    assert sha(active) == new_sha  # and the new one is back, byte for byte
    assert sidecar_path(active).read_bytes() == new_sidecar
    assert check.evidence["restored_sha256"] == prev_sha and check.evidence["final_sha256"] == new_sha
    assert not any(p.name.endswith("trtls-rollback-new") for p in active.parent.iterdir())


def test_no_previous_bundle_holds(bundles):
    active, _ = bundles
    check = G.rollback_drill(active, None, lambda p: RunResult("ok"))
    assert check.status == "hold" and "no previous bundle" in check.message
    missing = G.rollback_drill(active, active.parent / "nope.bundle", lambda p: RunResult("ok"))
    assert missing.status == "hold"


def test_failed_smoke_on_the_previous_bundle_rejects_and_leaves_the_new_one(tmp_path, bundles):
    active, _ = bundles
    broken = tmp_path / "store" / "broken.bundle"
    write_bundle(broken, HEADER, {"model.onnx": tiny_model(tmp_path / "nan.onnx", nan=True)})
    new_sha = sha(active)
    check = G.rollback_drill(active, broken, lambda p: G.bundle_smoke(p, [feed()]))
    assert check.status == "reject" and "smoke run failed" in check.message and "NaN" in check.message
    assert sha(active) == new_sha


def test_smoke_that_raises_still_restores_the_new_bundle(bundles):
    active, previous = bundles
    new_sha = sha(active)

    def boom(path: Path) -> RunResult:
        raise RuntimeError("smoke harness bug")

    with pytest.raises(RuntimeError):
        G.rollback_drill(active, previous, boom)
    assert sha(active) == new_sha


def test_previous_bundle_not_matching_its_sidecar_rejects(bundles):
    active, previous = bundles
    data = bytearray(previous.read_bytes())
    data[-1] ^= 0xFF  # corrupt after the sidecar was recorded
    previous.write_bytes(bytes(data))
    check = G.rollback_drill(active, previous, lambda p: RunResult("ok"))
    assert check.status == "reject" and "sidecar" in check.message


def test_engine_only_bundle_smoke_is_unavailable_here_so_rollback_is_not_checked(tmp_path, bundles):
    active, _ = bundles
    prev = tmp_path / "store" / "engine.bundle"
    write_bundle(prev, HEADER, {"engine": b"\x00" * 128})
    check = G.rollback_drill(active, prev, lambda p: G.bundle_smoke(p, [feed()]))
    assert check.status == "not_checked" and "cannot run here" in check.message


# --------------------------------------------------------------------------------- thresholds, baseline


def test_measurement_is_real_and_within_generous_thresholds(spec):
    m = G.measure(spec, [feed()], warmup=2, iterations=10)
    assert isinstance(m, G.Measurement)
    assert m.iterations == 10 and 0 < m.p50_ms <= m.p95_ms <= m.p99_ms
    assert m.throughput_rps > 0 and m.peak_rss_mib and m.peak_rss_mib > 1
    assert m.warmup_cost_s and m.warmup_cost_s >= m.first_run_s
    checks = {
        c.name: c for c in G.check_performance(m, G.Thresholds(latency_p99_ms=60_000, memory_mib=1_000_000), PATHS)
    }
    assert checks["release.latency"].status == "pass" and checks["release.memory"].status == "pass"


def test_exceeded_latency_and_memory_thresholds_reject_on_their_keys(spec):
    m = G.measure(spec, [feed()], warmup=1, iterations=5)
    assert isinstance(m, G.Measurement)
    t = G.Thresholds(latency_p95_ms=1e-9, memory_mib=1.0)  # nothing real fits: 1 ps, 1 MiB
    checks = {c.name: c for c in G.check_performance(m, t, PATHS)}
    assert checks["release.latency"].status == "reject" and "p95 latency" in checks["release.latency"].message
    assert checks["release.latency"].path == ROUTE + ("thresholds", "latency_p95_ms")
    assert checks["release.memory"].status == "reject" and checks["release.memory"].path == ROUTE + (
        "thresholds",
        "memory_mib",
    )


def test_a_figure_with_no_limit_is_not_checked_never_pass(spec):
    m = G.measure(spec, [feed()], warmup=1, iterations=3)
    checks = {c.name: c for c in G.check_performance(m, G.Thresholds(), PATHS)}
    for name in ("release.latency", "release.memory", "release.throughput", "release.warmup"):
        assert checks[name].status == "not_checked" and "against nothing" in checks[name].message, name
    assert decide(list(checks.values())) == "hold"


def test_baseline_missing_holds_then_recorded_atomically_then_compared(tmp_path, spec):
    m = G.measure(spec, [feed()], warmup=1, iterations=5)
    assert G.check_baseline(m, G.load_baseline(tmp_path, "tiny"), G.Thresholds()).status == "hold"
    path = G.write_baseline(tmp_path, "tiny", m)
    assert path == tmp_path / ".trtls" / "routes" / "tiny" / "baseline.json"
    assert [p.name for p in path.parent.iterdir()] == ["baseline.json"]  # no temp file left behind
    base = G.load_baseline(tmp_path, "tiny")
    assert base is not None and G.check_baseline(m, base, G.Thresholds()).status == "pass"
    slower = G.Measurement(**{**m.as_dict(), "p95_ms": m.p95_ms * 3})
    reg = G.check_baseline(slower, base, G.Thresholds(max_regression=0.25, regression_floor_ms=0))
    assert reg.status == "reject" and "p95 latency" in reg.message


def test_baseline_rise_under_the_noise_floor_is_not_a_regression(tmp_path, spec):
    """CI once rejected a good route: its p95 went 6.6 µs → 9.3 µs (+42 %) between two runs. A rise must clear
    both the relative rule and the absolute floor; over the floor the same percentage still rejects."""
    m = G.measure(spec, [feed()], warmup=1, iterations=5)
    base = {"measurement": {**m.as_dict(), "p95_ms": 0.0066, "peak_rss_mib": 100.0}}
    noisy = G.Measurement(**{**m.as_dict(), "p95_ms": 0.0093, "peak_rss_mib": 110.0})
    ok = G.check_baseline(noisy, base, G.Thresholds(max_regression=0.25))
    assert ok.status == "pass" and "under the 0.1 ms noise floor" in ok.message, ok.message
    assert ok.evidence["under_noise_floor"] and ok.evidence["compared"]["p95_ms"]["floor"] == 0.1
    real = G.Measurement(**{**m.as_dict(), "p95_ms": 0.0066 + 0.2, "peak_rss_mib": 100.0 + 40})
    bad = G.check_baseline(real, base, G.Thresholds(max_regression=0.25))
    assert bad.status == "reject" and "p95 latency" in bad.message and "peak memory" in bad.message
    # floors come from the recipe's thresholds table like every other threshold
    t = G.Thresholds.of({"regression_floor_ms": 0.001, "regression_floor_mib": 200})
    mixed = G.check_baseline(noisy, base, t)
    assert mixed.status == "reject" and "p95 latency" in mixed.message and "peak memory" not in mixed.message


def test_build_time_from_summary(tmp_path):
    s = tmp_path / "summary.json"
    s.write_text(json.dumps({"durationS": 42.5}))
    assert G.check_build_time(s, G.Thresholds(max_build_s=100)).status == "pass"
    over = G.check_build_time(s, G.Thresholds(max_build_s=10))
    assert over.status == "reject" and "42.5 s" in over.message
    assert G.check_build_time(s, G.Thresholds()).status == "not_checked"  # measured, but no limit to judge it by
    assert G.check_build_time(None, G.Thresholds()).status == "not_checked"
    (tmp_path / "bad.json").write_text("{}")
    assert G.check_build_time(tmp_path / "bad.json", G.Thresholds()).status == "hold"


def test_canary_pass_nan_and_latency(tmp_path, spec):
    assert G.check_canary(spec, [feed(1), feed(2)], G.Thresholds(latency_p99_ms=60_000)).status == "pass"
    nan_spec = RuntimeSpec("onnxruntime", model=str(tiny_model(tmp_path / "nan.onnx", nan=True)))
    bad = G.check_canary(nan_spec, [feed(1)], G.Thresholds())
    assert bad.status == "reject" and "NaN" in bad.message
    slow = G.check_canary(spec, [feed(1)], G.Thresholds(latency_p99_ms=1e-9))
    assert slow.status == "reject" and "ms >" in slow.message
    assert G.check_canary(spec, [], G.Thresholds()).status == "not_checked"


def test_tensorrt_measurement_unavailable_holds(tmp_path):
    engine = tmp_path / "e.engine"
    engine.write_bytes(b"\x00" * 32)
    checks = G.check_release(
        RuntimeSpec("tensorrt", model=str(engine)), [feed()], root=tmp_path, route="tiny", paths=PATHS
    )
    assert decide(checks) == "hold" and not any(c.status == "pass" and c.name == "release.measure" for c in checks)
    (m,) = [c for c in checks if c.name == "release.measure"]
    assert m.status == "not_checked" and m.code == "TRT909"


def test_full_gate5_supported_path(tmp_path, bundles, spec):
    active, previous = bundles
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"durationS": 3.0}))
    # max_regression is wide on purpose: microsecond latencies of a tiny model vary run to run
    t = {
        "latency_p99_ms": 60_000,
        "memory_mib": 1_000_000,
        "min_throughput_rps": 1e-3,
        "max_warmup_s": 600,
        "max_build_s": 600,
        "warmup": 1,
        "iterations": 5,
        "max_regression": 100.0,
    }
    kw = dict(
        root=tmp_path,
        route="tiny",
        thresholds=t,
        canary_inputs=[feed(3)],
        build_summary=summary,
        active_bundle=active,
        previous_bundle=previous,
        paths=PATHS,
    )
    first = G.check_release(spec, [feed()], update_baseline=True, **kw)
    assert decide(first) == "hold"  # no baseline yet
    assert [c.name for c in first if c.status != "pass"] == ["release.baseline"]
    second = G.check_release(spec, [feed()], **kw)
    assert decide(second) == "supported", [(c.name, c.message) for c in second if c.status != "pass"]
    assert G.record_of(second) == {"canary_inputs_status": "pass", "rollback_status": "tested"}


# ------------------------------------------------------------------------------- through the orchestrator


def test_gates_4_and_5_through_run_gates(tmp_path):
    from trtls.core.recipe import load_recipe
    from trtls.gates.run import run_gates
    from trtls.runtimes import save_npz

    tiny_model(tmp_path / "m.onnx")
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text("{}")
    (tmp_path / "out").mkdir()
    write_bundle(tmp_path / "out" / "r.bundle", HEADER, {"model.onnx": tmp_path / "m.onnx"})
    write_bundle(tmp_path / "out" / "prev.bundle", HEADER, {"model.onnx": tiny_model(tmp_path / "old.onnx", scale=0.5)})
    before = {p.name: (p.read_bytes(), p.stat().st_ino, p.stat().st_mode) for p in (tmp_path / "out").iterdir()}
    save_npz(tmp_path / "ref.npz", feed(1))
    save_npz(tmp_path / "canary.npz", feed(2))
    (tmp_path / "trtls.toml").write_text(
        '[engines.e]\nonnx = "m.onnx"\noutput = "out/e.engine"\n\n'
        "[routes.r]\n"
        'onnx = "m.onnx"\n'
        f'checkpoint = {{ path = "ckpt", revision = "{"a" * 40}" }}\n'
        'intended_use = "tests"\nallowed_licenses = ["apache-2.0"]\n'
        'bundle = "out/r.bundle"\nprevious_bundle = "out/prev.bundle"\n'
        'runtime = "onnxruntime"\nreference = "onnx.reference"\n'
        'reference_inputs = "ref.npz"\ncanary_inputs = "canary.npz"\n'
        "runtime_options = { perturb = 0.001, concurrency = 2 }\n"
        "[routes.r.thresholds]\nlatency_p99_ms = 60000\nmemory_mib = 100000\nwarmup = 1\niterations = 3\n"
    )
    loaded = load_recipe(tmp_path / "trtls.toml")
    assert loaded.recipe is not None, [f.message for f in loaded.findings]
    res = run_gates(loaded, "r", gates=[4, 5], write_evidence=False)
    checks = {(c.gate, c.name): c for c in res.checks}
    tol = checks[(4, "parity.tolerance:y")]
    assert (
        tol.status == "reject" and "elemwise check failed" in tol.message and tol.path == ("routes", "r", "tolerances")
    )
    assert checks[(4, "parity.fault_injection")].path == ("routes", "r", "runtime")
    assert checks[(5, "release.rollback")].status == "pass"
    assert checks[(5, "release.baseline")].status == "hold"
    assert checks[(5, "release.latency")].path == ("routes", "r", "thresholds", "latency_p99_ms")
    assert res.summary.validation_status == "reject"
    assert res.summary.canary_inputs_status == "pass" and res.summary.rollback_status == "tested"
    # the drill ran on copies: the user's bundles are byte-identical, same inode and mode, nothing left beside them
    after = {p.name: (p.read_bytes(), p.stat().st_ino, p.stat().st_mode) for p in (tmp_path / "out").iterdir()}
    assert after == before


@pytest.mark.parametrize("planted", [float("nan"), float("inf"), -5.0, "text", True])
def test_a_baseline_figure_that_is_no_positive_number_is_said_not_compared(tmp_path, spec, planted):
    """A baseline.json whose peak_rss_mib is NaN, Infinity, negative, text or a boolean (damaged, or planted): the
    memory comparison used to be left out in silence, the check saying "no regression" over p95 alone (inf even
    compared, as a fall of 100 %). It is said: the message and `not_compared` name the figure and its value."""
    m = G.measure(spec, [feed()], warmup=1, iterations=5)
    base = {"measurement": {**m.as_dict(), "peak_rss_mib": planted}}
    got = G.check_baseline(m, base, G.Thresholds())
    assert "peak_rss_mib" not in got.evidence["compared"], got.evidence
    assert got.evidence["not_compared"] and "peak memory not compared" in got.message, got.message
    assert "p95_ms" in got.evidence["compared"]  # what could be compared still is
