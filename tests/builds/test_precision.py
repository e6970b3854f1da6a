"""The precision step with real ModelOpt AutoCast and real TensorRT-RTX builds: its own phase before
TensorRT's, an FP16 engine that differs from the FP32 one, a content-keyed cache that a rebuild reuses
without starting ModelOpt, and a Stop during the conversion that kills the child and caches nothing."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from trtls.builds.supervisor.supervisor import Supervisor

from .helpers import cancel_at_phase, loaded, process_gone_soon


def _modelopt_missing() -> bool:
    # find_spec, not an import: collecting this file should not pay for loading ModelOpt.
    return importlib.util.find_spec("modelopt") is None


# A mark, not a module-level skip: the tests are still collected (tests/test_collection.py) and each says why it
# skips. CI sets TRTLS_REQUIRE_PRECISION, so there a missing ModelOpt fails instead.
pytestmark = pytest.mark.skipif(
    not os.environ.get("TRTLS_REQUIRE_PRECISION") and _modelopt_missing(),
    reason="the precision extra (nvidia-modelopt) is not installed",
)

PRECISION = '[engines.demo.precision]\nconvert = "fp16"\nexclude_op_types = ["GlobalAveragePool"]\n'
BUILDER = "[engines.demo.builder]\noptimization_level = 3\n"


def _entries(ws: Path) -> list[Path]:
    root = ws / ".trtls" / "precision"
    return sorted(root.iterdir()) if root.is_dir() else []


async def test_fp16_conversion_is_a_phase_cached_by_content_and_recorded(workspace: Path) -> None:
    rec = loaded(workspace, {BUILDER: BUILDER + PRECISION})
    first = await Supervisor().start(rec, "demo").wait()
    assert first.outcome == "built", first.error
    tree = {p["id"]: p for p in first.phaseTree}
    assert tree["0"]["name"] == "Precision conversion (ModelOpt AutoCast fp16)" and tree["0"]["status"] == "done"
    assert tree["1"]["parentId"] is None and tree["1.0"]["parentId"] == "1", "TensorRT's phases follow as 1, 1.0 …"
    record = first.precision
    assert record["cache"] == "miss" and record["low_precision_type"] == "fp16" and record["keep_io_types"] is True
    assert record["exclude_op_types"] == ["GlobalAveragePool"] and record["modelopt_version"]
    assert record["initializers_low"] > 0 and len(record["input_sha256"]) == 64
    assert first.effectiveSettings["strongly_typed"] is True, "convert implies a strongly typed network"
    (entry,) = _entries(workspace)
    assert (
        entry.name == record["key"]
        and json.loads((entry / "precision.json").read_text())["output_sha256"] == record["output_sha256"]
    )
    # the rebuild reuses the converted model: no ModelOpt, same bytes, same build config
    second = await Supervisor().start(loaded(workspace), "demo").wait()
    assert second.outcome == "built"
    assert second.precision["cache"] == "hit" and second.precision["output_sha256"] == record["output_sha256"]
    assert second.buildConfigHash == first.buildConfigHash
    # a different setting is a different key
    third = await Supervisor().start(loaded(workspace, {'"GlobalAveragePool"': '"Relu"'}), "demo").wait()
    assert third.precision["cache"] == "miss" and len(_entries(workspace)) == 2


async def test_fp16_engine_differs_from_fp32(workspace: Path) -> None:
    fp32 = await Supervisor().start(loaded(workspace), "demo").wait()
    fp16 = await Supervisor().start(loaded(workspace, {BUILDER: BUILDER + PRECISION}), "demo").wait()
    assert fp32.outcome == fp16.outcome == "built"
    # fp16 changes what TensorRT builds: other bytes, from a model whose initializers AutoCast made fp16. The size is
    # no measure: the quickstart's demo is LayerNorm-heavy (no warning, issue 18), and AutoCast keeps norms in fp32
    # behind casts (measured 2574852 B fp32 → 3004580 B fp16; the older conv demo shrank 13383244 → 11573332 B).
    assert fp16.engineArtifact["sha256"] != fp32.engineArtifact["sha256"]
    assert fp32.precision is None and fp16.precision["initializers_low"] > 0


async def test_stop_during_conversion_kills_the_child_and_caches_nothing(workspace: Path) -> None:
    rec = loaded(workspace, {BUILDER: BUILDER + PRECISION})
    build = Supervisor().start(rec, "demo")
    cancel_at_phase(build, 0, lambda b: b.cancel("ide_stop"))
    summary = await build.wait()
    assert summary.outcome == "cancelled" and summary.cancelSource == "ide_stop"
    assert not summary.forced, "the worker stopped the conversion itself, within the grace"
    assert summary.phaseTree[0]["status"] == "cancelled" and len(summary.phaseTree) == 1
    assert summary.precision is None
    assert [p for p in (workspace / ".trtls" / "precision").glob("*")] == [], "no entry, no temp folder"
    assert process_gone_soon(build.pid)
    assert not (workspace / "build" / "demo.engine").exists()


async def test_two_input_encoder_fp16_and_external_data_bf16(models_ws: Path) -> None:
    """The model shapes users bring: a transformer-style encoder (two int64 dynamic inputs, two profiles) in
    FP16, and a model whose weights live in external data in BF16 — whose .data file is part of the key."""
    edit = {
        "[engines.encoder]\n": '[engines.encoder]\nprecision = { convert = "fp16" }\n',
        "[engines.external]\n": '[engines.external]\nprecision = { convert = "bf16" }\n',
    }
    rec = loaded(models_ws, edit)
    encoder = await Supervisor().start(rec, "encoder").wait()
    assert encoder.outcome == "built", encoder.error
    assert encoder.precision["low_precision_type"] == "fp16" and len(encoder.optimizationProfiles) == 2
    external = await Supervisor().start(rec, "external").wait()
    assert external.outcome == "built", external.error
    assert external.precision["low_precision_type"] == "bf16" and external.precision["cache"] == "miss"
    # the weights changed, the .onnx did not: a new key, converted again
    data = models_ws / "models" / "external.onnx.data"
    raw = bytearray(data.read_bytes())
    raw[0] ^= 0x01
    data.write_bytes(bytes(raw))
    again = await Supervisor().start(loaded(models_ws), "external").wait()
    assert again.outcome == "built"
    assert again.precision["cache"] == "miss" and again.precision["key"] != external.precision["key"]


def test_a_killed_conversions_temp_folder_is_removed_by_the_next_and_a_live_ones_is_left(
    quickstart_models: Path, tmp_path: Path
) -> None:
    """Each conversion has its own temp folder (`.<key>.tmp-<pid>-<id>`, so two of one key in one process never
    remove each other's model); one a SIGKILLed conversion left is removed by the next conversion of the key once its
    process is gone, and one of a live process is left alone. A real AutoCast conversion of the quickstart's model."""
    import shutil
    import subprocess
    import sys

    from trtls.builds.precision import (
        cache_key,
        conversion_settings,
        input_digest,
        modelopt_version,
        run_precision_step,
    )
    from trtls.core.cancel import CancelToken

    ws = tmp_path / "ws"
    (ws / "models").mkdir(parents=True)
    model = ws / "models" / "demo.onnx"
    shutil.copyfile(quickstart_models / "demo.onnx", model)
    spec = {"convert": "fp16"}
    cache_dir = ws / ".trtls" / "precision"
    cache_dir.mkdir(parents=True)
    key = cache_key(input_digest(model), conversion_settings(spec), modelopt_version())
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = cache_dir / f".{key}.tmp-{int(gone.stdout)}-0123456789ab"  # its process has ended
    live = cache_dir / f".{key}.tmp-{os.getpid()}-ba9876543210"  # this test's own process: alive
    other = cache_dir / f".{'0' * 64}.tmp-{int(gone.stdout)}-0123456789ab"  # another key's: not this conversion's
    for folder in (dead, live, other):
        folder.mkdir()
        (folder / "model.onnx").write_bytes(b"half-written")

    result = run_precision_step(model, spec, cache_dir, CancelToken())
    assert result.record["cache"] == "miss" and result.onnx.is_file()
    assert result.record["key"] == key
    assert not dead.exists(), "the killed conversion's temp folder was left"
    assert (live / "model.onnx").read_bytes() == b"half-written" and (other / "model.onnx").exists()
