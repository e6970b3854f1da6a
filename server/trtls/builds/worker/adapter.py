"""The builder adapter: the only module in trtls that imports TensorRT.

One adapter serves full TensorRT (``tensorrt`` >= 9) and TensorRT for RTX (``tensorrt_rtx``): their
builder APIs match for everything trtls uses, and where they differ (compute capabilities, hardware
compatibility, timing cache) the difference is decided here and nowhere else.  Every call below was
checked against tensorrt_rtx 1.7.1 on a CPU-only machine (see tests/builds/test_adapter.py).

The worker calls these helpers; nothing here spawns processes, keeps global state beyond the parser
keep-alive table, or talks to the editor.
"""

from __future__ import annotations

import importlib
import platform
import sys
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from trtls.builds.cuda import cuda_driver, cuda_runtime, gpu_available
from trtls.builds.worker.adapter_timing_cache import (  # re-exported: the worker calls them as adapter.*
    combine_timing_cache as combine_timing_cache,
)
from trtls.builds.worker.adapter_timing_cache import (
    create_timing_cache as create_timing_cache,
)
from trtls.builds.worker.adapter_timing_cache import (
    serialize_timing_cache as serialize_timing_cache,
)
from trtls.builds.worker.adapter_timing_cache import (
    set_timing_cache as set_timing_cache,
)
from trtls.builds.worker.adapter_timing_cache import (
    timing_cache_supported as timing_cache_supported,
)
from trtls.core.vocabulary import BUILDER_MODULES, BUILDER_PREFERENCES

INSTALL_HINT = "pip install tensorrt-rtx-cu13"
# IProgressMonitor (the reason trtls exists) arrived in TensorRT 9.0; every TensorRT-RTX has it.
MIN_TENSORRT = (9, 0)
PREFERENCES = BUILDER_PREFERENCES
SEVERITY_NAMES = ("INTERNAL_ERROR", "ERROR", "WARNING", "INFO", "VERBOSE")
TILING_LEVELS = ("none", "fast", "moderate", "full")
HARDWARE_COMPATIBILITY_LEVELS = ("none", "ampere_plus", "same_compute_capability")


class BuilderUnavailable(RuntimeError):
    """No usable TensorRT builder: not installed, broken, or too old. The message says what to do."""


class BuilderModule(NamedTuple):  # immutable, as the frozen dataclass it was; no `dataclasses` import in the worker
    trt: Any  # the imported module: tensorrt or tensorrt_rtx
    name: str  # "tensorrt" | "tensorrt_rtx"
    version: str

    @property
    def is_rtx(self) -> bool:
        return self.name == "tensorrt_rtx"

    @property
    def version_tuple(self) -> tuple[int, ...]:
        return parse_version(self.version)


# ---------------------------------------------------------------- finding a builder


def parse_version(version: str) -> tuple[int, ...]:
    """'10.8.0.43' -> (10, 8, 0, 43); stops at the first non-numeric part ('10.0.0b6' -> (10, 0))."""
    parts: list[int] = []
    for piece in str(version).split("."):
        if not piece.isdigit():
            break
        parts.append(int(piece))
    return tuple(parts)


def check_version(name: str, version: str) -> None:
    """Raise BuilderUnavailable when ``name`` at ``version`` cannot report build progress."""
    if name == "tensorrt_rtx":
        return  # TensorRT-RTX 1.0 already had IProgressMonitor; its versions restart at 1.
    found = parse_version(version)
    if not found or found < MIN_TENSORRT:
        need = ".".join(map(str, MIN_TENSORRT))
        raise BuilderUnavailable(
            f"{name} {version} is too old: trtls needs TensorRT >= {need} (IProgressMonitor, "
            f"which reports build phases and lets a build be stopped). Upgrade TensorRT, or install "
            f"TensorRT for RTX: {INSTALL_HINT}"
        )


