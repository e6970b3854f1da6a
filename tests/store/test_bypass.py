"""`trtls accept` measures real builds: its scenarios start builds on the supervisor, never through the store, and
its report says so — from the scenarios' own records (a reused record in a scenario is named and fails the run).

Before: the report's `engineStore` was a constant, and the test asserted the constant."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.store.conftest import copy_store
from tests.store.helpers import run_build, summaries, with_store
from trtls.accept.criteria import Observation
from trtls.accept.report import build_report, to_text

ACCEPT = Path(__file__).resolve().parents[2] / "server" / "trtls" / "accept"
META = {"recipe": "trtls.toml", "engine": "demo"}


def test_accept_report_says_what_the_records_show_of_the_store(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    built = seeded[1]  # a real `trtls build`: it looked the store up, missed, and built with a worker
    with_store(seed_ws, copy_store(seeded, tmp_path))
    assert run_build(seed_ws).returncode == 0
    reused = summaries(seed_ws)[-1]
    assert reused["outcome"] == "reused" and built["outcome"] == "built" and built["workerPid"]

    measured = build_report([Observation("ctrl_c", summary=built)], {}, META)
    assert measured["engineStore"] == (
        "bypassed: none of the 1 build records is an engine from the store; 1 looked it up first and built"
    )
    assert to_text(measured).splitlines()[1] == f"engine store: {measured['engineStore']}"

    served = build_report([Observation("ctrl_c", summary=built), Observation("ide_stop", summary=reused)], {}, META)
    assert served["engineStore"] == "NOT bypassed: an engine from the store in ide_stop (reused)"
    assert served["passed"] is False  # an engine from the store measures no build
    retried = build_report([Observation("ctrl_c", summary=built, retry={"summary": reused})], {}, META)
    assert retried["engineStore"].startswith("NOT bypassed") and retried["passed"] is False

    nothing = build_report([], {}, META)
    assert nothing["engineStore"] == "not measured: no scenario left a build record"


def test_no_acceptance_module_goes_through_the_store() -> None:
    """What the report claims, checked on the code: nothing under trtls.accept imports the avoidance or the store."""
    imported = set()
    for path in ACCEPT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported.update(a.name for a in node.names)
    assert not {m for m in imported if m.startswith(("trtls.store", "trtls.builds.avoidance.lookup"))}
