"""Every trtexec flag and what `trtls import trtexec` does with it: the one table the importer reads for the flags it
does not map, and that docs/trtexec.md is generated from (`importers.trtexec_doc`; tests/test_import_trtexec_flags.py
keeps the page equal to it).

Source: NVIDIA/TensorRT `samples/common/sampleOptions.cpp` at the TensorRT 11.1 OSS release (commit 82d1dca8,
"TensorRT 11.1 OSS Release"): every option its `BaseModelOptions`, `BuildOptions`, `SystemOptions`,
`InferenceOptions`, `TuningOptions` and `ReportingOptions::parse` read, plus `--help/-h`. The flags `removed in 11`
are the ones 10.16's `BuildOptions::parse` read and 11.1's does not (commit 5302b288, "10.16.1 update"): trtexec 11
refuses them as unknown options.

A flag is one of:
- `mapped`: onto a recipe key (the key table `core.build_config_keys.KEYS` says how it is read);
- `inference`: trtexec runs the engine with it; trtls builds engines and does not run them;
- `inspection`: it reads or prints an engine trtexec loaded; trtls does not load engines;
- `trtls`: trtls does what it asks in its own way (logging, the timing cache file);
- `refused`: a build setting trtls has no key for; skipped, with why (the engine built would differ);
- `removed`: TensorRT 11 has no such flag; named with its replacement (and mapped onto it where one exists).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Disposition = Literal["mapped", "inference", "inspection", "trtls", "refused", "removed"]
Section = Literal["model", "build", "system", "inference", "tuning", "reporting", "help", "removed in 11"]


@dataclass(frozen=True)
class TrtexecFlag:
    flag: str  # without the dashes
    section: Section  # the trtexec help section that lists it (or "removed in 11")
    disposition: Disposition
    key: str | None = None  # the recipe key it is mapped onto (mapped; removed with a replacement key)
    note: str = ""  # why (inference, inspection, trtls, refused) or the replacement (removed)


_RUNS = "trtexec runs the engine with it; trtls builds engines and does not run them"
_LOADS = "reads an engine trtexec loaded; trtls does not load engines"
_DLA_PARSER = "an ONNX parser flag for DLA builds; trtls's parser keeps its defaults (no recipe key)"
_SAFETY = "safety-certified builds (TensorRT safety) are not something trtls builds"
_TUNING = (
    "trtexec's autotuning loop over build routes (one child trtexec per route); trtls builds one recipe: a "
    "[engines.NAME.matrix] over builder keys builds and records each combination"
)
_DEBUG_TENSORS = (
    "marks network tensors as debug tensors at build time (INetworkDefinition.mark_debug); trtls has no key for "
    "debug tensors, so the engine would have none"
)
_IO_FORMATS = (
    "sets the engine's I/O tensor formats (ITensor.allowed_formats and, before TensorRT 11, types); trtls builds "
    "with the ONNX's I/O types (strongly typed in TensorRT 11) in the linear chw layout and has no key for other "
    "layouts, so the engine's bindings would differ"
)
_CONVERT = "precision.convert (ModelOpt AutoCast before the build; TensorRT 11 networks are strongly typed)"
_QDQ = (
    "explicit Q/DQ nodes in the ONNX (python -m modelopt.onnx.quantization); or, for TensorRT 10.x, import with "
    "--legacy-precision"
)
_EXCLUDE = (
    "precision.exclude_nodes / exclude_op_types (AutoCast nodes_to_exclude / op_types_to_exclude): the layers kept "
    "in FP32; layers named NAME:fp32 are imported there"
)

FLAGS: tuple[TrtexecFlag, ...] = (
    # -- model -----------------------------------------------------------------------------------------------------
    TrtexecFlag("onnx", "model", "mapped", "onnx"),
    # -- build -----------------------------------------------------------------------------------------------------
    TrtexecFlag("minShapes", "build", "mapped", "profiles"),
    TrtexecFlag("optShapes", "build", "mapped", "profiles"),
    TrtexecFlag("maxShapes", "build", "mapped", "profiles"),
    TrtexecFlag(
        "profile", "build", "mapped", "profiles", "the --minShapes/--optShapes/--maxShapes after it are profile N"
    ),
    TrtexecFlag("inputIOFormats", "build", "refused", note=_IO_FORMATS),
    TrtexecFlag("outputIOFormats", "build", "refused", note=_IO_FORMATS),
    TrtexecFlag("memPoolSize", "build", "mapped", "builder.memory_pool_limits"),
    TrtexecFlag("profilingVerbosity", "build", "mapped", "builder.profiling_verbosity"),
    TrtexecFlag("avgTiming", "build", "mapped", "builder.avg_timing_iterations"),
    TrtexecFlag("refit", "build", "mapped", "builder.refit"),
    TrtexecFlag("stripWeights", "build", "mapped", "builder.strip_weights"),
    TrtexecFlag("stripAllWeights", "build", "mapped", "builder.strip_weights", "also refit = all"),
    TrtexecFlag("versionCompatible", "build", "mapped", "builder.version_compatible"),
    TrtexecFlag("vc", "build", "mapped", "builder.version_compatible", "alias of --versionCompatible"),
    TrtexecFlag(
        "pluginInstanceNorm",
        "build",
        "refused",
        note="an ONNX parser flag (kNATIVE_INSTANCENORM off: a plugin InstanceNorm); trtls's parser keeps its "
        "default, the native InstanceNorm",
    ),
    TrtexecFlag("pi", "build", "refused", note="alias of --pluginInstanceNorm (an ONNX parser flag trtls keeps)"),
    TrtexecFlag("uint8AsymmetricQuantizationDLA", "build", "refused", note=_DLA_PARSER),
    TrtexecFlag("reportCapabilityDLA", "build", "refused", note=_DLA_PARSER),
    TrtexecFlag("adjustForDLA", "build", "refused", note=_DLA_PARSER),
    TrtexecFlag(
        "enablePluginOverride",
        "build",
        "refused",
        note="an ONNX parser flag (plugins over standard ONNX ops); trtls's parser keeps its default",
    ),
    TrtexecFlag(
        "useRuntime",
        "build",
        "inference",
        note="the runtime that loads the engine (full, lean, dispatch); trtexec cannot build with lean or dispatch",
    ),
    TrtexecFlag(
        "leanDLLPath", "build", "inference", note="the lean runtime library used to load a version-compatible engine"
    ),
    TrtexecFlag("excludeLeanRuntime", "build", "mapped", "builder.exclude_lean_runtime"),
    TrtexecFlag(
        "monitorMemory",
        "build",
        "refused",
        note="a memory report for safe builds with remote auto-tuning only; trtls records every build's peak memory "
        "in its evidence (resources.peakRssBytes)",
    ),
    TrtexecFlag("sparsity", "build", "mapped", "builder.sparse_weights"),
    TrtexecFlag("noTF32", "build", "mapped", "builder.tf32", "tf32 = false"),
    TrtexecFlag("stronglyTyped", "build", "mapped", "precision.strongly_typed", "a no-op in trtexec 11 (always on)"),
    TrtexecFlag(
        "directIO",
        "build",
        "refused",
        note="deprecated in trtexec (BuilderFlag.DIRECT_IO: no reformatting at the network's boundaries); trtls has no "
        "key for it",
    ),
    TrtexecFlag(
        "layerDeviceTypes",
        "build",
        "refused",
        note="per-layer GPU/DLA placement; trtls has dla_core and allow_gpu_fallback for the whole engine, no key per "
        "layer",
    ),
    TrtexecFlag(
        "decomposableAttentions",
        "build",
        "refused",
        note="marks attention layers as decomposable by name; trtls has no key for it",
    ),
    TrtexecFlag("safe", "build", "refused", note=_SAFETY),
    TrtexecFlag("dumpKernelText", "build", "refused", note=_SAFETY),
    TrtexecFlag("consistency", "build", "refused", note=_SAFETY),
    TrtexecFlag("remoteAutoTuningConfig", "build", "refused", note=_SAFETY + " (remote auto-tuning goes with --safe)"),
    TrtexecFlag("cpuOnly", "build", "refused", note=_SAFETY + " (--cpuOnly goes with --safe and remote auto-tuning)"),
    TrtexecFlag(
        "buildDLAStandalone",
        "build",
        "refused",
        note="a cuDLA loadable, not a TensorRT engine; trtls builds engines",
    ),
    TrtexecFlag("allowGPUFallback", "build", "mapped", "builder.allow_gpu_fallback"),
    TrtexecFlag("saveEngine", "build", "mapped", "output"),
    TrtexecFlag("loadEngine", "build", "inspection", note=_LOADS),
    TrtexecFlag("asyncFileReader", "build", "inference", note="reads a serialized engine with --loadEngine"),
    TrtexecFlag("getPlanVersionOnly", "build", "inspection", note=_LOADS),
    TrtexecFlag("tacticSources", "build", "mapped", "builder.tactic_sources"),
    TrtexecFlag(
        "noBuilderCache",
        "build",
        "trtls",
        note="without a timing_cache key trtls reads and writes no timing cache file; the builder's cache within "
        "one build is not a recipe setting",
    ),
    TrtexecFlag(
        "noCompilationCache",
        "build",
        "refused",
        note="BuilderFlag.DISABLE_COMPILATION_CACHE; trtls has no key for it (the compilation cache lives in the "
        "timing cache, and without a timing_cache key none is kept)",
    ),
    TrtexecFlag(
        "errorOnTimingCacheMiss",
        "build",
        "refused",
        note="BuilderFlag.ERROR_ON_TIMING_CACHE_MISS (fail when a tactic is not in the timing cache); trtls has no key "
        "for it: with timing_cache set, the evidence says whether the cache was reused, updated or cold",
    ),
    TrtexecFlag("timingCacheFile", "build", "mapped", "timing_cache"),
    TrtexecFlag(
        "preview",
        "build",
        "refused",
        note="preview features (IBuilderConfig.set_preview_feature); trtls has no key for them",
    ),
    TrtexecFlag("builderOptimizationLevel", "build", "mapped", "builder.optimization_level"),
    TrtexecFlag("maxTactics", "build", "mapped", "builder.max_num_tactics"),
    TrtexecFlag("hardwareCompatibilityLevel", "build", "mapped", "builder.hardware_compatibility_level"),
    TrtexecFlag("runtimePlatform", "build", "mapped", "builder.runtime_platform"),
    TrtexecFlag(
        "tempdir",
        "build",
        "refused",
        note="TensorRT's temporary folder (IRuntime.temporary_directory); the worker keeps TensorRT's default, and "
        "trtls writes only inside the recipe's folders",
    ),
    TrtexecFlag(
        "tempfileControls",
        "build",
        "refused",
        note="whether TensorRT may create temporary executable files; the worker keeps TensorRT's default",
    ),
    TrtexecFlag("maxAuxStreams", "build", "mapped", "builder.max_aux_streams"),
    TrtexecFlag("allowWeightStreaming", "build", "mapped", "builder.weight_streaming"),
    TrtexecFlag("markDebug", "build", "refused", note=_DEBUG_TENSORS),
    TrtexecFlag("markUnfusedTensorsAsDebugTensors", "build", "refused", note=_DEBUG_TENSORS),
    TrtexecFlag("tilingOptimizationLevel", "build", "mapped", "builder.tiling_level"),
    TrtexecFlag("l2LimitForTiling", "build", "mapped", "builder.l2_limit_for_tiling"),
    TrtexecFlag(
        "distributiveIndependence",
        "build",
        "refused",
        note="BuilderFlag.DISTRIBUTIVE_INDEPENDENCE; trtls has no key for it",
    ),
    TrtexecFlag(
        "skipInference",
        "build",
        "trtls",
        note="trtls only builds: there is no inference to skip",
    ),
    # -- system ----------------------------------------------------------------------------------------------------
    TrtexecFlag(
        "device", "system", "inference", note="the GPU trtexec runs on; a trtls build's device is its machine's"
    ),
    TrtexecFlag("useDLACore", "system", "mapped", "builder.dla_core"),
    TrtexecFlag("staticPlugins", "system", "mapped", "plugins.libraries"),
    TrtexecFlag("dynamicPlugins", "system", "mapped", "plugins.libraries"),
    TrtexecFlag("plugins", "system", "mapped", "plugins.libraries", "the deprecated spelling of --staticPlugins"),
    TrtexecFlag("setPluginsToSerialize", "system", "mapped", "plugins.serialize"),
    TrtexecFlag(
        "ignoreParsedPluginLibs",
        "system",
        "refused",
        note="the plugin libraries the ONNX parser names are not serialized with a version-compatible engine; trtls "
        "serializes exactly plugins.serialize",
    ),
    TrtexecFlag("safetyPlugins", "system", "refused", note=_SAFETY),
    # -- inference -------------------------------------------------------------------------------------------------
    TrtexecFlag(
        "shapes",
        "inference",
        "mapped",
        "profiles",
        "without --minShapes/--optShapes/--maxShapes trtexec builds one profile with min = opt = max = these shapes",
    ),
    *(
        TrtexecFlag(f, "inference", "inference", note=_RUNS)
        for f in (
            "loadInputs",
            "loadRefOutputs",
            "iterations",
            "warmUp",
            "duration",
            "sleepTime",
            "idleTime",
            "infStreams",
            "streams",
            "exposeDMA",
            "includeDataTransfers",
            "noDataTransfers",
            "useManagedMemory",
            "noSpinWait",
            "useSpinWait",
            "threads",
            "noCudaGraph",
            "useCudaGraph",
            "timeDeserialize",
            "timeRefit",
            "separateProfileRun",
            "persistentCacheRatio",
            "useProfile",
            "allocationStrategy",
            "accuracyAlgorithm",
            "atol",
            "rtol",
            "accuracyThreshold",
            "refPair",
            "saveDebugTensors",
            "saveAllDebugTensors",
            "weightStreamingBudget",
        )
    ),
    TrtexecFlag(
        "refitFromOnnx", "inference", "inference", note="refits a loaded engine with an ONNX's weights; " + _LOADS
    ),
    # -- tuning ----------------------------------------------------------------------------------------------------
    *(
        TrtexecFlag(f, "tuning", "refused", note=_TUNING)
        for f in (
            "tuneBuildRoutes",
            "tuneBuildRouteFile",
            "tuningSearch",
            "tuningCacheFile",
            "tuningResultFile",
            "tuningTimeOut",
            "saveAllEngines",
            "dryRun",
            "continue",
            "helpBuildRoute",
            "setBuildRoute",
        )
    ),
    # -- reporting -------------------------------------------------------------------------------------------------
    TrtexecFlag(
        "verbose",
        "reporting",
        "trtls",
        note="the build's log and phase tree are always recorded in the evidence (summary.json, events.jsonl)",
    ),
    *(TrtexecFlag(f, "reporting", "inference", note=_RUNS) for f in ("avgRuns", "percentile", "dumpOutput")),
    *(
        TrtexecFlag(f, "reporting", "inference", note="per-layer timings of inference runs; " + _RUNS)
        for f in ("dumpProfile", "exportProfile", "exportTimes", "exportOutput", "dumpRawBindingsToFile")
    ),
    *(
        TrtexecFlag(
            f,
            "reporting",
            "inspection",
            note=f"engine inspection: {what}; trtls does not load engines. Build with "
            'profiling_verbosity = "detailed" (--profilingVerbosity) and read the engine with '
            "IEngineInspector or `polygraphy inspect model`",
        )
        for f, what in (
            ("dumpLayerInfo", "prints the built engine's layers"),
            ("exportLayerInfo", "writes the built engine's layers to a JSON file"),
        )
    ),
    TrtexecFlag("dumpRefit", "reporting", "inspection", note="lists a refittable engine's weights; " + _LOADS),
    TrtexecFlag("dumpOptimizationProfile", "reporting", "inspection", note=_LOADS),
    # -- help ------------------------------------------------------------------------------------------------------
    TrtexecFlag("help", "help", "trtls", note="prints trtexec's help; nothing to import"),
    TrtexecFlag("h", "help", "trtls", note="alias of --help"),
    # -- removed in TensorRT 11 (read by trtexec 10.16, refused by 11.1) ----------------------------------------------
    TrtexecFlag("fp16", "removed in 11", "removed", "precision.convert", _CONVERT),
    TrtexecFlag("bf16", "removed in 11", "removed", "precision.convert", _CONVERT),
    TrtexecFlag("int8", "removed in 11", "removed", note=_QDQ),
    TrtexecFlag("fp8", "removed in 11", "removed", note=_QDQ),
    TrtexecFlag("int4", "removed in 11", "removed", note="weight-only INT4 through ModelOpt quantization (Q/DQ)"),
    TrtexecFlag(
        "best", "removed in 11", "removed", "precision.convert", "fp16 through " + _CONVERT + "; int8/fp8: Q/DQ"
    ),
    TrtexecFlag("layerPrecisions", "removed in 11", "removed", "precision.exclude_nodes", _EXCLUDE),
    TrtexecFlag("precisionConstraints", "removed in 11", "removed", "precision.exclude_nodes", _EXCLUDE),
    TrtexecFlag(
        "layerOutputTypes",
        "removed in 11",
        "removed",
        "precision.exclude_nodes",
        "the graph's own types (strongly typed): Cast nodes in the ONNX, or AutoCast's exclusions",
    ),
    *(
        TrtexecFlag(f, "removed in 11", "removed", note="INT8 calibration is gone: " + _QDQ)
        for f in ("calib", "calibProfile", "minShapesCalib", "optShapesCalib", "maxShapesCalib")
    ),
    TrtexecFlag("weightless", "removed in 11", "removed", "builder.strip_weights", "--stripWeights (strip_weights)"),
    TrtexecFlag(
        "restricted",
        "removed in 11",
        "removed",
        note="BuilderFlag.SAFETY_SCOPE (safety-restricted builds) is not something trtls builds",
    ),
)

BY_FLAG: dict[str, TrtexecFlag] = {f.flag: f for f in FLAGS}
assert len(BY_FLAG) == len(FLAGS), "a trtexec flag is listed twice"

# The importer also reads spellings trtexec never had or dropped long ago, so old scripts import: not in this table.
NOT_TRTEXEC_11 = {"workspace", "weightStreaming", "fp4"}
