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
            out.append(
                _f("TRT144", Severity.error, f"plugin library not found: {path}", (*base, "plugins", "libraries", i))
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
