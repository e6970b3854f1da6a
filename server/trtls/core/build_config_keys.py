"""The key table of the build configuration: every `[engines.NAME]` key, its trtexec flag, where it applies in each
TensorRT module, and how `trtls import trtexec` reads the flag. docs/build-config.md's table is generated from it
(`keys_markdown`, kept equal by tests/core/test_build_config.py) and the importer maps flags through it
(`importers.trtexec`), so a key cannot be documented one way and imported another.
"""

from __future__ import annotations

from dataclasses import dataclass

# ---------------------------------------------------------------- the key table (docs + trtexec import)


@dataclass(frozen=True)
class KeyInfo:
    key: str  # dotted, under [engines.NAME]
    trtexec: str  # the trtexec flag, or "—"
    rtx: str  # TensorRT-RTX 1.7 (measured here)
    trt10: str  # TensorRT 10.x
    trt11: str  # TensorRT 11
    # how `trtls import trtexec` reads each trtexec flag that sets this key: "flag:kind", kind one of int, true,
    # false, text, lower, list, paths (appended), choice (the importer's table of trtexec spellings), =VALUE (a
    # constant), or the name of one of the importer's own handlers (shapes, pools, precision, sparsity …)
    imports: tuple[str, ...] = ()


_APPLIED = "applied"
KEYS: tuple[KeyInfo, ...] = (
    KeyInfo("onnx", "--onnx", _APPLIED, _APPLIED, _APPLIED, imports=("onnx:text",)),
    KeyInfo("output", "--saveEngine", _APPLIED, _APPLIED, _APPLIED, imports=("saveEngine:text",)),
    KeyInfo(
        "profiles",
        "--profile=N with --minShapes/--optShapes/--maxShapes, --shapes",
        _APPLIED,
        _APPLIED,
        _APPLIED,
        imports=("profile:profile", "minShapes:shapes", "optShapes:shapes", "maxShapes:shapes", "shapes:shapes"),
    ),
    KeyInfo(
        "timing_cache",
        "--timingCacheFile",
        "not applicable (no-op in RTX)",
        _APPLIED,
        _APPLIED,
        imports=("timingCacheFile:text",),
    ),
    KeyInfo(
        "builder.optimization_level",
        "--builderOptimizationLevel",
        _APPLIED,
        _APPLIED,
        _APPLIED,
        imports=("builderOptimizationLevel:int",),
    ),
    KeyInfo("builder.max_aux_streams", "--maxAuxStreams", _APPLIED, _APPLIED, _APPLIED, imports=("maxAuxStreams:int",)),
    KeyInfo(
        "builder.tiling_level",
        "--tilingOptimizationLevel",
        _APPLIED,
        "applied (≥ 10.8)",
        _APPLIED,
        imports=("tilingOptimizationLevel:choice",),
    ),
    KeyInfo(
        "builder.l2_limit_for_tiling",
        "--l2LimitForTiling",
        _APPLIED,
        "applied (≥ 10.8)",
        _APPLIED,
        imports=("l2LimitForTiling:int",),
    ),
    KeyInfo(
        "builder.max_num_tactics", "--maxTactics", _APPLIED, "applied (≥ 10.8)", _APPLIED, imports=("maxTactics:int",)
    ),
    KeyInfo("builder.avg_timing_iterations", "--avgTiming", _APPLIED, _APPLIED, _APPLIED, imports=("avgTiming:int",)),
    KeyInfo(
        "builder.hardware_compatibility_level",
        "--hardwareCompatibilityLevel",
        "not applicable (use compute_capabilities)",
        _APPLIED,
        _APPLIED,
        imports=("hardwareCompatibilityLevel:choice",),
    ),
    KeyInfo("builder.compute_capabilities", "— (TensorRT-RTX API)", _APPLIED, "not applicable", "not applicable"),
    KeyInfo(
        "builder.memory_pool_limits.workspace_mib",
        "--memPoolSize=workspace:N",
        _APPLIED,
        _APPLIED,
        _APPLIED,
        imports=("memPoolSize:pools", "workspace:workspace"),
    ),
    KeyInfo("builder.memory_pool_limits.tactic_dram_mib", "--memPoolSize=tacticDram:N", _APPLIED, _APPLIED, _APPLIED),
    KeyInfo(
        "builder.memory_pool_limits.tactic_shared_memory_kib",
        "--memPoolSize=tacticSharedMem:N",
        _APPLIED,
        _APPLIED,
        _APPLIED,
    ),
    KeyInfo(
        "builder.memory_pool_limits.dla_*_mib",
        "--memPoolSize=dlaSRAM:N,dlaLocalDRAM:N,dlaGlobalDRAM:N",
        "not applicable (no DLA)",
        "applied with a DLA",
        "applied with a DLA",
    ),
    KeyInfo("builder.tf32", "--noTF32 (tf32 = false)", _APPLIED, _APPLIED, _APPLIED, imports=("noTF32:false",)),
    KeyInfo(
        "builder.sparse_weights", "--sparsity=enable", _APPLIED, _APPLIED, _APPLIED, imports=("sparsity:sparsity",)
    ),
    KeyInfo(
        "builder.refit",
        "--refit",
        "applied (all/identical need a GPU to compile)",
        _APPLIED,
        _APPLIED,
        imports=("refit:=all",),
    ),
    KeyInfo(
        "builder.strip_weights",
        "--stripWeights, --stripAllWeights (also refit = all)",
        "applied (needs a GPU to compile)",
        _APPLIED,
        _APPLIED,
        imports=("stripWeights:true", "stripAllWeights:strip_all"),
    ),
    KeyInfo(
        "builder.weight_streaming",
        "--allowWeightStreaming",
        _APPLIED,
        "applied (strongly typed)",
        _APPLIED,
        imports=("allowWeightStreaming:true", "weightStreaming:true"),  # the second: an old spelling trtls took
    ),
    KeyInfo(
        "builder.version_compatible",
        "--versionCompatible, --vc",
        "applied (needs exclude_lean_runtime: no lean runtime in the wheel)",
        _APPLIED,
        _APPLIED,
        imports=("versionCompatible:true", "vc:true"),
    ),
    KeyInfo(
        "builder.exclude_lean_runtime",
        "--excludeLeanRuntime",
        _APPLIED,
        _APPLIED,
        _APPLIED,
        imports=("excludeLeanRuntime:true",),
    ),
    KeyInfo(
        "builder.tactic_sources",
        "--tacticSources",
        "applied (EDGE_MASK_CONVOLUTIONS, JIT_CONVOLUTIONS)",
        _APPLIED,
        _APPLIED,
        imports=("tacticSources:list",),
    ),
    KeyInfo(
        "builder.profiling_verbosity",
        "--profilingVerbosity",
        _APPLIED,
        _APPLIED,
        _APPLIED,
        imports=("profilingVerbosity:lower",),
    ),
    KeyInfo(
        "builder.dla_core",
        "--useDLACore",
        "not applicable (no DLA)",
        "applied with a DLA",
        "applied with a DLA",
        imports=("useDLACore:int",),
    ),
    KeyInfo(
        "builder.allow_gpu_fallback",
        "--allowGPUFallback",
        "not applicable (no DLA)",
        "applied with a DLA",
        "applied with a DLA",
        imports=("allowGPUFallback:true",),
    ),
    KeyInfo(
        "builder.runtime_platform",
        "--runtimePlatform",
        "not applicable (refused on Linux)",
        "applied (≥ 10.2, Linux x86_64 host)",
        _APPLIED,
        imports=("runtimePlatform:choice",),
    ),
    KeyInfo(
        "precision.convert",
        "--fp16 / --bf16 (mapped; a note says so)",
        _APPLIED,
        _APPLIED,
        _APPLIED,
        imports=("fp16:precision", "bf16:precision"),
    ),
    KeyInfo("precision.keep_io_types", "— (AutoCast --keep_io_types)", _APPLIED, _APPLIED, _APPLIED),
    KeyInfo("precision.exclude_op_types", "— (AutoCast --op_types_to_exclude)", _APPLIED, _APPLIED, _APPLIED),
    KeyInfo("precision.exclude_nodes", "— (AutoCast --nodes_to_exclude)", _APPLIED, _APPLIED, _APPLIED),
    KeyInfo(
        "precision.strongly_typed",
        "--stronglyTyped",
        _APPLIED,
        _APPLIED,
        "always on (flag ignored)",
        imports=("stronglyTyped:true",),
    ),
    KeyInfo(
        "precision.legacy_flags",
        "--fp16/--bf16/--int8/--fp8/--best (legacy); --int4/--fp4 noted, not mapped",
        "error TRT141 (no such flags)",
        _APPLIED,
        "error TRT141 (removed)",
        imports=("int8:precision", "fp8:precision", "best:precision", "int4:precision", "fp4:precision"),
    ),
    KeyInfo(
        "plugins.libraries",
        "--staticPlugins, --dynamicPlugins, --plugins",
        _APPLIED,
        _APPLIED,
        _APPLIED,
        imports=("plugins:paths", "staticPlugins:paths", "dynamicPlugins:paths"),
    ),
    KeyInfo(
        "plugins.serialize",
        "--setPluginsToSerialize",
        _APPLIED,
        _APPLIED,
        _APPLIED,
        imports=("setPluginsToSerialize:paths",),
    ),
    KeyInfo("plugins.require_creators", "— (checked after loading)", _APPLIED, _APPLIED, _APPLIED),
    KeyInfo("cancel_grace_s", "— (trtls: Stop → SIGTERM after this)", _APPLIED, _APPLIED, _APPLIED),
    KeyInfo("keep_evidence", "— (trtls: quarantine instead of delete)", _APPLIED, _APPLIED, _APPLIED),
    KeyInfo("builder_module", "— (trtls: which module the worker loads)", _APPLIED, _APPLIED, _APPLIED),
    KeyInfo("worker", "— (trtls: an external worker)", _APPLIED, _APPLIED, _APPLIED),
    KeyInfo("run_on", "— (trtls build farm: where a build runs)", _APPLIED, _APPLIED, _APPLIED),
    KeyInfo("matrix", "— (trtls build farm: one build per combination)", _APPLIED, _APPLIED, _APPLIED),
    KeyInfo("triage.fail_regex", "— (trtls reduce: the failure it keeps)", _APPLIED, _APPLIED, _APPLIED),
)


def keys_markdown() -> str:
    """The table of docs/build-config.md (a test keeps the page equal to this)."""
    rows = [
        "| key (under `[engines.NAME]`) | trtexec | tensorrt_rtx 1.7 | tensorrt 10.x | tensorrt 11 |",
        "|---|---|---|---|---|",
    ]
    rows += [f"| `{k.key}` | {k.trtexec} | {k.rtx} | {k.trt10} | {k.trt11} |" for k in KEYS]
    return "\n".join(rows) + "\n"
