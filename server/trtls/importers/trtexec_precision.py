"""Precision flags the TensorRT 11 way, for `trtls import trtexec`: `--fp16`/`--bf16` become the AutoCast step
(`precision.convert`) unless TensorRT 10.x `legacy_flags` are asked for, INT8/FP8 point to Q/DQ nodes, and the
per-layer precision flags TensorRT 11 removed (`--layerPrecisions`, `--precisionConstraints`) become AutoCast's
exclusions where they say "keep this layer in FP32"."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from trtls.importers.trtexec_values import split_outside_quotes

if TYPE_CHECKING:
    from trtls.importers.trtexec import Imported


def precision_flags(out: Imported, flags: list[str], legacy: bool) -> None:
    if not flags:
        return
    wanted = set(flags)
    if "best" in wanted:
        wanted |= {"fp16", "int8", "fp8"}
    for gone in sorted(wanted & {"int4", "fp4"}):
        out.notes.append(f"--{gone}: no builder flag in any module trtls supports; quantize with ModelOpt (Q/DQ)")
    wanted -= {"best", "int4", "fp4"}
    if legacy:
        out.precision["legacy_flags"] = [f for f in ("fp16", "bf16", "int8", "fp8") if f in wanted]
        out.notes.append(
            "precision flags kept as TensorRT 10.x legacy_flags; TensorRT 11 and TensorRT-RTX refuse them (TRT141)"
        )
        return
    low = "fp16" if "fp16" in wanted else ("bf16" if "bf16" in wanted else None)
    if low:
        out.precision["convert"] = low
        out.notes.append(
            f"--{low}: TensorRT 11 and TensorRT-RTX have no {low.upper()} flag; mapped to precision.convert = "
            f'"{low}" (ModelOpt AutoCast before the build). For TensorRT 10.x weak typing, import with '
            "--legacy-precision"
        )
        if {"fp16", "bf16"} <= wanted:
            out.notes.append("--bf16 as well: AutoCast converts to one type; fp16 chosen")
    for q in ("int8", "fp8"):
        if q in wanted:
            out.notes.append(
                f"--{q}: not mapped; INT8/FP8 need explicit Q/DQ nodes in the ONNX (python -m "
                f"modelopt.onnx.quantization --quantize_mode {q}), or --legacy-precision for TensorRT 10.x"
            )


def _layer_precisions(out: Imported, flag: str, value: str | None) -> None:
    """TensorRT 11 removed `--layerPrecisions` (and `--precisionConstraints`): precision lives in the graph. A layer
    kept in FP32 is what AutoCast's `nodes_to_exclude` says, so NAME:fp32 entries become `exclude_nodes` (TensorRT
    names a parsed layer after its ONNX node); other entries are named, not guessed."""
    kept, other = [], []
    for part in split_outside_quotes(value or ""):
        name, _, precision = part.rpartition(":")
        name = name.strip().strip("'\"")
        if precision.strip().lower() == "fp32" and name and name != "*":
            kept.append(name)
        else:
            other.append(part)
    if kept:
        out.precision.setdefault("exclude_nodes", []).extend("^" + re.escape(n) + "$" for n in kept)
    note = f"--{flag}: removed in TensorRT 11 (precision lives in the graph)"
    if kept:
        note += f"; the layers kept in FP32 ({', '.join(kept)}) became precision.exclude_nodes"
    if other:
        note += f"; not imported: {', '.join(other)} (AutoCast converts one type and keeps the excluded nodes in FP32)"
    out.notes.append(note)


def _precision_constraints(out: Imported, flag: str, value: str | None) -> None:
    out.notes.append(
        f"--{flag}: removed in TensorRT 11 (no OBEY/PREFER_PRECISION_CONSTRAINTS; precision lives in the graph); "
        "the layers to keep in FP32 go in precision.exclude_nodes / exclude_op_types (AutoCast)"
    )


REMOVED_HANDLERS: dict[str, Any] = {
    "layerPrecisions": _layer_precisions,
    "precisionConstraints": _precision_constraints,
}


def exclusions(out: Imported) -> None:
    """AutoCast's exclusions mean nothing without its conversion: say so rather than write keys that do nothing."""
    if out.precision.get("exclude_nodes") and not out.precision.get("convert"):
        out.notes.append(
            "precision.exclude_nodes only applies with precision.convert (an --fp16/--bf16 build); without one the "
            "whole engine is FP32 already"
        )
