"""Apply an engine's build configuration to the loaded TensorRT module, and read back what it holds.

Every key is set through the module the adapter loaded (``bm.trt``: TensorRT 10.x, 11 or TensorRT-RTX) and
read back. A key the module has no API for, or that it refuses (TensorRT logs an API Usage Error and keeps
its default), is listed under ``not_applied`` with the reason — the worker reports it, the evidence keeps it,
and the editor shows it on the key (TRT140). Nothing is dropped silently.

Measured on TensorRT-RTX 1.7.1 (CPU, ahead of time): TF32, SPARSE_WEIGHTS, WEIGHT_STREAMING, REFIT_INDIVIDUAL,
tactic sources, profiling verbosity, L2 limit and the tactic pools are applied and build; REFIT, REFIT_IDENTICAL
and STRIP_PLAN are applied but the compile then needs a GPU (a Myelin check fails); VERSION_COMPATIBLE alone
fails (the wheel has no libnvinfer_lean.so.1), with EXCLUDE_LEAN_RUNTIME it builds; runtime_platform
WINDOWS_AMD64 is refused on Linux; there are no DLA cores; there are no FP16/BF16/INT8/FP8 flags.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trtls.core.setting_keys import FLAG_KEYS, POOL_KEYS

# pool key → (MemoryPoolType member, bytes per unit)
# (workspace_mib is applied by adapter.apply_builder_settings, as before)
POOLS = {
    "tactic_dram_mib": ("TACTIC_DRAM", 1 << 20),
    "tactic_shared_memory_kib": ("TACTIC_SHARED_MEMORY", 1 << 10),
    "dla_managed_sram_mib": ("DLA_MANAGED_SRAM", 1 << 20),
    "dla_local_dram_mib": ("DLA_LOCAL_DRAM", 1 << 20),
    "dla_global_dram_mib": ("DLA_GLOBAL_DRAM", 1 << 20),
}
BOOL_FLAGS = {
    "tf32": "TF32",
    "sparse_weights": "SPARSE_WEIGHTS",
    "weight_streaming": "WEIGHT_STREAMING",
    "version_compatible": "VERSION_COMPATIBLE",
    "exclude_lean_runtime": "EXCLUDE_LEAN_RUNTIME",
    "strip_weights": "STRIP_PLAN",
    "allow_gpu_fallback": "GPU_FALLBACK",
}
REFIT_FLAGS = {"all": "REFIT", "identical": "REFIT_IDENTICAL", "individual": "REFIT_INDIVIDUAL"}
OWN_KEYS = frozenset(FLAG_KEYS) | (frozenset(POOL_KEYS) - {"workspace_mib"})
LEGACY_FLAGS = {"fp16": "FP16", "bf16": "BF16", "int8": "INT8", "fp8": "FP8"}


class SettingError(ValueError):
    """A key that cannot be honoured at all (the build must not go on): carries the flat key and a code."""

    def __init__(self, code: str, key: str, message: str):
        super().__init__(message)
        self.code, self.key = code, key


class _Recorder:
    """Collects effective values and reasons, and the ERRORs TensorRT logs while one key is being set."""

    def __init__(self, bm: Any, logs: list[tuple[str, str]], sync: Callable[[], None]):
        self.bm, self.logs, self.sync = bm, logs, sync
        self.effective: dict[str, Any] = {}
        self.not_applied: dict[str, str] = {}

    def who(self) -> str:
        return f"{self.bm.name} {self.bm.version}"

    def run(self, key: str, setter: Callable[[], Any], wanted: Any) -> None:
        """Call ``setter`` (it returns the read-back value); a refusal is anything other than ``wanted``."""
        before = len(self.logs)
        try:
            got = setter()
        except (AttributeError, TypeError, RuntimeError) as exc:
            self.not_applied[key] = f"{self.who()} refused it: {exc}"
            return
        self.sync()  # what the setter logged (log_relay delivers on its own thread)
        errors = [m for s, m in self.logs[before:] if s in ("ERROR", "INTERNAL_ERROR")]
        if got != wanted:
            reason = errors[0] if errors else f"set {wanted!r}, the config holds {got!r}"
            self.not_applied[key] = f"{self.who()} refused it: {reason}"
        else:
            self.effective[key] = got


def apply_build_config(
    bm: Any,
    builder: Any,
    config: Any,
    settings: dict[str, Any],
    logs: list[tuple[str, str]],
    sync: Callable[[], None] = lambda: None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """Apply the flag and pool keys of ``settings`` (None = leave the module's default). Returns
    (effective values read back, not applied {key: reason})."""
    trt = bm.trt
    wanted = {k: v for k, v in settings.items() if k in OWN_KEYS and v is not None}
    rec = _Recorder(bm, logs, sync)
    flags: Any = getattr(trt, "BuilderFlag", None)  # a TensorRT enum (a setter on a module without it fails there)

    def flag_setter(member: str, on: bool) -> Callable[[], Any]:
        def setter() -> bool:
            flag = flags.__members__[member]
            (config.set_flag if on else config.clear_flag)(flag)
            return bool(config.get_flag(flag))

        return setter

    # A DLA core count of 0 means every DLA key would be refused with an API error: say why, once, instead.
    dla_cores = int(getattr(builder, "num_DLA_cores", 0) or 0)
    no_dla = f"{rec.who()} has no DLA cores here (builder.num_DLA_cores = 0)"

    for key, member in BOOL_FLAGS.items():
        if key not in wanted:
            continue
        if key == "allow_gpu_fallback" and dla_cores == 0:
            rec.not_applied[key] = no_dla
            continue
        if flags is None or member not in flags.__members__:
            rec.not_applied[key] = f"{rec.who()} has no BuilderFlag.{member}"
            continue
        rec.run(key, flag_setter(member, bool(wanted[key])), bool(wanted[key]))

    refit = wanted.get("refit") or ("identical" if wanted.get("strip_weights") else None)
    if refit is not None:
        member = REFIT_FLAGS[refit]
        if flags is None or member not in flags.__members__:
            rec.not_applied["refit"] = f"{rec.who()} has no BuilderFlag.{member}"
        else:
            rec.run("refit", lambda: refit if flag_setter(member, True)() else None, refit)

    if "tactic_sources" in wanted:
        _tactic_sources(trt, config, wanted["tactic_sources"], rec)

    if "profiling_verbosity" in wanted:
        level = str(wanted["profiling_verbosity"]).upper()
        enum: Any = getattr(trt, "ProfilingVerbosity", None)
        if enum is None or level not in enum.__members__:
            rec.not_applied["profiling_verbosity"] = f"{rec.who()} has no ProfilingVerbosity.{level}"
        else:

            def set_verbosity() -> str:
                config.profiling_verbosity = enum.__members__[level]
                return config.profiling_verbosity.name.lower()

            rec.run("profiling_verbosity", set_verbosity, level.lower())

    if "runtime_platform" in wanted:
        platform = str(wanted["runtime_platform"]).upper()
        enum = getattr(trt, "RuntimePlatform", None)
        if enum is None or platform not in enum.__members__ or not hasattr(config, "runtime_platform"):
            rec.not_applied["runtime_platform"] = f"{rec.who()} has no RuntimePlatform.{platform}"
        else:

            def set_platform() -> str:
                config.runtime_platform = enum.__members__[platform]
                return config.runtime_platform.name.lower()

            rec.run("runtime_platform", set_platform, platform.lower())

    if "l2_limit_for_tiling" in wanted:
        if not hasattr(config, "l2_limit_for_tiling"):
            rec.not_applied["l2_limit_for_tiling"] = f"{rec.who()} has no IBuilderConfig.l2_limit_for_tiling"
        else:
            limit = int(wanted["l2_limit_for_tiling"])

            def set_l2() -> int:
                config.l2_limit_for_tiling = limit
                return int(config.l2_limit_for_tiling)

            rec.run("l2_limit_for_tiling", set_l2, limit)

    if "dla_core" in wanted:
        core = int(wanted["dla_core"])
        if dla_cores == 0:
            rec.not_applied["dla_core"] = no_dla
        elif core >= dla_cores:
            rec.not_applied["dla_core"] = f"DLA core {core} does not exist (this builder has {dla_cores})"
        else:

            def set_dla() -> int:
                config.default_device_type = trt.DeviceType.DLA
                config.DLA_core = core
                return int(config.DLA_core)

            rec.run("dla_core", set_dla, core)

    for key, (member, unit) in POOLS.items():
        if key not in wanted:
            continue
        pools = getattr(trt, "MemoryPoolType", None)
        if pools is None or member not in pools.__members__:
            rec.not_applied[key] = f"{rec.who()} has no MemoryPoolType.{member}"
            continue
        if member.startswith("DLA_") and dla_cores == 0:
            rec.not_applied[key] = no_dla
            continue
        pool, value = pools.__members__[member], int(wanted[key])

        def set_pool(pool: Any = pool, value: int = value, unit: int = unit) -> int:
            config.set_memory_pool_limit(pool, value * unit)
            return int(config.get_memory_pool_limit(pool)) // unit

        rec.run(key, set_pool, value)
    return rec.effective, rec.not_applied


def _tactic_sources(trt: Any, config: Any, entries: list[str], rec: _Recorder) -> None:
    """trtexec's syntax: "+NAME"/"NAME" enables, "-NAME" disables, starting from the module's defaults."""
    enum = getattr(trt, "TacticSource", None)
    if enum is None or not hasattr(config, "set_tactic_sources"):
        rec.not_applied["tactic_sources"] = f"{rec.who()} has no tactic sources"
        return
    known = enum.__members__
    mask = int(config.get_tactic_sources())
    unknown = []
    for entry in entries:
        name = entry.lstrip("+-")
        if name not in known:
            unknown.append(entry)
            continue
        bit = 1 << int(known[name])
        mask = mask & ~bit if entry.startswith("-") else mask | bit
    if unknown:
        rec.not_applied["tactic_sources"] = (
            f"{rec.who()} has no tactic source {', '.join(unknown)} (it has {', '.join(known)}); "
            "the others were applied"
        )
    before = len(rec.logs)
    config.set_tactic_sources(mask)
    got = int(config.get_tactic_sources())
    enabled = [n for n, v in known.items() if got & (1 << int(v))]
    if got != mask:
        rec.sync()
        errors = [m for s, m in rec.logs[before:] if s in ("ERROR", "INTERNAL_ERROR")]
        rec.not_applied["tactic_sources"] = f"{rec.who()} refused the mask: {errors[0] if errors else got}"
    rec.effective["tactic_sources"] = enabled


def network_creation_flags(bm: Any, strongly_typed: bool | None) -> tuple[int, dict[str, Any], dict[str, str]]:
    """Flags for builder.create_network; STRONGLY_TYPED when asked (TensorRT 11 is always strongly typed)."""
    trt = bm.trt
    flags = 0
    effective: dict[str, Any] = {}
    not_applied: dict[str, str] = {}
    members = trt.NetworkDefinitionCreationFlag.__members__
    if "EXPLICIT_BATCH" in members:  # the default (and deprecated) since TRT 10
        flags |= 1 << int(members["EXPLICIT_BATCH"])
    if strongly_typed:
        if "STRONGLY_TYPED" in members:
            flags |= 1 << int(members["STRONGLY_TYPED"])
        else:
            not_applied["strongly_typed"] = (
                f"{bm.name} {bm.version} has no NetworkDefinitionCreationFlag.STRONGLY_TYPED"
            )
    return flags, effective, not_applied


def read_strongly_typed(bm: Any, network: Any) -> bool | None:
    members = bm.trt.NetworkDefinitionCreationFlag.__members__
    if "STRONGLY_TYPED" not in members or not hasattr(network, "get_flag"):
        return None
    return bool(network.get_flag(members["STRONGLY_TYPED"]))


def apply_legacy_flags(bm: Any, config: Any, names: list[str], strongly_typed: bool) -> list[str]:
    """TensorRT 10.x weak typing. A module without the flag (TensorRT 11, TensorRT-RTX) is an error naming
    the migration — building FP32 when FP16 was asked for would be a silent change of the engine."""
    from trtls.core.build_config_checks import LEGACY_MIGRATION

    flags = bm.trt.BuilderFlag.__members__
    missing = [n for n in names if LEGACY_FLAGS[n] not in flags]
    if missing:
        how = "; ".join(f"{n}: {LEGACY_MIGRATION[n]}" for n in missing)
        raise SettingError(
            "TRT141",
            "legacy_flags",
            f"{bm.name} {bm.version} has no BuilderFlag {', '.join(LEGACY_FLAGS[n] for n in missing)} "
            f"(weak typing was removed in TensorRT 11 and never existed in TensorRT-RTX). Migrate: {how}",
        )
    if strongly_typed:
        raise SettingError("TRT145", "legacy_flags", "legacy precision flags cannot be set on a strongly typed network")
    applied = []
    for n in names:
        config.set_flag(flags[LEGACY_FLAGS[n]])
        if config.get_flag(flags[LEGACY_FLAGS[n]]):
            applied.append(n)
    return applied


def load_plugins(bm: Any, spec: dict[str, Any]) -> dict[str, Any]:
    """Load plugin libraries into the registry (before the ONNX parser needs their creators) and check the
    required creators. Any failure is a SettingError naming the library or the creator."""
    trt = bm.trt
    libraries = list(spec.get("libraries") or [])
    required = list(spec.get("require_creators") or [])
    if not (libraries or required):
        return {}
    registry = trt.get_plugin_registry()
    if hasattr(trt, "init_libnvinfer_plugins"):
        trt.init_libnvinfer_plugins(None, "")
    loaded = []
    for lib in libraries:
        try:
            handle = registry.load_library(lib)
        except Exception as exc:  # the bindings raise on a library dlopen cannot open
            raise SettingError("TRT149", "plugins", f"cannot load plugin library {lib}: {exc}") from exc
        if handle is None:
            raise SettingError("TRT149", "plugins", f"cannot load plugin library {lib} (dlopen failed or no creators)")
        loaded.append(lib)
    available = {f"{c.name}@{c.plugin_version}" for c in registry.all_creators} | {
        c.name for c in registry.all_creators
    }
    missing = [name for name in required if name not in available]
    if missing:
        names = sorted(n for n in available if "@" in n)
        raise SettingError(
            "TRT149",
            "require_creators",
            f"plugin creator {', '.join(missing)} is not registered after loading {libraries or 'no library'} "
            f"(registered: {', '.join(names) or 'none'})",
        )
    return {"plugins": loaded, "creators": sorted(n for n in available if "@" in n)}


def serialize_plugins(bm: Any, config: Any, serialize: list[str]) -> list[str]:
    """Libraries shipped inside the engine (IBuilderConfig.plugins_to_serialize), read back."""
    if not hasattr(config, "plugins_to_serialize"):
        raise SettingError("TRT140", "serialize", f"{bm.name} {bm.version} cannot serialize plugins into the engine")
    config.plugins_to_serialize = list(serialize)
    return list(config.plugins_to_serialize)


def module_capabilities(bm: Any) -> dict[str, Any]:
    """What the loaded module offers, introspected (for `trtls info` and bug reports): which build keys can
    apply here. TensorRT-RTX 1.7: no FP16/BF16/INT8/FP8 builder flag, STRONGLY_TYPED only, no DLA core."""
    trt = bm.trt

    def names(enum: str) -> list[str]:
        found = getattr(trt, enum, None)
        return sorted(found.__members__) if found is not None else []

    try:
        dla_cores = int(trt.Builder(_NullLogger.make(trt)).num_DLA_cores)
    except Exception:
        dla_cores = None
    return {
        "builder_flags": names("BuilderFlag"),
        "network_flags": names("NetworkDefinitionCreationFlag"),
        "memory_pools": names("MemoryPoolType"),
        "tactic_sources": names("TacticSource"),
        "profiling_verbosity": names("ProfilingVerbosity"),
        "runtime_platforms": names("RuntimePlatform"),
        "legacy_precision_flags": [n for n, m in LEGACY_FLAGS.items() if m in names("BuilderFlag")],
        "dla_cores": dla_cores,
    }


class _NullLogger:
    @staticmethod
    def make(trt: Any) -> Any:
        class Quiet(trt.ILogger):
            def __init__(self) -> None:
                trt.ILogger.__init__(self)

            def log(self, severity: Any, msg: str) -> None:
                pass

        return Quiet()
