"""`trtls trace` and `trtls report` on real builds and a real gates run, checked in a real headless Chromium.

One workspace, three real TensorRT-RTX builds of the quickstart `demo`: two that finish (so history has
two dated points and usual durations) and one cancelled in the middle (so the trace and the report have
a cancel's request / seen / return / cleanup)."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.builds.helpers import cancel_at_phase, run_build
from tests.conftest import QUICKSTART

from .browser import drawn_fraction, dump_dom, screenshot


def trtls(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trtls.cli.main", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory, quickstart_models) -> dict:
    ws = tmp_path_factory.mktemp("pictures") / "ws"
    shutil.copytree(QUICKSTART, ws, ignore=shutil.ignore_patterns(".trtls", "build"))

    async def three_builds() -> dict:
        ids = {}
        for name in ("first", "second"):
            _, build = await run_build(ws)
            assert (await build.wait()).outcome == "built"
            ids[name] = build.id
        _, build = await run_build(ws)
        cancel_at_phase(build, 6, lambda b: b.cancel("api"))  # mid-build: demo has 12 phases
        summary = await build.wait()
        assert summary.outcome == "cancelled", summary.outcome
        ids["cancelled"] = build.id
        return ids

    ids = asyncio.run(three_builds())
    return {"ws": ws, **ids}


def test_trace_is_a_chrome_trace_of_the_build(runs) -> None:
    ws = runs["ws"]
    r = trtls("trace", runs["cancelled"], "-o", "-", cwd=ws)
    assert r.returncode == 0, r.stderr
    trace = json.loads(r.stdout)
    events = trace["traceEvents"]
    for e in events:  # the Trace Event Format's required fields per phase type
        assert e["ph"] in ("X", "i", "C", "M") and e["pid"] == 1
        if e["ph"] in ("X", "i", "C"):
            assert isinstance(e["ts"], float | int) and e["ts"] >= 0
        if e["ph"] == "X":
            assert e["dur"] >= 0 and "tid" in e
    phases = [e for e in events if e["ph"] == "X" and e["cat"] == "phase"]
    tree = {p["id"]: p for p in json.loads((ws / ".trtls" / "runs" / runs["cancelled"] / "tree.json").read_text())}
    assert {p["args"]["phase_id"] for p in phases} == set(tree), "every phase of the build is a slice"
    by_id = {p["args"]["phase_id"]: p for p in phases}
    for pid, p in by_id.items():  # nested slices: a child lies inside its parent on the same track
        parent = tree[pid]["parentId"]
        if parent:
            q = by_id[parent]
            assert q["ts"] <= p["ts"] and p["ts"] + p["dur"] <= q["ts"] + q["dur"] + 1, (pid, parent)
    assert {p["args"]["status"] for p in phases} >= {"done", "cancelled"}
    cancel = [e for e in events if e["ph"] == "i" and e["cat"] == "cancel"]
    names = [e["name"] for e in cancel]
    assert names[0] == "cancel requested" and "builder returned" in names and names[-1] == "cleanup done", names
    assert [e["ts"] for e in cancel] == sorted(e["ts"] for e in cancel)
    assert any(e["ph"] == "C" for e in events), "steps as counters"
    for gap in (e for e in events if e["ph"] == "X" and e["cat"] == "quiet"):
        assert gap["dur"] >= 0.25e6 and gap["name"].startswith("quiet ")
    assert trace["otherData"]["cancelSource"] == "api"
    # default output: trace.json in the run folder
    r = trtls("trace", "latest", cwd=ws)
    assert r.returncode == 0 and (ws / ".trtls" / "runs" / runs["cancelled"] / "trace.json").is_file()


def test_build_report_in_chromium(runs, tmp_path: Path) -> None:
    ws = runs["ws"]
    page = tmp_path / "built.html"
    r = trtls("report", runs["second"], "-o", str(page), cwd=ws)
    assert r.returncode == 0, r.stderr
    text = page.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text), "the page loads nothing from the network"
    assert "default-src 'none'" in text
    dom = dump_dom(page)
    tree = json.loads((ws / ".trtls" / "runs" / runs["second"] / "tree.json").read_text())
    bars = re.findall(r'class="phase-bar" data-phase-id="([\d.]+)"', dom)
    assert bars and set(bars) <= {p["id"] for p in tree} and "0" in bars
    assert len(re.findall(r'class="usual-mark"', dom)) >= 1, "the second build shows each phase's usual duration"
    assert len(re.findall(r'class="history-point"', dom)) == 2, "two dated builds of this configuration"
    assert 'id="cancel"' in dom and "was not cancelled" in dom
    assert re.search(r'<tr class="artifact"><td>engine</td><td>written</td>', dom)
    assert re.search(r"\d+\.\d MiB", dom) and "bytes" not in dom
    shot = screenshot(page, tmp_path / "built.png")
    drawn, colours = drawn_fraction(shot)
    assert drawn > 0.02 and colours > 8, (drawn, colours)


def test_cancelled_build_report_shows_the_cancel(runs, tmp_path: Path) -> None:
    page = tmp_path / "cancelled.html"
    assert trtls("report", runs["cancelled"], "-o", str(page), cwd=runs["ws"]).returncode == 0
    dom = dump_dom(page)
    marks = re.findall(r'class="cancel-mark" data-mark="(\w+)"', dom)
    assert {"request", "return", "cleanup"} <= set(marks), marks
    assert 'class="cancel-leg"' in dom and "source" in dom and ">api<" in dom
    assert 'data-status="cancelled"' in dom


def test_route_report_in_chromium(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "gates"))
    from _route_helpers import checkpoint_files, load, make_folder, route_table, write_recipe

    from trtls.gates.run import run_gates

    make_folder(tmp_path / "ck", checkpoint_files())
    loaded = load(write_recipe(tmp_path, route_table("ck", "c" * 40)))
    run_gates(loaded, "r")
    summary = json.loads((tmp_path / ".trtls" / "routes" / "r" / "summary.json").read_text())
    r = trtls("report", "--route", "r", "--recipe", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    page = tmp_path / ".trtls" / "routes" / "r" / "report.html"
    dom = dump_dom(page)
    for gate in "12345":
        status = summary["gates"][gate]["status"]
        assert re.search(rf'<section class="gate" id="gate-{gate}" data-status="{status}"', dom), gate
    checks = sum(len(g["checks"]) for g in summary["gates"].values())
    assert len(re.findall(r'<tr class="check"', dom)) == checks
    assert summary["decision"] in dom
    drawn, colours = drawn_fraction(screenshot(page, tmp_path / "route.png"))
    assert drawn > 0.02 and colours > 8, (drawn, colours)


def test_bad_targets_exit_2_with_the_path(tmp_path: Path) -> None:
    r = trtls("report", "nope", "--recipe", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 2 and "no such finished build" in r.stderr and "Traceback" not in r.stderr
    r = trtls("trace", "latest", "--recipe", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 2 and ".trtls/runs" in r.stderr
    r = trtls("report", "--route", "r", "--recipe", str(tmp_path), cwd=tmp_path)
    assert r.returncode == 2 and "no gates run recorded" in r.stderr


def test_a_route_report_takes_the_one_route_dialect(tmp_path: Path) -> None:
    """`trtls report [RECIPE] --route NAME`, as every route command takes it (issue 29: report alone took
    `--route NAME --recipe R`). The word is the recipe (a build id would say "no such finished build"); the old form
    still works, with a note naming the new one; a recipe given twice is refused."""
    r = trtls("report", str(tmp_path), "--route", "r", cwd=tmp_path.parent)
    assert r.returncode == 2 and "no gates run recorded" in r.stderr and "deprecated" not in r.stderr, r.stderr
    r = trtls("report", "--route", "r", "--recipe", str(tmp_path), cwd=tmp_path.parent)
    assert r.returncode == 2 and "no gates run recorded" in r.stderr
    assert f"is deprecated; write `trtls report {tmp_path} --route r`" in r.stderr, r.stderr
    r = trtls("report", str(tmp_path), "--route", "r", "--recipe", str(tmp_path), cwd=tmp_path.parent)
    assert r.returncode == 2 and "two recipes given" in r.stderr, r.stderr
