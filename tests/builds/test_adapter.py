"""The builder adapter against the real tensorrt_rtx on this CPU machine. Nothing fakes the builder.

The only stand-ins are fake *modules named tensorrt* in sys.modules, which is exactly what a broken
PyPI stub or an old TensorRT looks like to the import path under test.
"""

from __future__ import annotations

import re
import subprocess
import sys
import types
import warnings
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from trtls.builds.worker import adapter
from trtls.builds.worker.adapter import BuilderUnavailable

SERVER = Path(adapter.__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bm() -> adapter.BuilderModule:
    return adapter.load_builder_module("tensorrt_rtx")


@pytest.fixture(scope="module")
def tiny_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Conv + Relu with a dynamic batch: builds in well under a second."""
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((8, 3, 3, 3)).astype(np.float32), "w")
    graph = helper.make_graph(
        [
            helper.make_node("Conv", ["input", "w"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c"], ["output"]),
        ],
        "tiny",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [-1, 3, 16, 16])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [-1, 8, 16, 16])],
        [w],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = tmp_path_factory.mktemp("onnx") / "tiny.onnx"
    onnx.save(model, path)
    return path


PROFILE = {"input": "input", "min": [1, 3, 16, 16], "opt": [2, 3, 16, 16], "max": [4, 3, 16, 16]}


def _session(bm: adapter.BuilderModule, onnx_path: Path):
    logs: list[tuple[str, str]] = []
    logger = adapter.make_logger(bm, lambda severity, msg: logs.append((severity, msg)))
    builder = bm.trt.Builder(logger)
    network = builder.create_network(0)
    errors = adapter.parse_onnx(bm, builder, network, logger, onnx_path)
    return logs, logger, builder, network, builder.create_builder_config(), errors


# ---------------------------------------------------------------- finding the builder


def test_loads_tensorrt_rtx(bm: adapter.BuilderModule) -> None:
    assert bm.name == "tensorrt_rtx" and bm.is_rtx
    assert bm.trt.__name__ == "tensorrt_rtx"
    assert bm.version == bm.trt.__version__
    assert bm.version_tuple >= (1, 0) and all(isinstance(p, int) for p in bm.version_tuple)
    assert adapter.make_progress_monitor_base(bm) is bm.trt.IProgressMonitor


def test_auto_prefers_tensorrt_then_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tensorrt", None)  # `import tensorrt` now raises ImportError
    assert adapter.load_builder_module("auto").name == "tensorrt_rtx"


def test_importable_stub_without_builder_counts_as_absent(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tensorrt", types.ModuleType("tensorrt"))  # what the PyPI stub can look like
    assert adapter.load_builder_module("auto").name == "tensorrt_rtx"
    with pytest.raises(BuilderUnavailable, match="no Builder") as info:
        adapter.load_builder_module("tensorrt")
    assert adapter.INSTALL_HINT in str(info.value)


def test_old_tensorrt_is_refused_and_auto_moves_on(monkeypatch: pytest.MonkeyPatch) -> None:
    old = types.ModuleType("tensorrt")
    old.__version__ = "8.6.1"
    old.Builder = object  # importable and looks like a builder, but predates IProgressMonitor
    monkeypatch.setitem(sys.modules, "tensorrt", old)
    assert adapter.load_builder_module("auto").name == "tensorrt_rtx"
    with pytest.raises(BuilderUnavailable, match=r"tensorrt 8\.6\.1 is too old.*>= 9\.0"):
        adapter.load_builder_module("tensorrt")


def test_neither_module_gives_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tensorrt", None)
    monkeypatch.setitem(sys.modules, "tensorrt_rtx", None)
    with pytest.raises(BuilderUnavailable) as info:
        adapter.load_builder_module("auto")
    message = str(info.value)
    assert "pip install tensorrt-rtx-cu13" in message
    assert "tensorrt:" in message and "tensorrt_rtx:" in message  # says what was tried


def test_unknown_preference_is_an_error() -> None:
    with pytest.raises(ValueError, match="auto"):
        adapter.load_builder_module("tensorflow")


@pytest.mark.parametrize("version", ["8.6.1", "8.6.1.6", "7.2.3", "", "unknown"])
def test_check_version_refuses_tensorrt_before_9(version: str) -> None:
    with pytest.raises(BuilderUnavailable) as info:
        adapter.check_version("tensorrt", version)
    message = str(info.value)
    assert f"tensorrt {version} is too old" in message
    assert "TensorRT >= 9.0" in message and "IProgressMonitor" in message


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("tensorrt", "9.0.0"),
        ("tensorrt", "10.8.0.43"),
        ("tensorrt", "11.0.0b1"),
        ("tensorrt_rtx", "1.0.0"),
        ("tensorrt_rtx", "1.7.1.116"),
    ],
)
def test_check_version_accepts(name: str, version: str) -> None:
    adapter.check_version(name, version)


def test_parse_version() -> None:
    assert adapter.parse_version("10.8.0.43") == (10, 8, 0, 43)
    assert adapter.parse_version("10.0.0b6") == (10, 0)
    assert adapter.parse_version("garbage") == ()


# ---------------------------------------------------------------- a real build


def test_real_build_with_settings_logger_and_monitor(bm: adapter.BuilderModule, tiny_onnx: Path) -> None:
    logs, _, builder, network, config, errors = _session(bm, tiny_onnx)
    assert errors == []
    effective = adapter.apply_builder_settings(
        bm,
        builder,
        config,
        {
            "optimization_level": 1,
            "max_aux_streams": 0,
            "tiling_level": "fast",
            "max_num_tactics": 4,
            "avg_timing_iterations": 2,
            "workspace_mib": 256,
            "compute_capabilities": ["sm89", "SM120"],
            "hardware_compatibility_level": "ampere_plus",
            "l2_unused": None,  # None means "not set": skipped, even when the key is unknown
        },
    )
    assert effective == {
        "optimization_level": 1,
        "max_aux_streams": 0,
        "tiling_level": "fast",
        "max_num_tactics": 4,
        "avg_timing_iterations": 2,
        "workspace_mib": 256,
        "compute_capabilities": ["SM89", "SM120"],
        "not_applied": {"hardware_compatibility_level": "unsupported in TensorRT-RTX (use compute_capabilities)"},
    }
    # read back from the config, not echoed
    assert config.builder_optimization_level == 1
    assert config.tiling_optimization_level == bm.trt.TilingOptimizationLevel.FAST
    assert config.get_memory_pool_limit(bm.trt.MemoryPoolType.WORKSPACE) == 256 << 20
    assert adapter.add_profiles(bm, builder, config, [PROFILE], network=network) == [0]

    base = adapter.make_progress_monitor_base(bm)

    class Counting(base):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            base.__init__(self)
            self.events: list[str] = []

        def phase_start(self, phase_name, parent_phase, num_steps):
            self.events.append("start")

        def step_complete(self, phase_name, step):
            self.events.append("step")
            return True

        def phase_finish(self, phase_name):
            self.events.append("finish")

    monitor = Counting()
    config.progress_monitor = monitor
    plan = builder.build_serialized_network(network, config)
    assert plan is not None and plan.nbytes > 0
    assert monitor.events.count("start") == monitor.events.count("finish") > 0
    assert "step" in monitor.events
    severities = {s for s, _ in logs}
    assert severities and severities <= set(adapter.SEVERITY_NAMES)
    assert "INFO" in severities
    assert all(isinstance(m, str) for _, m in logs)


def test_settings_default_and_clamped_values_are_read_back(bm: adapter.BuilderModule, tiny_onnx: Path) -> None:
    _, _, builder, _, config, _ = _session(bm, tiny_onnx)
    assert adapter.apply_builder_settings(bm, builder, config, {}) == {}
    # TensorRT-RTX 1.7 clamps an out-of-range level without an error: the evidence must show 5, not 9.
    assert adapter.apply_builder_settings(bm, builder, config, {"optimization_level": 9}) == {"optimization_level": 5}
    assert adapter.apply_builder_settings(bm, builder, config, {"compute_capabilities": ["CURRENT"]}) == {
        "compute_capabilities": ["CURRENT"]
    }


@pytest.mark.parametrize(
    "settings",
    [
        {"tiling_level": "extreme"},
        {"hardware_compatibility_level": "everything"},
        {"compute_capabilities": ["SM90"]},
        {"compute_capabilities": []},
        {"compute_capabilities": ["CURRENT", "SM89"]},
        {"no_such_setting": 1},
    ],
)
def test_bad_settings_raise(bm: adapter.BuilderModule, tiny_onnx: Path, settings: dict) -> None:
    _, _, builder, _, config, _ = _session(bm, tiny_onnx)
    with pytest.raises(ValueError):
        adapter.apply_builder_settings(bm, builder, config, settings)


def test_bad_profiles_raise(bm: adapter.BuilderModule, tiny_onnx: Path) -> None:
    _, _, builder, network, config, _ = _session(bm, tiny_onnx)
    with pytest.raises(ValueError, match="min <= opt <= max"):
        adapter.add_profiles(bm, builder, config, [{**PROFILE, "min": [8, 3, 16, 16]}])
    with pytest.raises(ValueError, match="no input 'images'"):
        adapter.add_profiles(bm, builder, config, [{**PROFILE, "input": "images"}], network=network)
    grouped = {"inputs": [PROFILE]}
    assert adapter.add_profiles(bm, builder, config, [grouped, PROFILE], network=network) == [0, 1]


def test_parse_errors_are_strings(bm: adapter.BuilderModule, tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"this is not a protobuf")
    *_, errors = _session(bm, garbage)
    # TensorRT itself reports success for these bytes (an empty model); the adapter does not.
    assert errors and all(isinstance(e, str) and e for e in errors)
    assert "no graph outputs" in errors[0]

    graph = helper.make_graph(
        [helper.make_node("NoSuchOp", ["input"], ["output"], name="mystery", domain="example.custom")],
        "unsupported",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 4])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("example.custom", 1)]
    )
    unsupported = tmp_path / "unsupported.onnx"
    onnx.save(model, unsupported)
    *_, errors = _session(bm, unsupported)
    assert errors and any("mystery" in e or "NoSuchOp" in e for e in errors)


def test_logger_survives_a_raising_callback(bm: adapter.BuilderModule, tiny_onnx: Path) -> None:
    def explode(severity: str, msg: str) -> None:
        raise RuntimeError("callback bug")

    logger = adapter.make_logger(bm, explode)
    builder = bm.trt.Builder(logger)
    network = builder.create_network(0)
    assert adapter.parse_onnx(bm, builder, network, logger, tiny_onnx) == []


# ---------------------------------------------------------------- environment, cache, runtime


def test_environment_record(bm: adapter.BuilderModule) -> None:
    record = adapter.environment_record(bm)
    assert {
        "module",
        "version",
        "is_rtx",
        "python",
        "platform",
        "cuda_driver",
        "cuda_runtime",
        "device_name",
        "compute_capability",
    } <= set(record)
    assert record["module"] == "tensorrt_rtx" and record["is_rtx"] is True
    assert record["version"] == bm.version
    assert re.match(r"\d+\.\d+", record["python"])
    if not adapter.gpu_available():  # this machine: no driver, so no device facts, and no crash
        assert record["device_name"] is None and record["compute_capability"] is None


def test_timing_cache_is_a_quiet_no_op_on_rtx(bm: adapter.BuilderModule, tiny_onnx: Path) -> None:
    assert adapter.timing_cache_supported(bm) is False
    _, _, _, _, config, _ = _session(bm, tiny_onnx)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        cache = adapter.create_timing_cache(config, b"")
        assert adapter.set_timing_cache(config, cache, False) is True
        data = adapter.serialize_timing_cache(cache)
        assert isinstance(data, bytes)
        assert isinstance(adapter.combine_timing_cache(cache, adapter.create_timing_cache(config, data)), bool)
        assert adapter.combine_timing_cache(cache, cache) is True  # the raw call would hang
        assert adapter.serialize_timing_cache(None) == b""  # what config.get_timing_cache() gives before a set
    assert not [w for w in caught if issubclass(w.category, DeprecationWarning)]
    # outside the helpers the warning is still there: it is suppressed locally, not globally
    with pytest.warns(DeprecationWarning, match="no-ops in TensorRT-RTX"):
        config.set_timing_cache(cache, False)


def test_engine_deserializes_is_unknown_without_gpu(bm: adapter.BuilderModule, tiny_onnx: Path) -> None:
    if adapter.gpu_available():
        pytest.skip("a GPU is present: deserialization can really be checked")
    assert adapter.engine_deserializes(bm, b"not an engine") is None


def test_runtime_without_gpu_constructs_and_returns_none() -> None:
    """Documents what engine_deserializes relies on; in a child in case a future version aborts."""
    code = (
        "import tensorrt_rtx as trt\n"
        "r = trt.Runtime(trt.Logger(trt.Logger.INTERNAL_ERROR))\n"
        "print(r is not None, r.deserialize_cuda_engine(b'x' * 256) is None)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"]


def test_only_the_adapter_imports_tensorrt() -> None:
    # the adapter itself uses importlib.import_module; the parity gate's TensorRT runtime goes through it
    pattern = re.compile(r"^\s*(import|from)\s+tensorrt(_rtx)?\b", re.M)
    importers = {
        p.relative_to(SERVER).as_posix() for p in SERVER.rglob("*.py") if pattern.search(p.read_text(encoding="utf-8"))
    }
    assert importers == set()
