"""Capability in `trtls report`: what TensorRT-RTX's parser said of the engine's model, as the build's own parse
recorded it in its evidence (`summary.json`'s `capability`, core.capability.build_capability), on real builds: the
quickstart's `demo` (the parser takes every node), a model with an op no importer knows (the parser refuses that node,
in its own words), and evidence written before capability was recorded (`not_checked`). The report process never
imports TensorRT."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import onnx
from onnx import TensorProto, helper

from tests.onnx_files.third_party import fetch_all
from tests.store.helpers import probe_env, probes, summaries
from trtls.core.capability import capability_findings, capability_summary
from trtls.core.recipe import load_recipe


def trtls(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trtls", *args], cwd=cwd, capture_output=True, text=True, timeout=600, env=env
    )


def capability_html(page: str) -> str:
    m = re.search(r'<div id="capability".*?</div>', page, re.DOTALL)
    assert m is not None, page[:2000]
    return m.group(0)


def test_the_report_shows_what_the_parser_said_as_the_build_recorded_it(workspace: Path, tmp_path: Path) -> None:
    # an op no ONNX importer knows: TensorRT-RTX's parser refuses that node with its own reason
    node = helper.make_node("NoSuchOp", ["input"], ["output"], name="mystery", domain="com.example")
    graph = helper.make_graph(
        [node],
        "unknown",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    onnx.save(model, str(workspace / "models" / "unknown.onnx"))
    recipe = workspace / "trtls.toml"
    engine = '\n[engines.unknown]\nonnx = "models/unknown.onnx"\noutput = "build/u.engine"\n'
    recipe.write_text(recipe.read_text() + engine)

    assert trtls("build", str(workspace), "--engine", "demo", "--no-store", cwd=workspace).returncode == 0
    refused = trtls("build", str(workspace), "--engine", "unknown", "--no-store", cwd=workspace)
    assert refused.returncode != 0
    by_engine = {s["engine"]: s for s in summaries(workspace)}
    assert by_engine["demo"]["capability"]["status"] == "supported"
    [refusal] = by_engine["unknown"]["capability"]["parser"]["nodes"]
    assert refusal["index"] == 0 and refusal["name"] == "mystery" and refusal["op"] == "NoSuchOp" and refusal["reason"]
    # sent by the worker as data (build_finished.capability), not read back from its error's text: the parser's own
    # record, with where in the parser it refused the node, which the error's text never carried
    finished = _finished_event(workspace, by_engine["unknown"]["buildId"])
    assert finished["capability"]["parser"]["nodes"] == [refusal] and refusal["where"]
    assert refusal["where"] not in (by_engine["unknown"]["error"] or "")
    demo_nodes = len(onnx.load(str(workspace / "models" / "demo.onnx")).graph.node)
    assert by_engine["demo"]["capability"]["parser"]["subgraphs"] == [{"supported": True, "count": demo_nodes}]

    probe = tmp_path / "probe"
    pages = {}
    for engine, s in by_engine.items():
        page = tmp_path / f"{engine}.html"
        r = trtls("report", s["buildId"], "-o", str(page), "--recipe", str(workspace), cwd=workspace,
                  env=probe_env(probe))  # fmt: skip
        assert r.returncode == 0, r.stderr
        pages[engine] = capability_html(page.read_text())
    assert probes(probe, "tensorrt") == []  # the report read the evidence; it asked TensorRT nothing

    assert 'data-status="supported"' in pages["demo"] and "the parser takes every node" in pages["demo"]
    assert 'data-status="refused"' in pages["unknown"] and "the parser refuses 1 node" in pages["unknown"]
    assert "does not support node 0 &#x27;mystery&#x27; (NoSuchOp): " in pages["unknown"]
    assert refusal["reason"] in html.unescape(pages["unknown"])  # the parser's words, as it said them

    # evidence written before trtls recorded capability: said as not checked, never computed here
    summary_path = workspace / ".trtls" / "runs" / by_engine["demo"]["buildId"] / "summary.json"
    old = json.loads(summary_path.read_text())
    del old["capability"]
    summary_path.write_text(json.dumps(old))
    page = tmp_path / "old.html"
    assert trtls("report", old["buildId"], "-o", str(page), "--recipe", str(workspace), cwd=workspace).returncode == 0
    section = capability_html(page.read_text())
    assert 'data-status="not_checked"' in section and "capability not checked: this build" in section

    # a parse refusal recorded before the worker sent it as data: only its error's text, read back into nodes
    summary_path = workspace / ".trtls" / "runs" / by_engine["unknown"]["buildId"] / "summary.json"
    old = json.loads(summary_path.read_text())
    del old["capability"]
    summary_path.write_text(json.dumps(old))
    page = tmp_path / "old-refused.html"
    assert trtls("report", old["buildId"], "-o", str(page), "--recipe", str(workspace), cwd=workspace).returncode == 0
    section = capability_html(page.read_text())
    assert 'data-status="refused"' in section and "does not support node 0 &#x27;mystery&#x27; (NoSuchOp): " in section


def _finished_event(ws: Path, build_id: str) -> dict:
    lines = (ws / ".trtls" / "runs" / build_id / "events.jsonl").read_text().splitlines()
    [finished] = [e for e in map(json.loads, lines) if e.get("type") == "build_finished"]
    return finished


VAD_ENGINE = """
[engines.vad]
onnx = "models/vad.onnx"
output = "build/vad.engine"

