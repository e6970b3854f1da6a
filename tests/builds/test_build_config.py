"""The build configuration with real TensorRT-RTX builds: applied keys change what is built and recorded,
keys this module cannot apply are reported on the key (never dropped), a real TensorRT internal error is
recorded as one, legacy precision flags and plugin problems stop the build before TensorRT builds anything."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trtls.builds.supervisor.outcome_findings import build_findings
from trtls.core.summary_record import Summary

from .helpers import loaded, run_build

BUILDER = "[engines.demo.builder]\noptimization_level = 3\n"


async def _build(ws: Path, edit: dict[str, str]) -> tuple[Summary, object]:
    rec = loaded(ws, edit)
    from trtls.builds.supervisor.supervisor import Supervisor

    build = Supervisor().start(rec, "demo")
    return await build.wait(), rec


def _codes_at(summary: Summary, rec) -> dict[str, list[str]]:
    """code → the recipe text each finding points at."""
    out: dict[str, list[str]] = {}
    for f in build_findings(summary):
        r = rec.source_map.range(f.path, f.on_value)
        out.setdefault(f.code, []).append(rec.text.splitlines()[r.start_line].strip())
    return out


async def test_applied_keys_change_the_engine_and_unapplicable_keys_are_reported(workspace: Path) -> None:
    _, baseline = await run_build(workspace)
    base = await baseline.wait()
    assert base.outcome == "built", base.error
    summary, rec = await _build(
        workspace,
        {
            BUILDER: BUILDER
            + 'tf32 = false\nsparse_weights = true\nweight_streaming = true\nrefit = "individual"\n'
            + 'tactic_sources = ["-JIT_CONVOLUTIONS", "-CUDNN"]\nprofiling_verbosity = "detailed"\n'
            + 'tiling_level = "fast"\nl2_limit_for_tiling = 1048576\nruntime_platform = "windows_amd64"\n'
            + "dla_core = 0\nmemory_pool_limits = { tactic_dram_mib = 512, dla_managed_sram_mib = 1 }\n"
            + "[engines.demo.precision]\nstrongly_typed = true\n"
        },
    )
    assert summary.outcome == "built", summary.error
    eff = summary.effectiveSettings
    # read back from the IBuilderConfig, not echoed
    assert eff["tf32"] is False and eff["sparse_weights"] is True and eff["weight_streaming"] is True
    assert eff["refit"] == "individual" and eff["profiling_verbosity"] == "detailed"
    assert eff["tactic_sources"] == ["EDGE_MASK_CONVOLUTIONS"] and eff["l2_limit_for_tiling"] == 1048576
    assert eff["tactic_dram_mib"] == 512 and eff["strongly_typed"] is True
    # what was applied changed what was built: REFIT_INDIVIDUAL adds refit data (measured: 13383244 → 13418140 B)
    assert summary.engineArtifact["size"] != base.engineArtifact["size"]
    assert summary.buildConfigHash != base.buildConfigHash
    # what this module could not apply: in the evidence with the reason, and on the key
    na = eff["not_applied"]
    assert set(na) == {"tactic_sources", "runtime_platform", "dla_core", "dla_managed_sram_mib"}
    assert "-CUDNN" in na["tactic_sources"] and "API Usage Error" in na["runtime_platform"]
    assert "num_DLA_cores = 0" in na["dla_core"]
    at = _codes_at(summary, rec)
    lines = sorted(at["TRT140"])
    assert any(ln.startswith("runtime_platform") for ln in lines) and any(ln.startswith("dla_core") for ln in lines)
    assert any(ln.startswith("tactic_sources") for ln in lines) and any("dla_managed_sram_mib" in ln for ln in lines)


async def test_a_real_internal_error_is_recorded_as_one(workspace: Path) -> None:
    """TensorRT-RTX's compiler needs ≥ 47 KiB of tactic shared memory: 32 KiB fails a Myelin check."""
    summary, rec = await _build(
        workspace, {BUILDER: BUILDER + "memory_pool_limits = { tactic_shared_memory_kib = 32 }\n"}
    )
    assert summary.outcome == "failed"
    assert summary.effectiveSettings["tactic_shared_memory_kib"] == 32
    failure = summary.failure
    assert failure.kind == "internal_error" and failure.errorCode == 1
    assert failure.assertion.startswith("CHECK_GE(smem_limit") and failure.source.startswith("kernel_gen_utils")
    assert summary.retryPolicy == "investigate" and "blind retry fails the same way" in summary.retryRule
    codes = {f.code for f in build_findings(summary)}
    assert {"TRT202", "TRT205", "TRT206"} <= codes


async def test_legacy_precision_flags_name_the_migration_and_build_nothing(workspace: Path) -> None:
    summary, rec = await _build(
        workspace, {BUILDER: BUILDER + '[engines.demo.precision]\nlegacy_flags = ["fp16", "int8"]\n'}
    )
    assert summary.outcome == "failed"
    assert summary.failure.record() == {"kind": "setting", "code": "TRT141", "key": "legacy_flags"}
    assert "FP16, INT8" in summary.error and 'convert = "fp16"' in summary.error and "Q/DQ" in summary.error
    assert summary.phaseTree == [], "TensorRT never started building"
    at = _codes_at(summary, rec)
    assert at["TRT141"] == ['legacy_flags = ["fp16", "int8"]']


