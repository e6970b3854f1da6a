"""`trtls import trtexec` for TensorRT 11 (issue 33): every trtexec 11.1 flag is mapped onto a recipe key, said to be
inference only or engine inspection, or refused with the reason; flags TensorRT 11 removed are named with their
replacement; docs/trtexec.md is generated from the same table the importer reads, and an imported TensorRT 11 command
line builds for real."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from trtls.cli.main import main
from trtls.importers.trtexec import FLAG_RULES, ImportError_, import_trtexec
from trtls.importers.trtexec_doc import flags_markdown, page_with_table
from trtls.importers.trtexec_flags import BY_FLAG, FLAGS, NOT_TRTEXEC_11

ROOT = Path(__file__).resolve().parents[1]

# Every option NVIDIA/TensorRT samples/common/sampleOptions.cpp reads at the TensorRT 11.1 OSS release (commit
# 82d1dca8): the `"--name"` strings of BaseModelOptions, BuildOptions, SystemOptions, InferenceOptions, TuningOptions
# and ReportingOptions::parse, plus --help/-h. Written out here so the table cannot drop one unnoticed.
TRTEXEC_11_1 = set(
    """
    onnx
    adjustForDLA allowGPUFallback allowWeightStreaming asyncFileReader avgTiming buildDLAStandalone
    builderOptimizationLevel consistency cpuOnly decomposableAttentions directIO distributiveIndependence dumpKernelText
    enablePluginOverride errorOnTimingCacheMiss excludeLeanRuntime getPlanVersionOnly hardwareCompatibilityLevel
    inputIOFormats l2LimitForTiling layerDeviceTypes leanDLLPath loadEngine markDebug markUnfusedTensorsAsDebugTensors
    maxAuxStreams maxShapes maxTactics memPoolSize minShapes monitorMemory noBuilderCache noCompilationCache noTF32
    optShapes outputIOFormats pi pluginInstanceNorm preview profile profilingVerbosity refit remoteAutoTuningConfig
    reportCapabilityDLA runtimePlatform safe saveAllEngines saveEngine setBuildRoute skipInference sparsity
    stripAllWeights stripWeights stronglyTyped tacticSources tempdir tempfileControls tilingOptimizationLevel
    timingCacheFile uint8AsymmetricQuantizationDLA useRuntime vc versionCompatible
    device dynamicPlugins ignoreParsedPluginLibs plugins safetyPlugins setPluginsToSerialize staticPlugins useDLACore
    continue dryRun helpBuildRoute tuneBuildRouteFile tuneBuildRoutes tuningCacheFile tuningResultFile tuningSearch
    tuningTimeOut
    accuracyAlgorithm accuracyThreshold allocationStrategy atol duration exposeDMA idleTime includeDataTransfers
    infStreams iterations loadInputs loadRefOutputs noCudaGraph noDataTransfers noSpinWait persistentCacheRatio
    refitFromOnnx refPair rtol saveAllDebugTensors saveDebugTensors separateProfileRun shapes sleepTime streams threads
    timeDeserialize timeRefit useCudaGraph useManagedMemory useProfile useSpinWait warmUp weightStreamingBudget
    avgRuns dumpLayerInfo dumpOptimizationProfile dumpOutput dumpProfile dumpRawBindingsToFile dumpRefit exportLayerInfo
    exportOutput exportProfile exportTimes percentile verbose
    help h
    """.split()
)
# Read by 10.16's BuildOptions::parse (commit 5302b288) and not by 11.1's: trtexec 11 refuses them.
REMOVED_IN_11 = set(
    """best bf16 calib calibProfile fp16 fp8 int4 int8 layerOutputTypes layerPrecisions maxShapesCalib minShapesCalib
    optShapesCalib precisionConstraints restricted weightless""".split()
)


def test_the_table_holds_every_trtexec_11_1_flag_and_every_flag_11_removed() -> None:
    current = {f.flag for f in FLAGS if f.section != "removed in 11"}
    removed = {f.flag for f in FLAGS if f.section == "removed in 11"}
    assert current == TRTEXEC_11_1 and removed == REMOVED_IN_11
    assert all(f.disposition == "removed" for f in FLAGS if f.flag in REMOVED_IN_11)
    # every flag that is not mapped says why; every removed one names what replaces it
    assert [f.flag for f in FLAGS if f.disposition != "mapped" and not f.note] == []


def test_the_table_and_the_key_table_agree_on_every_mapped_flag() -> None:
    for f in FLAGS:
        rule = FLAG_RULES.get(f.flag)
        if f.disposition == "mapped":
            assert rule is not None and f.key is not None and rule[0].startswith(f.key), f
    # every flag the key table imports is a trtexec flag of the table (or an old spelling the importer keeps)
    assert sorted(set(FLAG_RULES) - set(BY_FLAG) - NOT_TRTEXEC_11) == []


def test_the_docs_page_is_generated_from_the_table() -> None:
    page = (ROOT / "docs" / "trtexec.md").read_text(encoding="utf-8")
    assert flags_markdown() in page, "docs/trtexec.md is out of date: python -m trtls.importers.trtexec_doc --write …"
    assert page_with_table(page) == page
    for flag in TRTEXEC_11_1 | REMOVED_IN_11:
        assert f"| `--{flag}` |" in page, flag


def _value(flag: str) -> list[str]:
    """A command line that gives `flag` a value trtexec would take."""
    values = {
        "minShapes": "x:1x3", "optShapes": "x:1x3", "maxShapes": "x:1x3", "shapes": "x:1x3", "profile": "0",
        "memPoolSize": "workspace:64M", "sparsity": "enable", "hardwareCompatibilityLevel": "ampere+",
        "tilingOptimizationLevel": "1", "runtimePlatform": "SameAsBuild", "profilingVerbosity": "detailed",
    }  # fmt: skip
    if flag == "profile":  # it numbers the shapes after it
        return ["--profile=0", "--optShapes=x:1x3"]
    if flag in values:
        return [f"--{flag}={values[flag]}"]
    kind = FLAG_RULES.get(flag, ("", "text"))[1]
    if kind in ("int", "pools", "workspace"):
        return [f"--{flag}=2"]
    return [f"--{flag}=v"] if kind in ("text", "list", "paths", "lower") else [f"--{flag}"]


@pytest.mark.parametrize("flag", sorted(TRTEXEC_11_1 - {"onnx"}))
def test_every_11_1_flag_is_either_on_a_key_or_named_with_why(flag: str) -> None:
    imp = import_trtexec(["--onnx=m.onnx", *_value(flag)])
    notes = [n for n in imp.notes if n.startswith(f"--{flag}:")]
    assert not any("not a trtexec 11.1 flag" in n for n in notes)
    if BY_FLAG[flag].disposition == "mapped":
        bare = tomllib.loads(import_trtexec(["--onnx=m.onnx"]).toml())["engines"]["m"]
        assert tomllib.loads(imp.toml())["engines"]["m"] != bare, flag
    else:
        assert len(notes) == 1 and BY_FLAG[flag].note in notes[0], (flag, imp.notes)


def test_the_tensorrt_11_flags_the_issue_names() -> None:
    argv = [
        "--onnx=m.onnx",
        "--allowWeightStreaming",
        "--markDebug=t0,t1",
        "--markUnfusedTensorsAsDebugTensors",
        "--errorOnTimingCacheMiss",
        "--tuneBuildRoutes=-builderOptimizationLevel=[3|5]",
        "--inputIOFormats=fp16:chw",
        "--outputIOFormats=fp16:chw",
        "--dumpLayerInfo",
        "--exportLayerInfo=layers.json",
        "--precisionConstraints=obey",
    ]
    imp = import_trtexec(argv)
    note = {n.split(":", 1)[0]: n for n in imp.notes}
    assert imp.builder == {"weight_streaming": True}  # was "not understood"
    for flag in ("--markDebug", "--markUnfusedTensorsAsDebugTensors"):  # a build option, not inference only
        assert "inference only" not in note[flag] and "refused" in note[flag] and "debug tensors" in note[flag]
    miss = note["--errorOnTimingCacheMiss"]
    assert "refused" in miss and "ERROR_ON_TIMING_CACHE_MISS" in miss
    assert "refused" in note["--tuneBuildRoutes"] and "autotuning" in note["--tuneBuildRoutes"]
    for flag in ("--inputIOFormats", "--outputIOFormats"):
        assert "refused" in note[flag] and "I/O tensor formats" in note[flag]
    for flag in ("--dumpLayerInfo", "--exportLayerInfo"):
        assert "engine inspection" in note[flag] and "inference only" not in note[flag]
    assert "prints the built engine's layers" in note["--dumpLayerInfo"]
    assert "writes the built engine's layers to a JSON file" in note["--exportLayerInfo"], "it prints nothing"
    constraints = note["--precisionConstraints"]
    assert "removed in TensorRT 11" in constraints and "exclude_nodes" in constraints


def test_layer_precisions_fp32_become_autocast_exclusions(tmp_path: Path) -> None:
    imp = import_trtexec(["--onnx=m.onnx", "--fp16", "--layerPrecisions=/head/Conv_1:fp32,'/attn/Softmax':fp32,*:fp16"])
    assert imp.precision["convert"] == "fp16"
    assert imp.precision["exclude_nodes"] == [r"^/head/Conv_1$", r"^/attn/Softmax$"]
    (note,) = [n for n in imp.notes if n.startswith("--layerPrecisions:")]
    assert "removed in TensorRT 11" in note and "not imported: *:fp16" in note
    loaded = tomllib.loads(imp.toml())["engines"]["m"]["precision"]
    assert loaded["exclude_nodes"] == imp.precision["exclude_nodes"]
    alone = import_trtexec(["--onnx=m.onnx", "--layerPrecisions=a:fp32"])
    assert any("only applies with precision.convert" in n for n in alone.notes)


def test_profile_n_takes_the_shapes_after_it() -> None:
    imp = import_trtexec(
        [
            "--onnx=m.onnx",
            "--profile=1", "--minShapes=x:4x3", "--optShapes=x:8x3", "--maxShapes=x:16x3",
            "--profile=0", "--minShapes=x:1x3", "--optShapes=x:1x3", "--maxShapes=x:2x3",
        ]
    )  # fmt: skip
    assert imp.profiles == [
        {"x": {"min": [1, 3], "opt": [1, 3], "max": [2, 3]}},
        {"x": {"min": [4, 3], "opt": [8, 3], "max": [16, 3]}},
    ]
    assert not any(n.startswith("--profile") for n in imp.notes)
    with pytest.raises(ImportError_, match="given twice"):
        import_trtexec(["--onnx=m.onnx", "--profile=0", "--minShapes=x:1", "--profile=0", "--minShapes=x:2"])
    with pytest.raises(ImportError_, match="given twice"):
        import_trtexec(["--onnx=m.onnx", "--profile=1", "--profile=1", "--minShapes=x:1"])


def test_a_profile_with_no_shapes_after_it_is_named() -> None:
    """`--profile=1` last (or followed by another --profile) makes no profile: the note says so, never silence."""
    shapes = ["--minShapes=x:1x3", "--optShapes=x:2x3", "--maxShapes=x:4x3"]
    imp = import_trtexec(["--onnx=m.onnx", *shapes, "--profile=1"])
    assert imp.profiles == [{"x": {"min": [1, 3], "opt": [2, 3], "max": [4, 3]}}]
    assert "--profile=1: no --minShapes/--optShapes/--maxShapes after it; no profile made for it" in imp.notes


def test_a_tensorrt_11_command_line_builds_for_real(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(workspace)
    args = [
        "--onnx=models/demo.onnx",
        "--saveEngine=build/t11.engine",
        "--profile=0",
        "--minShapes=input:1x3x32x32",
        "--optShapes=input:2x3x32x32",
        "--maxShapes=input:4x3x32x32",
        "--allowWeightStreaming",
        "--markDebug=output",
        "--dumpLayerInfo",
        "--skipInference",
    ]
    assert main(["import", "trtexec", "--write", str(workspace), "--name", "t11", "--", *args]) == 0
    capsys.readouterr()
    assert main(["build", str(workspace), "--engine", "t11"]) == 0
    run = max((workspace / ".trtls" / "runs").iterdir(), key=lambda p: p.stat().st_mtime)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["outcome"] == "built" and summary["effectiveSettings"]["weight_streaming"] is True
    assert summary["optimizationProfiles"][0]["inputs"]["input"]["max"] == [4, 3, 32, 32]
