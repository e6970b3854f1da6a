"""The quickstart's models build without TensorRT calling them buggy (issue 18): the cut reshapes say
allowzero=1, so the only warning left is the one TensorRT gives for each deliberate value-dependent cut (it
cannot know a shape computed from values ahead of time; that cut is what makes `large` report progress)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import onnx

from .helpers import run_build

CUT_NOTE = re.compile(r"^Was not able to infer kOPT value\(s\) for tensor (cast_\d+)\. Using one\(s\)\.$")


def _cut_tensors(model: onnx.ModelProto) -> set[str]:
    """The Cast outputs that feed a Reshape's target shape: the value-dependent cuts."""
    return {n.output[0] for n in model.graph.node if n.op_type == "Cast" and n.attribute[0].i == onnx.TensorProto.INT64}


async def test_demo_builds_with_no_warning_but_the_cut_notes(workspace: Path) -> None:
    logs: list[tuple[str, str]] = []
    _, build = await run_build(workspace)
    build.listeners.append(
        lambda b, ev: logs.append((ev.severity, ev.msg)) if ev is not None and ev.type == "log" else None
    )
    summary = await build.wait()
    assert summary["outcome"] == "built", summary.get("error")
    warnings = [m for s, m in logs if s in ("WARNING", "ERROR", "INTERNAL_ERROR")]
    assert not [m for m in warnings if "sign of a bug" in m]  # the 24 warnings of issue 18
    cuts = _cut_tensors(onnx.load(str(workspace / "models" / "demo.onnx")))
    assert len(cuts) == 6
    named = {CUT_NOTE.match(m).group(1) if CUT_NOTE.match(m) else m for m in warnings}
    assert named <= cuts, named - cuts  # nothing else: every warning is a cut's note


def test_large_keeps_its_cuts_and_parses_without_a_warning(quickstart_models: Path) -> None:
    """`large` is the Stop demo (~35 s on 2 cores), so it is not built here: it keeps its 56 cuts, each reshape
    says allowzero=1 as demo's do (demo's build above shows that is what silences TensorRT; the warnings came at
    build time, 4 per cut), and it parses with no warning."""
    import tensorrt_rtx as trt

    model = onnx.load(str(quickstart_models / "large.onnx"))
    assert len(_cut_tensors(model)) == 56
    reshapes = [n for n in model.graph.node if n.op_type == "Reshape"]
    assert len(reshapes) == 56
    assert all({a.name: a.i for a in n.attribute}.get("allowzero") == 1 for n in reshapes)  # what silenced demo
    warnings: list[str] = []

    class Logger(trt.ILogger):
        def __init__(self) -> None:
            trt.ILogger.__init__(self)

        def log(self, severity, msg):  # type: ignore[no-untyped-def]
            if severity <= trt.ILogger.Severity.WARNING:
                warnings.append(msg)

    logger = Logger()
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    assert parser.parse_from_file(str(quickstart_models / "large.onnx")), sys.stderr
    assert warnings == []
