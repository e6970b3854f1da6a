"""`trtls route promote|status|canary|rollback` on the route sample's ONNX Runtime route, taken to `supported` for
real (real exports, real ONNX Runtime runs, real gates); each test works on its own copy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _lifecycle_sample import ROUTE, copy, set_in_route, summary, trtls

from trtls.core.recipe import load_recipe
from trtls.core.route import route_model
from trtls.gates.lifecycle.ledger import read_ledger
from trtls.gates.lifecycle.promotion import promote
from trtls.gates.lifecycle.status import route_status
from trtls.gates.run import run_gates

ALICE = {"TRTLS_APPROVER": "alice"}


@pytest.fixture
def root(prepared, tmp_path) -> Path:
    return copy(prepared, tmp_path / "route")


def ledger_lines(root: Path) -> list[dict]:
    return [json.loads(line) for line in (root / "trtls.promotions.jsonl").read_text().splitlines()]


def test_promote_records_every_item_the_runbook_asks_for(root):
    r = trtls("route", "promote", ROUTE, "--format", "json", cwd=root, env=ALICE)
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout)
    rec = out["record"]
    s = summary(root)
    assert s["decision"] == "supported" and s["complete"] is True
    assert rec["bundle_digest"] == s["bundle_digest"] and rec["runtime_target"] == "onnxruntime"
    assert rec["approver"] == "alice" and rec["decision"] == "promote" and rec["canary"] == "not_started"
    assert rec["canary_plan"]["stages"] == [1.0, 10.0, 100.0]
    assert rec["rollback_artifact"]["path"] == "releases/tiny_ort-previous.bundle"
    assert (
        rec["rollback_artifact"]["digest"].startswith("sha256:")
        and rec["rollback_artifact"]["digest"] != rec["bundle_digest"]
    )
    import hashlib

    evidence = (root / ".trtls/routes" / ROUTE / "complete-summary.json").read_bytes()
    assert rec["evidence_digest"] == "sha256:" + hashlib.sha256(evidence).hexdigest()
    kept = root / ".trtls/routes" / ROUTE / "evidence" / (rec["evidence_digest"][7:] + ".json")
    assert kept.read_bytes() == evidence
    assert rec["rested_on"]["onnxruntime"]["value"] and rec["rested_on"]["bundle"]["value"] == rec["bundle_digest"]
    assert ledger_lines(root) == [rec] and rec["prev_sha256"] == "0" * 64
    st = trtls("route", "status", ROUTE, cwd=root)
    assert st.returncode == 0 and "valid: bundle" in st.stdout and "by alice" in st.stdout, st.stdout


def test_promotion_without_an_item_is_refused_naming_it(root):
    text = (root / "trtls.toml").read_text()
    line = next(x for x in text.splitlines() if x.startswith("canary_plan"))
    set_in_route(root, line + "\n", "")
    r = trtls("route", "promote", ROUTE, cwd=root)  # no approver in the environment, no canary plan
    assert r.returncode == 3, r.stdout + r.stderr
    assert "missing: approver" in r.stdout and "missing: canary plan" in r.stdout
    assert not (root / "trtls.promotions.jsonl").exists()


def test_promotion_of_a_held_or_stale_run_is_refused(root):
    # a threshold changed after the supported run: the verdict is not current
    set_in_route(
        root,
        "latency_p95_ms = 20.0, latency_p99_ms = 50.0, memory_mib = 1024, min_throughput_rps = 100, "
        "max_warmup_s = 30, max_build_s = 600, warmup",
        "latency_p95_ms = 30.0, latency_p99_ms = 50.0, "
        "memory_mib = 1024, min_throughput_rps = 100, max_warmup_s = 30, max_build_s = 600, warmup",
    )
    r = trtls("route", "promote", ROUTE, cwd=root, env=ALICE)
    assert r.returncode == 3 and "missing: current: thresholds.latency_p95_ms 20.0 → 30.0" in r.stdout, r.stdout
    # a partial run (--gate 1) does not replace the complete run promotion reads
    before = (root / ".trtls/routes" / ROUTE / "complete-summary.json").read_bytes()
    assert trtls("gates", "--route", ROUTE, "--gate", "1", cwd=root).returncode == 0
    assert (root / ".trtls/routes" / ROUTE / "complete-summary.json").read_bytes() == before


def test_drift_after_promotion_is_revalidate_named_and_said_by_the_next_gates_run(root):
    loaded = load_recipe(root / "trtls.toml")
    route = route_model(loaded, ROUTE)
    assert promote(loaded, ROUTE, route, approver="alice").ok
    from trtls.gates.environment_probe import discover_environment

    env = discover_environment()
    old = env["onnxruntime"]
    env["onnxruntime"] = "99.0.0"
    st = route_status(loaded, ROUTE, route, environment=env)
    assert st.state == "revalidate"
    assert any(r.startswith(f"onnxruntime {old} → 99.0.0 since promotion on ") for r in st.reasons), st.reasons
    # revalidate_on narrows what counts: onnxruntime not listed → still valid
    set_in_route(root, "canary_plan = {", 'revalidate_on = ["python", "thresholds"]\ncanary_plan = {')
    loaded = load_recipe(root / "trtls.toml")
    assert route_status(loaded, ROUTE, route_model(loaded, ROUTE), environment=env).state == "valid"
    # the next gates run (on another environment) says it, in its summary, text and SARIF
    result = run_gates(load_recipe(root / "trtls.toml"), ROUTE, environment=dict(env, python="3.99.0"))
    note = result.summary.promotion
    assert note is not None and note.state == "revalidate"
    assert any("Python" in r and "→ 3.99.0" in r for r in note.reasons)
    assert any(f.code == "TRT950" and f.path == ("routes", ROUTE) for f in result.findings)


def test_revalidate_after_days(root):
    import time

    set_in_route(root, "canary_plan = {", "revalidate_after_days = 30\ncanary_plan = {")
    loaded = load_recipe(root / "trtls.toml")
    route = route_model(loaded, ROUTE)
    assert promote(loaded, ROUTE, route, approver="alice").ok
    assert route_status(loaded, ROUTE, route, now=time.time() + 29 * 86400).state == "valid"
    late = route_status(loaded, ROUTE, route, now=time.time() + 31 * 86400)
    assert late.state == "revalidate" and "(revalidate_after_days = 30)" in late.reasons[-1]


def test_canary_lifecycle_failed_advises_rollback_and_rollback_moves_only_the_pointer(root):
    assert trtls("route", "promote", ROUTE, cwd=root, env=ALICE).returncode == 0
    r = trtls("route", "canary", ROUTE, "pass", "--figure", "p95_ms=3", cwd=root, env=ALICE)
    assert r.returncode == 3 and "needs it running" in r.stdout  # not_started → pass is not a step
    assert trtls("route", "canary", ROUTE, "start", cwd=root, env=ALICE).returncode == 0
    r = trtls("route", "canary", ROUTE, "fail", "--figure", "p95_ms=41.5", cwd=root, env=ALICE)
    assert r.returncode == 3 and "missing: figure: error_rate" in r.stdout  # the plan watches both
    r = trtls(
        "route", "canary", ROUTE, "fail", "--figure", "p95_ms=41.5", "--figure", "error_rate=0.02", cwd=root, env=ALICE
    )
    assert r.returncode == 0 and "trtls route rollback --route tiny_ort" in r.stdout
    st = trtls("route", "status", ROUTE, "--format", "json", cwd=root)
    assert st.returncode == 4
    shown = json.loads(st.stdout)["routes"][0]
    assert shown["state"] == "canary_failed" and shown["canary_figures"] == {"p95_ms": 41.5, "error_rate": 0.02}
    previous = ledger_lines(root)[0]["rollback_artifact"]["digest"]
    assert previous in shown["advice"][0]
    files = {p: p.read_bytes() for p in (root / "build").iterdir()} | {
        p: p.read_bytes() for p in (root / "releases").iterdir()
    }
    r = trtls("route", "rollback", ROUTE, "--reason", "canary failed", cwd=root, env={"TRTLS_APPROVER": "bob"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "your files are unchanged" in r.stdout and "releases/tiny_ort-previous.bundle" in r.stdout
    assert {p: p.read_bytes() for p in files} == files  # nothing the user owns was touched
    last = ledger_lines(root)[-1]
    assert last["event"] == "rollback" and last["bundle_digest"] == previous and last["approver"] == "bob"
    assert [x["event"] for x in ledger_lines(root)] == ["promote", "canary", "canary", "rollback"]


def test_a_tampered_ledger_is_detected_and_never_appended_to(root):
    assert trtls("route", "promote", ROUTE, cwd=root, env=ALICE).returncode == 0
    assert trtls("route", "canary", ROUTE, "start", cwd=root, env=ALICE).returncode == 0
    path = root / "trtls.promotions.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text(lines[0].replace('"approver":"alice"', '"approver":"mallory"') + lines[1])
    st = trtls("route", "status", ROUTE, cwd=root)
    assert st.returncode == 4 and "trtls.promotions.jsonl:1: the record was changed" in st.stdout, st.stdout
    before = path.read_bytes()
    r = trtls("route", "canary", ROUTE, "pass", "--figure", "p95_ms=1", "--figure", "error_rate=0", cwd=root, env=ALICE)
    assert r.returncode == 4 and path.read_bytes() == before
    # a removed line breaks the chain at the record after it
    path.write_text(lines[1])
    assert "the chain is broken" in (read_ledger(root).problem or "")


def test_the_editor_shows_the_promoted_state_as_a_code_lens_and_drift_as_a_located_diagnostic(root):
    from trtls.gates.lifecycle.notes import promotion_findings
    from trtls.lsp.editor import code_lenses

    loaded = load_recipe(root / "trtls.toml")
    assert promotion_findings(loaded) == []  # never promoted: nothing to say
    titles = [lens.command.title for lens in code_lenses(loaded, "file:///x", {}, {}) if lens.command]
    assert any(t.startswith("last gates: supported · ") for t in titles), titles  # the last decision, promoted or not
    assert promote(loaded, ROUTE, route_model(loaded, ROUTE), approver="alice").ok
    assert promotion_findings(loaded) == []  # the server's check, in a thread, judges and keeps the lens title
    titles = [lens.command.title for lens in code_lenses(loaded, "file:///x", {}, {}) if lens.command]
    assert any(t.startswith("promoted ") and "by alice · valid · canary not_started" in t for t in titles), titles
    set_in_route(root, "tolerances = { logits = { atol = 1e-4,", "tolerances = { logits = { atol = 1e-3,")
    loaded = load_recipe(root / "trtls.toml")
    (finding,) = promotion_findings(loaded)
    assert finding.code == "TRT950" and finding.path == ("routes", ROUTE)
    assert "tolerances.logits.atol 0.0001 → 0.001 since promotion on" in finding.message
    rng = loaded.source_map.range(finding.path, finding.on_value)
    assert (root / "trtls.toml").read_text().splitlines()[rng.start_line].startswith(f"[routes.{ROUTE}]")
    titles = [lens.command.title for lens in code_lenses(loaded, "file:///x", {}, {}) if lens.command]
    assert any("· revalidate ·" in t for t in titles), titles