[[engines.vad.profiles]]
inputs.input = { min = [1, 512], opt = [1, 512], max = [4, 512] }
inputs.state = { min = [2, 1, 128], opt = [2, 1, 128], max = [2, 4, 128] }
"""


def test_a_build_the_builder_refuses_after_a_whole_parse_records_the_builders_answer(
    workspace: Path, tmp_path: Path
) -> None:
    # silero-vad's If-based export: the parser takes all 121 nodes, the build fails with an internal error; the worker
    # then asks the builder's own query of its own network and config (no second parse) and records its refusal
    shutil.copyfile(fetch_all()["silero_vad_if"], workspace / "models" / "vad.onnx")
    recipe = workspace / "trtls.toml"
    recipe.write_text(recipe.read_text() + VAD_ENGINE)
    failed = trtls("build", str(workspace), "--engine", "vad", "--no-store", cwd=workspace)
    assert failed.returncode != 0
    [summary] = summaries(workspace)
    capability = summary["capability"]
    assert capability["status"] == "refused", capability
    assert capability["parser"]["supported"] is True and capability["parser"]["subgraphs"] == [
        {"supported": True, "count": 121}
    ]
    builder = capability["builder"]
    assert builder["status"] == "refused" and "graphScope" in builder["reason"] and builder["asked"]
    assert builder["reason"] in summary["error"]  # the same internal error the build ended on, in TensorRT's words
    # the build's own log is the build's: the builder's second answer is kept in the capability, not logged again
    logged = [e for e in summary["logs"] if "graphScope" in str(e)]
    assert len(logged) == 1, logged

    page = tmp_path / "vad.html"
    reported = trtls("report", summary["buildId"], "-o", str(page), "--recipe", str(workspace), cwd=workspace)
    assert reported.returncode == 0, reported.stderr
    section = html.unescape(capability_html(page.read_text()))
    assert 'data-status="refused"' in section and "the builder refuses the network" in section
    assert "refuses the network although its parser takes every node" in section and builder["reason"] in section

    # the same words as the as-you-type answer (the capability child, asked before any build: `trtls check
    # --capability` and the editor's diagnostics): one function computes them from either answer
    check = subprocess.run(
        [sys.executable, "-m", "trtls", "check", str(workspace), "--capability", "--format", "json"],
        capture_output=True,
        text=True,
    )
    before = [(f["code"], f["message"]) for f in json.loads(check.stdout)["findings"] if f["path"][1] == "vad"]
    assert before == [(f.code, f.message) for f in capability_findings("vad", capability)]

    # and over the engine in the editor after the build: a lens in the report's words
    from trtls.lsp.editor import code_lenses

    lenses = code_lenses(load_recipe(recipe), "file:///x", {}, {"vad": summary["buildId"]})
    titles = [lens.command.title for lens in lenses if lens.command and lens.command.command == ""]
    assert titles == [f"capability · {capability_summary(capability)}"]
    assert titles[0].endswith(": the builder refuses the network"), titles


def test_a_build_stopped_after_its_parse_records_the_parsers_answer_and_never_asks_the_builder(
    workspace: Path, tmp_path: Path
) -> None:
    # held after the parse (TRTLS_TEST_PAUSE before TensorRT builds), then stopped with Ctrl-C: the parser's answer is
    # sent all the same, and the builder's query is not asked, so nothing delays the stop
    from tests.builds.cli_procs import CliBuild, pause_env, wait_for_bound, wait_for_file

    pause = tmp_path / "pause"
    cli = CliBuild(workspace, "demo", "--no-store", env=pause_env(pause, "before_build"))
    build_id = wait_for_file(pause, ".before_build").name.removesuffix(".before_build")
    wait_for_bound(workspace, "demo", build_id)  # the checked job may reach the worker before the build is bound
    cli.interrupt()
    assert cli.finish() != 0
    summary = json.loads((workspace / ".trtls" / "runs" / build_id / "summary.json").read_text())
    assert summary["outcome"] == "cancelled"
    capability = summary["capability"]
    demo_nodes = len(onnx.load(str(workspace / "models" / "demo.onnx")).graph.node)
    assert capability["status"] == "parsed" and capability["parser"]["subgraphs"] == [
        {"supported": True, "count": demo_nodes}
    ]
    assert capability["builder"]["status"] == "not_asked" and "stopped" in capability["builder"]["reason"]
    assert "builder" not in (_finished_event(workspace, build_id)["capability"] or {})
