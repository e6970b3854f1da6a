"""What the schema of the build configuration cannot say, checked without TensorRT (TRT142–TRT151).

Whether the loaded module can apply a key is known only in the worker (TRT140/TRT141 after a build); what
is wrong whatever the module — a flag that needs another, a library that is not there — is said here, as
you type.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from trtls.core.findings import Finding, Origin, Severity

LEGACY_MIGRATION = {
    "fp16": 'convert the model with precision.convert = "fp16" (ModelOpt AutoCast)',
    "bf16": 'convert the model with precision.convert = "bf16" (ModelOpt AutoCast)',
    "int8": "quantize the ONNX with explicit Q/DQ nodes (ModelOpt: python -m modelopt.onnx.quantization "
    "--quantize_mode int8)",
    "fp8": "quantize the ONNX with explicit Q/DQ nodes (ModelOpt: python -m modelopt.onnx.quantization "
    "--quantize_mode fp8)",
}


def _f(code: str, severity: Severity, message: str, path: tuple, on_value: bool = True, **data: Any) -> Finding:
    return Finding(code, severity, message, path, Origin.recipe, on_value, data)


def build_config_checks(resolve: Callable[[str], Path], engine: str, eng: Any) -> list[Finding]:
    base = ("engines", engine)
    out: list[Finding] = []
    b, prec, plugins = eng.builder, eng.precision, eng.plugins
    if b.exclude_lean_runtime and not b.version_compatible:
        out.append(
            _f(
                "TRT142",
                Severity.error,
                "exclude_lean_runtime needs version_compatible = true (TensorRT refuses the flag alone)",
                (*base, "builder", "exclude_lean_runtime"),
            )
        )
    if b.l2_limit_for_tiling is not None and b.tiling_level in (None, "none"):
        out.append(
            _f(
                "TRT150",
                Severity.warning,
                "l2_limit_for_tiling has no effect unless tiling_level is fast, moderate or full",
                (*base, "builder", "l2_limit_for_tiling"),
            )
        )
    for i, source in enumerate(b.tactic_sources or []):
        name = source.lstrip("+-")
        if not name or not name.replace("_", "").isalnum() or name != name.upper():
            out.append(
                _f(
                    "TRT102",
                    Severity.error,
                    f"tactic source {source!r}: write +NAME, -NAME or NAME in capitals (e.g. -CUDNN)",
                    (*base, "builder", "tactic_sources", i),
                )
            )
    if prec.legacy_flags and prec.strongly_typed:
        out.append(
            _f(
                "TRT145",
                Severity.error,
                "legacy precision flags need a weakly typed network; a strongly typed network takes its types from "
                "the graph: drop legacy_flags or strongly_typed",
                (*base, "precision", "legacy_flags"),
            )
        )
    if prec.legacy_flags and prec.convert:
        out.append(
            _f(
                "TRT151",
                Severity.warning,
                f"legacy_flags and convert = {prec.convert!r} together: the converted graph already carries its "
                "precision; the flags only matter on TensorRT 10.x",
                (*base, "precision", "legacy_flags"),
            )
        )
    if prec.convert is None and (prec.exclude_op_types or prec.exclude_nodes):
        key = "exclude_op_types" if prec.exclude_op_types else "exclude_nodes"
        out.append(
            _f(
                "TRT151",
                Severity.warning,
                f'{key} only applies to an AutoCast conversion: set convert = "fp16" or "bf16"',
                (*base, "precision", key),
            )
        )
    for i, lib in enumerate(plugins.libraries):
        path = resolve(lib)
        if not path.is_file():
            what = "not a regular file (a folder, a FIFO or a device)" if path.exists() else "not found"
            out.append(
                _f("TRT144", Severity.error, f"plugin library {what}: {path}", (*base, "plugins", "libraries", i))
            )
    loaded = {resolve(lib) for lib in plugins.libraries}
    for i, lib in enumerate(plugins.serialize):
        if resolve(lib) not in loaded:
            out.append(
                _f(
                    "TRT143",
                    Severity.error,
                    f"{lib!r} is serialized into the engine but not loaded: add it to plugins.libraries",
                    (*base, "plugins", "serialize", i),
                )
            )
    return out


def capability_findings(engines: dict[str, Any], capabilities: dict[str, Any], module: str) -> list[Finding]:
    """Before any build: the keys the probed builder module (`trtls info` → builder.capabilities) cannot apply.
    Legacy precision flags it lacks are errors (TRT141, the build would stop); other keys are TRT140 warnings
    (the build would go on without them). Engines that force another builder_module are not judged."""
    out: list[Finding] = []
    legacy = set(capabilities.get("legacy_precision_flags") or [])
    sources = set(capabilities.get("tactic_sources") or [])
    platforms = {p.lower() for p in capabilities.get("runtime_platforms") or []}
    no_dla = capabilities.get("dla_cores") == 0
    for name, eng in engines.items():
        if eng.builder_module not in ("auto", module.split()[0]):
            continue
        base = ("engines", name)
        missing = [f for f in eng.precision.legacy_flags if f not in legacy]
        if missing:
            how = "; ".join(f"{f}: {LEGACY_MIGRATION[f]}" for f in missing)
            out.append(
                _f(
                    "TRT141",
                    Severity.error,
                    f"{module} has no {', '.join(f.upper() for f in missing)} builder flag (weak typing was removed "
                    f"in TensorRT 11 and never existed in TensorRT-RTX). Migrate: {how}",
                    (*base, "precision", "legacy_flags"),
                )
            )

        def warn(key: tuple[str, ...], why: str, base: tuple[str, ...] = base) -> None:
            out.append(
                _f("TRT140", Severity.warning, f"'{key[-1]}' will not be applied by {module}: {why}", (*base, *key))
            )

        b = eng.builder
        if no_dla:
            for key in ("dla_core", "allow_gpu_fallback"):
                if getattr(b, key) is not None:
                    warn(("builder", key), "it has no DLA cores")
            for key in ("dla_managed_sram_mib", "dla_local_dram_mib", "dla_global_dram_mib"):
                if getattr(b.memory_pool_limits, key) is not None:
                    warn(("builder", "memory_pool_limits", key), "it has no DLA cores")
        unknown = [s for s in b.tactic_sources or [] if s.lstrip("+-") not in sources]
        if unknown and sources:
            warn(
                ("builder", "tactic_sources"),
                f"no tactic source {', '.join(unknown)} (it has {', '.join(sorted(sources))})",
            )
        if b.runtime_platform is not None and platforms and b.runtime_platform not in platforms:
            warn(("builder", "runtime_platform"), f"no runtime platform {b.runtime_platform}")
    return out
