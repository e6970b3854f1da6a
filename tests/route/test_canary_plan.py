"""The canary is checked against a machine-readable plan (issue 29, item 4): `abort_if` is read into rules (metric,
comparison, threshold, unit), a `pass` whose figures break one is refused naming the rule, a figure the plan needs is
required, and the gates summary's `canary_status` is the ledger's. On the route sample's ONNX Runtime route taken to
`supported` for real; each test on its own copy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _lifecycle_sample import ROUTE, copy, set_in_route, trtls

from trtls.core.recipe import load_recipe
from trtls.core.route import route_model
from trtls.core.route_lifecycle import parse_abort_if
from trtls.gates.run import run_gates

ALICE = {"TRTLS_APPROVER": "alice"}
SAMPLE_PLAN = 'abort_if = "error rate > 0.1 % or p95 > 20 ms"'


@pytest.fixture
def root(prepared, tmp_path) -> Path:
    return copy(prepared, tmp_path / "route")


def test_the_sample_plan_and_the_usual_forms_are_read_into_rules():
    rules = [r.model_dump() for r in parse_abort_if("error rate > 0.1 % or p95 > 20 ms")]
    assert rules == [
        {"metric": "error_rate", "comparison": ">", "threshold": 0.1, "unit": "%"},
        {"metric": "p95_ms", "comparison": ">", "threshold": 20.0, "unit": "ms"},
    ]
    assert [r.text() for r in parse_abort_if("error_rate > 0.1%; p95_ms >= 50")] == [
        "error_rate > 0.1 %",
        "p95_ms >= 50 ms",
    ]


def test_an_abort_if_that_cannot_be_read_is_a_located_error(root):
    set_in_route(root, SAMPLE_PLAN, 'abort_if = "error rate > 0.1 % or p95 about 20 ms"')
    loaded = load_recipe(root / "trtls.toml")
    (finding,) = [f for f in loaded.findings if "abort_if" in f.path]
    assert finding.path[-2:] == ("canary_plan", "abort_if") and "cannot read 'p95 about 20 ms'" in finding.message
    assert "character 23 of" in finding.message
    line = (root / "trtls.toml").read_text().splitlines()[loaded.source_map.range(finding.path, True).start_line]
    assert line.startswith("canary_plan"), line
    r = trtls("route", "status", "--route", ROUTE, cwd=root)
    assert r.returncode == 2 and "abort_if" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_pass_whose_figures_break_the_plan_is_refused_naming_the_rule(root):
    set_in_route(root, SAMPLE_PLAN, 'abort_if = "error_rate > 0.1% or p95_ms > 50"')
    assert trtls("route", "promote", "--route", ROUTE, cwd=root, env=ALICE).returncode == 0
    rec = json.loads((root / "trtls.promotions.jsonl").read_text().splitlines()[0])
    assert rec["canary_plan"]["abort_if"][1] == {"metric": "p95_ms", "comparison": ">", "threshold": 50.0, "unit": "ms"}
    assert trtls("route", "canary", "--route", ROUTE, "start", cwd=root, env=ALICE).returncode == 0
    before = (root / "trtls.promotions.jsonl").read_bytes()
    r = trtls(
        "route", "canary", "--route", ROUTE, "pass", "--figure", "error_rate=0.5", "--figure", "p95_ms=80",
        cwd=root, env=ALICE,
    )  # fmt: skip
    assert r.returncode == 3, r.stdout + r.stderr
    assert (
        "error_rate = 0.5 % breaks `error_rate > 0.1 %`" in r.stdout
        and "p95_ms = 80 ms breaks `p95_ms > 50 ms`" in r.stdout
    )
    assert (root / "trtls.promotions.jsonl").read_bytes() == before  # nothing recorded
    # a figure a rule reads but not given: refused (p95_ms is watched too; error_rate only by the rule here)
    set_in_route(root, 'watch = ["p95_ms", "error_rate"]', 'watch = ["p95_ms"]')
    r = trtls("route", "canary", "--route", ROUTE, "pass", "--figure", "p95_ms=12", cwd=root, env=ALICE)
    assert r.returncode == 3 and "missing: figure: error_rate" in r.stdout, r.stdout
    # within the plan (with units: 0.05 % and 0.03 s = 30 ms): recorded, with each rule's judgement
    r = trtls(
        "route", "canary", "--route", ROUTE, "pass", "--figure", "error_rate=0.05%", "--figure", "p95_ms=0.03s",
        cwd=root, env=ALICE,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    last = json.loads((root / "trtls.promotions.jsonl").read_text().splitlines()[-1])
    assert [j["broken"] for j in last["abort_rules"]] == [False, False]


def test_the_summary_canary_status_is_the_ledger_s(root):
    loaded = load_recipe(root / "trtls.toml")
    summary = json.loads((root / ".trtls" / "routes" / ROUTE / "summary.json").read_text())
    assert summary["canary_status"] == "not_started" and summary["canary_inputs_status"] == "pass"
    assert trtls("route", "promote", "--route", ROUTE, cwd=root, env=ALICE).returncode == 0
    assert trtls("route", "canary", "--route", ROUTE, "start", cwd=root, env=ALICE).returncode == 0
    result = run_gates(loaded, ROUTE, gates=[1], write_evidence=False)
    assert result.summary.canary_status == "running"
    r = trtls(
        "route", "canary", "--route", ROUTE, "fail", "--figure", "error_rate=3", "--figure", "p95_ms=9", cwd=root,
        env=ALICE,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    result = run_gates(load_recipe(root / "trtls.toml"), ROUTE, gates=[1], write_evidence=False)
    st = json.loads(trtls("route", "status", "--route", ROUTE, "--format", "json", cwd=root).stdout)["routes"][0]
    assert result.summary.canary_status == st["canary"] == "failed"
    assert route_model(loaded, ROUTE).canary_plan is not None


def test_a_figure_given_twice_is_refused_not_the_last_one_taken(root):
    """`--figure p95_ms=30 --figure p95_ms=10`: the first value breaks `p95 > 20 ms`, and the pass was recorded on the
    second alone (the last won, silently). Two values of one figure are bad input now (exit 2, both named), nothing
    recorded."""
    assert trtls("route", "promote", "--route", ROUTE, cwd=root, env=ALICE).returncode == 0
    assert trtls("route", "canary", "--route", ROUTE, "start", cwd=root, env=ALICE).returncode == 0
    before = (root / "trtls.promotions.jsonl").read_bytes()
    r = trtls(
        "route", "canary", "--route", ROUTE, "pass", "--figure", "p95_ms=30", "--figure", "error_rate=0%",
        "--figure", "p95_ms=10", cwd=root, env=ALICE,
    )  # fmt: skip
    assert r.returncode == 2, r.stdout + r.stderr
    assert "'p95_ms' is given twice ('30' and '10')" in r.stderr, r.stderr
    assert (root / "trtls.promotions.jsonl").read_bytes() == before  # nothing recorded


def test_a_negative_rate_or_time_is_no_figure_a_pass_rests_on(root):
    """`--figure p95_ms=-1 --figure error_rate=-5%` broke no `>` rule and was recorded as a pass: a rate or a latency
    is never below 0. Each is read as a figure that cannot be judged, so the pass is refused (exit 3), nothing
    recorded; the rules' units make a bare `-1` a time here."""
    assert trtls("route", "promote", "--route", ROUTE, cwd=root, env=ALICE).returncode == 0
    assert trtls("route", "canary", "--route", ROUTE, "start", cwd=root, env=ALICE).returncode == 0
    before = (root / "trtls.promotions.jsonl").read_bytes()
    r = trtls(
        "route", "canary", "--route", ROUTE, "pass", "--figure", "p95_ms=-1", "--figure", "error_rate=-5%",
        cwd=root, env=ALICE,
    )  # fmt: skip
    assert r.returncode == 3, r.stdout + r.stderr
    assert "is negative: a rate or a time is never below 0" in r.stdout, r.stdout
    assert (root / "trtls.promotions.jsonl").read_bytes() == before  # nothing recorded
