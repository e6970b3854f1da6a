"""The quickstart's models build clean (issue 18). `demo`, the first thing a new user builds, is one compile
unit with no cut: TensorRT gives no warning at all. `large` is the Stop demo: its 56 value-dependent cuts are
what make it report progress through a half-minute build, and TensorRT-RTX 1.7 notes each cut tensor ("Was not
able to infer kOPT value(s) ... Using one(s).") — no cut without that note was found (make_models' docstring
lists what was tried). So `large` gives those notes and nothing else: no 'sign of a bug', no other warning."""

from __future__ import annotations

import re
from pathlib import Path

import onnx

from .helpers import run_build

WARNING = ("WARNING", "ERROR", "INTERNAL_ERROR")
CUT_NOTE = re.compile(r"^Was not able to infer kOPT value\(s\) for tensor (cast_\d+)\. Using one\(s\)\.$")


def _cut_tensors(model: onnx.ModelProto) -> set[str]:
    """The Cast outputs that feed a Reshape's target shape: the value-dependent cuts."""
    return {n.output[0] for n in model.graph.node if n.op_type == "Cast" and n.attribute[0].i == onnx.TensorProto.INT64}


async def _warnings_of_build(workspace: Path, engine: str) -> list[str]:
    logs: list[tuple[str, str]] = []
    _, build = await run_build(workspace, engine=engine)
    build.listeners.append(
        lambda b, ev: logs.append((ev.severity, ev.msg)) if ev is not None and ev.type == "log" else None
    )
    summary = await build.wait()
    assert summary["outcome"] == "built", summary.get("error")
    return [m for s, m in logs if s in WARNING]


async def test_demo_builds_with_no_tensorrt_warning(workspace: Path) -> None:
    model = onnx.load(str(workspace / "models" / "demo.onnx"))
    assert _cut_tensors(model) == set() and not [n for n in model.graph.node if n.op_type == "Reshape"]
    # before: 12 warnings "Was not able to infer kOPT value(s)" (and, before e8fe95c, 24 "sign of a bug")
    assert await _warnings_of_build(workspace, "demo") == []


async def test_large_builds_with_no_warning_but_its_cut_notes(workspace: Path) -> None:
    """A real `large` build (~35 s on 2 cores): built, and every warning is the note on one of its cuts."""
    model = onnx.load(str(workspace / "models" / "large.onnx"))
    cuts = _cut_tensors(model)
    assert len(cuts) == 56  # the Stop demo's progress: 56 compile units
    reshapes = [n for n in model.graph.node if n.op_type == "Reshape"]
    assert len(reshapes) == 56 and all({a.name: a.i for a in n.attribute}.get("allowzero") == 1 for n in reshapes)
    warnings = await _warnings_of_build(workspace, "large")
    assert not [m for m in warnings if "sign of a bug" in m]
    named = [CUT_NOTE.match(m).group(1) if CUT_NOTE.match(m) else m for m in warnings]
    assert set(named) <= cuts, set(named) - cuts  # nothing else: every warning is a cut's note
