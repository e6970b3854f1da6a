"""The decision rule cannot be fooled by absence: a check that measured nothing is `not_checked`, which holds the
route unless the recipe waives it by name with a reason; each report format shows it plainly."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from _route_helpers import checkpoint_files, load, make_folder, route_table, write_recipe

from trtls.core.gate_result import GateCheck, apply_waivers, decide
from trtls.gates import reports
from trtls.gates.run import junit_checks, run_gates, sarif_of


def _c(name: str, status: str) -> GateCheck:
    return GateCheck(5, name, status, f"{name} message", "TRT900")  # type: ignore[arg-type]


def test_not_checked_holds_and_only_a_named_waiver_with_a_reason_lifts_it() -> None:
    checks = [_c("release.latency", "pass"), _c("release.throughput", "not_checked")]
    assert decide(checks) == "hold"
    used = apply_waivers(checks, {"release.latency": "why not", "release.throughput": "batch job"})
    assert checks[1].waived == "batch job" and decide(checks) == "supported"
    # a waiver never turns a check that ran into anything else
    assert checks[0].waived is None and used["release.latency"]["not_applied"]
    assert used["release.throughput"]["applied_to"] == ["release.throughput"]


def test_a_hold_or_reject_cannot_be_waived() -> None:
    checks = [_c("release.canary", "hold")]
    apply_waivers(checks, {"release.canary": "trust me"})
    assert checks[0].waived is None and decide(checks) == "hold"
    checks = [_c("release.canary", "reject"), _c("release.memory", "not_checked")]
    apply_waivers(checks, {"release.memory": "x"})
    assert decide(checks) == "reject"


def test_not_checked_in_every_format() -> None:
    checks = [_c("release.throughput", "not_checked"), _c("release.latency", "pass")]
    # SARIF: a note, never an error or warning
    finding = checks[0].finding()
    assert finding is not None and finding.severity.value == "information"
    assert finding.message.startswith("not checked: ")
    sarif = reports.to_sarif([finding], lambda p: None, "trtls.toml", "0")
    assert sarif["runs"][0]["results"][0]["level"] == "note"
    # JUnit: skipped (not a failure, not a pass)
    xml = reports.to_junit(
        [{"suite": "gate5", "name": c.name, "status": c.status, "message": c.message} for c in checks]
    )
    root = ET.fromstring(xml)
    assert root.get("skipped") == "1" and root.get("failures") == "0"
    case = next(tc for tc in root.iter("testcase") if tc.get("name") == "release.throughput")
    assert case.find("skipped") is not None


def test_route_summary_records_waivers_and_hold_reasons(tmp_path) -> None:
    make_folder(tmp_path / "ck", checkpoint_files())
    extra = 'waive = { "gpu_name" = "sample: any GPU", "no_such_check" = "typo" }\n'
    loaded = load(write_recipe(tmp_path, route_table("ck", "c" * 40, extra=extra)))
    res = run_gates(loaded, "r", gates=[1, 2])
    gpu = next(c for c in res.checks if c.name == "gpu_name")
    assert gpu.status == "not_checked" and gpu.waived == "sample: any GPU"
    assert res.summary.waivers["gpu_name"]["applied_to"] == ["gpu_name"]
    assert res.summary.waivers["no_such_check"]["applied_to"] == []
    unwaived = next(c for c in res.checks if c.name == "cuda_driver")
    assert unwaived.status == "not_checked" and unwaived.waived is None
    assert res.decision == "hold" and any(r.startswith("cuda_driver: ") for r in res.summary.hold_reasons)
    saved = json.loads(res.summary_path.read_text())  # type: ignore[union-attr]
    entry = next(c for c in saved["gates"]["2"]["checks"] if c["name"] == "gpu_name")
    assert entry["status"] == "not_checked" and entry["waived"] == "sample: any GPU"
    junit = {c["name"]: c for c in junit_checks(res)}
    assert junit["gpu_name"]["status"] == "not_checked" and "waived: sample: any GPU" in junit["gpu_name"]["message"]
    levels = {r["ruleId"]: r["level"] for r in sarif_of(loaded, res)["runs"][0]["results"]}  # type: ignore[index]
    assert levels["TRT605"] == "note"


def test_a_waiver_without_a_reason_is_a_recipe_error(tmp_path) -> None:
    from trtls.core.recipe import load_recipe

    make_folder(tmp_path / "ck", checkpoint_files())
    loaded = load_recipe(write_recipe(tmp_path, route_table("ck", "c" * 40, extra='waive = { "gpu_name" = " " }\n')))
    assert any(f.code == "TRT102" and "needs a reason" in f.message for f in loaded.findings)