async def test_plugin_problems_name_the_library_or_the_creator(workspace: Path) -> None:
    libm = "/lib/x86_64-linux-gnu/libm.so.6"
    summary, rec = await _build(workspace, {BUILDER: BUILDER + f'[engines.demo.plugins]\nlibraries = ["{libm}"]\n'})
    assert summary.outcome == "failed" and summary.failure.code == "TRT149"
    assert libm in summary.error
    summary, rec = await _build(
        workspace,
        {f'libraries = ["{libm}"]\n': 'require_creators = ["ROIAlign_TRT@2", "MyNMS_TRT"]\n'},
    )
    assert summary.outcome == "failed" and "MyNMS_TRT" in summary.error
    assert "ROIAlign_TRT@2" in summary.error, "the registered creators are listed"
    assert _codes_at(summary, rec)["TRT149"] == ['require_creators = ["ROIAlign_TRT@2", "MyNMS_TRT"]']


def test_autocast_child_without_modelopt_says_what_to_install(tmp_path: Path, quickstart_models: Path) -> None:
    """The real child process, with ModelOpt made unimportable: the worker maps its answer to TRT147."""
    import json
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['modelopt'] = None; "
        "from trtls.builds.worker.autocast_child import main; sys.exit(main())"
    )
    job = {
        "input": str(quickstart_models / "demo.onnx"),
        "output": str(tmp_path / "m.onnx"),
        "low_precision_type": "fp16",
    }
    proc = subprocess.run([sys.executable, "-c", code], input=json.dumps(job) + "\n", capture_output=True, text=True)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert proc.returncode == 1 and result["ok"] is False and result["kind"] == "missing_modelopt"
    assert "ModelOpt" in result["error"] and not (tmp_path / "m.onnx").exists()


def test_precision_failures_land_on_the_convert_key() -> None:
    summary = {
        "engine": "demo",
        "buildId": "b",
        "outcome": "failed",
        "error": "precision conversion failed: NVIDIA ModelOpt AutoCast cannot be imported",
        "failure": {"kind": "precision", "code": "TRT147", "key": "convert"},
        "retryPolicy": "investigate",
        "effectiveSettings": {},
    }
    found = {f.code: f.path for f in build_findings(Summary.written(summary))}
    assert found["TRT147"] == ("engines", "demo", "precision", "convert") and "TRT202" in found


async def test_version_compatible_needs_exclude_lean_runtime_on_rtx(workspace: Path) -> None:
    """Measured on TensorRT-RTX 1.7: VERSION_COMPATIBLE alone fails (no libnvinfer_lean.so.1 in the wheel) —
    located on the key with the fix; with EXCLUDE_LEAN_RUNTIME the engine builds and both flags are read back."""
    summary, rec = await _build(workspace, {BUILDER: BUILDER + "version_compatible = true\n"})
    assert summary.outcome == "failed" and summary.failure.code == "TRT146"
    assert summary.retryPolicy == "investigate"
    (message,) = [f.message for f in build_findings(summary) if f.code == "TRT146"]
    assert "exclude_lean_runtime = true" in message
    assert _codes_at(summary, rec)["TRT146"] == ["version_compatible = true"]
    summary, _ = await _build(
        workspace, {"version_compatible = true\n": "version_compatible = true\nexclude_lean_runtime = true\n"}
    )
    assert summary.outcome == "built", summary.error
    assert summary.effectiveSettings["version_compatible"] is True
    assert summary.effectiveSettings["exclude_lean_runtime"] is True


def test_check_with_the_builder_flags_what_this_module_cannot_apply(
    workspace: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`trtls check --builder` asks the real module (a probe child) before any build: the legacy flag is an
    error naming the migration, the DLA core and an unknown tactic source are warnings, all on their keys."""
    from trtls.cli.main import main

    loaded(
        workspace,
        {
            BUILDER: BUILDER
            + 'dla_core = 0\ntactic_sources = ["-CUDNN"]\n[engines.demo.precision]\nlegacy_flags = ["fp16"]\n'
        },
    )
    assert main(["check", str(workspace)]) == 0, "without --builder nothing is module-specific"
    capsys.readouterr()
    assert main(["check", str(workspace), "--builder", "--format", "json"]) == 2
    report = json.loads(capsys.readouterr().out)
    found = {(f["code"], f["line"]) for f in report["findings"]}
    text = (workspace / "trtls.toml").read_text().splitlines()
    assert [text[line - 1] for code, line in found if code == "TRT141"] == ['legacy_flags = ["fp16"]']
    assert {text[line - 1].split(" =")[0] for code, line in found if code == "TRT140"} == {"dla_core", "tactic_sources"}