def _import_candidate(name: str) -> BuilderModule:
    try:
        module = importlib.import_module(name)
    except Exception as exc:
        raise BuilderUnavailable(f"{name}: cannot import ({type(exc).__name__}: {exc})") from exc
    if not hasattr(module, "Builder"):
        # An importable stub (or an unrelated package of that name) is not a builder.
        raise BuilderUnavailable(f"{name}: imported, but it has no Builder (a stub or broken install)")
    version = str(getattr(module, "__version__", "unknown"))
    check_version(name, version)
    if not hasattr(module, "IProgressMonitor"):
        raise BuilderUnavailable(f"{name} {version}: has no IProgressMonitor; trtls needs it to report and stop builds")
    return BuilderModule(trt=module, name=name, version=version)


def load_builder_module(preference: str = "auto") -> BuilderModule:
    """Import the builder. ``auto`` prefers full TensorRT (a user who has it wants it), then TensorRT-RTX."""
    if preference not in PREFERENCES:
        raise ValueError(f"builder preference must be one of {PREFERENCES}, not {preference!r}")
    names = BUILDER_MODULES if preference == "auto" else (preference,)
    reasons: list[str] = []
    for name in names:
        try:
            return _import_candidate(name)
        except BuilderUnavailable as exc:
            reasons.append(str(exc))
    raise BuilderUnavailable("no usable TensorRT builder (" + "; ".join(reasons) + f"). Install one: {INSTALL_HINT}")


# ---------------------------------------------------------------- logger, parser


def make_logger(bm: BuilderModule, on_log: Callable[[str, str], None]) -> Any:
    """An ILogger forwarding (severity name, message) to ``on_log``; TensorRT sends every severity."""
    trt = bm.trt
    names = {trt.ILogger.Severity.__members__[n]: n for n in SEVERITY_NAMES}

    logger_base: Any = trt.ILogger  # a pybind11 class of the builder module

    class _Logger(logger_base):
        def __init__(self) -> None:
            trt.ILogger.__init__(self)

        def log(self, severity: Any, msg: str) -> None:
            try:
                on_log(names.get(severity, str(severity)), msg)
            except Exception:
                pass

    return _Logger()


# TensorRT's parser owns the parsed weights: it must outlive the build. The network keeps its parser
# alive here, so callers cannot drop it by accident (INetworkDefinition accepts weak references).
_PARSERS: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def parse_onnx(bm: BuilderModule, builder: Any, network: Any, logger: Any, onnx_path: str | Path) -> list[str]:
    """Parse an ONNX file into ``network``; returns the parser's errors (empty on success)."""
    del builder  # the same signature on every helper; the parser needs only network and logger
    from trtls.fs.models import require_regular

    try:
        require_regular(onnx_path)  # a FIFO or a device named as the model: said, never handed to the parser
    except OSError as exc:
        return [f"{onnx_path}: {exc.strerror or exc}"]
    parser = bm.trt.OnnxParser(network, logger)
    _PARSERS[network] = parser
    ok = parser.parse_from_file(str(onnx_path))
    errors = [_describe_parser_error(parser.get_error(i)) for i in range(parser.num_errors)]
    if not ok and not errors:
        errors = [f"the ONNX parser rejected {onnx_path} without saying why"]
    if ok and not errors and network.num_outputs == 0:
        # Measured: a file of random bytes parses "successfully" into an empty model (IR version 0).
        errors = [f"{onnx_path} holds no graph outputs (is it an ONNX model?)"]
    return errors


def parser_of(network: Any) -> Any:
    """The parser that filled ``network`` (parse_onnx), still holding its answer: its per-node errors and subgraphs
    (builds.worker.capability.parser_answer reads them; None for a network parse_onnx did not fill)."""
    return _PARSERS.get(network)


def _describe_parser_error(err: Any) -> str:
    where = []
    if err.node() >= 0:
        where.append(f"node {err.node()}")
    if err.node_name():
        where.append(repr(err.node_name()))
    if err.node_operator():
        where.append(f"({err.node_operator()})")
    prefix = " ".join(where)
    return f"{prefix}: {err.desc()}" if prefix else str(err.desc())


# ---------------------------------------------------------------- builder settings and profiles


def apply_builder_settings(bm: BuilderModule, builder: Any, config: Any, settings: dict[str, Any]) -> dict[str, Any]:
    """Apply a plain dict of settings; return what the config holds afterwards (read back, not echoed).

    Keys whose value is None are skipped. Settings this builder cannot apply are not set at all and
    are listed under ``"not_applied": {key: reason}`` in the result. A value TensorRT silently
    clamps (e.g. optimization_level 9 -> 5) shows up as the clamped value.
    """
    del builder
    trt = bm.trt
    wanted = {k: v for k, v in settings.items() if v is not None}
    known = {
        "optimization_level",
        "max_aux_streams",
        "tiling_level",
        "max_num_tactics",
        "avg_timing_iterations",
        "workspace_mib",
        "compute_capabilities",
        "hardware_compatibility_level",
    }
    unknown = sorted(set(wanted) - known)
    if unknown:
        raise ValueError(f"unknown builder settings: {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    effective: dict[str, Any] = {}
    not_applied: dict[str, str] = {}

    plain = {
        "optimization_level": "builder_optimization_level",
        "max_aux_streams": "max_aux_streams",
        "max_num_tactics": "max_num_tactics",
        "avg_timing_iterations": "avg_timing_iterations",
    }
    for key, attr in plain.items():
        if key in wanted:
            if not hasattr(config, attr):
                not_applied[key] = f"{bm.name} {bm.version} has no IBuilderConfig.{attr}"
                continue
            setattr(config, attr, int(wanted[key]))
            effective[key] = int(getattr(config, attr))

    if "tiling_level" in wanted:
        level = str(wanted["tiling_level"]).lower()
        if level not in TILING_LEVELS:
            raise ValueError(f"tiling_level must be one of {TILING_LEVELS}, not {wanted['tiling_level']!r}")
        if not hasattr(trt, "TilingOptimizationLevel"):  # added in TensorRT 10.8
            not_applied["tiling_level"] = f"{bm.name} {bm.version} has no tiling optimization"
        else:
            config.tiling_optimization_level = trt.TilingOptimizationLevel.__members__[level.upper()]
            effective["tiling_level"] = config.tiling_optimization_level.name.lower()

    if "workspace_mib" in wanted:
        pool = trt.MemoryPoolType.WORKSPACE
        config.set_memory_pool_limit(pool, int(wanted["workspace_mib"]) << 20)
        effective["workspace_mib"] = config.get_memory_pool_limit(pool) >> 20

    if "compute_capabilities" in wanted:
        ccs = [str(c).upper() for c in wanted["compute_capabilities"]]
        if not bm.is_rtx:
            # Full TensorRT builds for the GPU it runs on; target lists are a TensorRT-RTX feature.
            not_applied["compute_capabilities"] = "full TensorRT builds for the current GPU only"
        else:
            valid = [n for n in trt.ComputeCapability.__members__ if n != "NONE"]
            bad = [c for c in ccs if c not in valid]
            if bad or not ccs:
                raise ValueError(f"compute_capabilities must be a non-empty list of {valid}, got {ccs}")
            if "CURRENT" in ccs and len(ccs) > 1:
                raise ValueError("compute_capabilities: CURRENT must be the only entry")
            config.num_compute_capabilities = len(ccs)
            for index, name in enumerate(ccs):
                if not config.set_compute_capability(trt.ComputeCapability.__members__[name], index):
                    raise ValueError(f"{bm.name} refused compute capability {name} at index {index}")
            effective["compute_capabilities"] = [
                config.get_compute_capability(i).name for i in range(config.num_compute_capabilities)
            ]

    if "hardware_compatibility_level" in wanted:
        level = str(wanted["hardware_compatibility_level"]).lower()
        if level not in HARDWARE_COMPATIBILITY_LEVELS:
            raise ValueError(
                f"hardware_compatibility_level must be one of {HARDWARE_COMPATIBILITY_LEVELS}, not {level!r}"
            )
        if bm.is_rtx:
            # TRT-RTX accepts the call but logs "setHardwareCompatibilityLevel() is unsupported" and keeps
            # NONE; its engines are portable through compute_capabilities instead. So do not call it.
            not_applied["hardware_compatibility_level"] = "unsupported in TensorRT-RTX (use compute_capabilities)"
        else:
            config.hardware_compatibility_level = trt.HardwareCompatibilityLevel.__members__[level.upper()]
            effective["hardware_compatibility_level"] = config.hardware_compatibility_level.name.lower()

    if not_applied:
        effective["not_applied"] = not_applied
    return effective


def add_profiles(
    bm: BuilderModule,
    builder: Any,
    config: Any,
    profiles: list[dict[str, Any]],
    network: Any = None,
    record: list[dict[str, Any]] | None = None,
) -> list[int]:
    """Add optimization profiles; returns their indices.

    Each item is one profile: ``{"inputs": [{"input", "min", "opt", "max"}, ...]}`` with every dynamic
    input, or the older ``{"input", "min", "opt", "max"}`` for one input. TensorRT accepts a profile
    naming a tensor the network does not have and only fails at build time, so pass ``network`` to
    have names checked here. A shape that breaks MIN <= OPT <= MAX raises ValueError. With ``record``,
    each added profile's shapes are appended as TensorRT holds them (read back, not echoed).
    """
    del bm
    names = {network.get_input(i).name for i in range(network.num_inputs)} if network is not None else None
    indices: list[int] = []
    for number, item in enumerate(profiles):
        entries = item["inputs"] if "inputs" in item else [item]
        profile = builder.create_optimization_profile()
        for entry in entries:
            name = entry["input"]
            if names is not None and name not in names:
                raise ValueError(f"profile {number}: the network has no input {name!r} (inputs: {sorted(names)})")
            profile.set_shape(name, tuple(entry["min"]), tuple(entry["opt"]), tuple(entry["max"]))
        index = config.add_optimization_profile(profile)
        if index < 0:  # the builder logs "Invalid optimization profiles ... MIN<=OPT<=MAX"
            raise ValueError(f"profile {number} is invalid (each dimension needs min <= opt <= max): {entries}")
        indices.append(index)
        if record is not None:
            held = {}
            for entry in entries:
                lo, mid, hi = profile.get_shape(entry["input"])
                held[entry["input"]] = {"min": list(lo), "opt": list(mid), "max": list(hi)}
            record.append({"index": index, "inputs": held})
    return indices


def make_progress_monitor_base(bm: BuilderModule) -> type:
    """The class to subclass (call ``base.__init__(self)``); attach with ``config.progress_monitor = m``."""
    return bm.trt.IProgressMonitor


# ---------------------------------------------------------------- environment and runtime


def environment_record(bm: BuilderModule, device: dict[str, Any] | None = None) -> dict[str, Any]:
    """What built the engine, for the evidence. Works without a GPU (device fields are then None). `device`: the
    driver's record already in hand (the worker's probe, builds/worker/environment.py); None: asked now."""
    trt = bm.trt
    parser_version = None
    if hasattr(trt, "get_nv_onnx_parser_version"):
        try:
            parser_version = int(trt.get_nv_onnx_parser_version())
        except Exception:
            parser_version = None
    return {
        "module": bm.name,
        "version": bm.version,
        "is_rtx": bm.is_rtx,
        "onnx_parser_version": parser_version,
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "executable": sys.executable,
        "cuda_runtime": cuda_runtime(),
        **(device if device is not None else cuda_driver()),
        # the builder runs on the worker's main thread, on glibc's own malloc policy (builds/worker/main.py); workers
        # of 2026-12-05 limited it to one arena and said 1 here
        "malloc_arena_max": None,
    }


def engine_deserializes(bm: BuilderModule, engine_bytes: bytes) -> bool | None:
    """Whether the runtime accepts the engine; None when that cannot be known here (no GPU).

    Without a driver, trt.Runtime(logger) constructs fine, but deserialize_cuda_engine logs
    "cudaError 35: CUDA driver version is insufficient" and returns None for every engine, good or
    bad, so skip it. A CUDA error during deserialization on a GPU machine also means "unknown".
    """
    if not gpu_available():
        return None
    cuda_errors: list[str] = []

    def on_log(severity: str, msg: str) -> None:
        if severity in ("ERROR", "INTERNAL_ERROR") and ("cudaError" in msg or "Cuda Runtime" in msg):
            cuda_errors.append(msg)

    logger = make_logger(bm, on_log)
    runtime = bm.trt.Runtime(logger)
    engine = runtime.deserialize_cuda_engine(bytes(engine_bytes))
    if engine is not None:
        return True
    return None if cuda_errors else False
