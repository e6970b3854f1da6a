"""`trtls accept` with real builds of the quickstart `demo` engine.

One run of the fast subset must pass every criterion it measures, with criterion 6 waived: no runtime here
can load an engine, so a retried engine's validation is not_checked (never a pass). Then each scenario
family is broken on purpose,
either for real (a fault that skips cleanup, a lock someone holds, a process left running, a cache
rewritten behind trtls' back) or by taking an observation a real run made and removing what the
criterion checks, and the criterion must fail for that reason.
"""

from __future__ import annotations

import copy
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from trtls.accept import artifact_scenarios, runner
from trtls.accept import criteria as C
from trtls.accept.faults import mount_namespace_works
from trtls.accept.report import build_report, junit, percentile, stats, to_text
from trtls.accept.scenarios import BY_NAME, GROUPS, SCENARIOS, reliability_table, select
from trtls.builds.artifacts import engine_temp_path
from trtls.builds.timing_cache import identity_path, save_merged
from trtls.cli.accept import prune_folders, run_accept
from trtls.core.evidence import SEED_FIELDS

ROOT = Path(__file__).resolve().parents[2]
WAIVE = ["6"]  # nothing here can load an engine: a retry's validation cannot be measured


@pytest.fixture(scope="module")
def fast_run(tmp_path_factory: pytest.TempPathFactory, quickstart_models: Path):
    src = tmp_path_factory.mktemp("accept-src") / "quickstart"
    shutil.copytree(quickstart_models.parent, src, ignore=shutil.ignore_patterns(".trtls", "build"))
    before = sorted(p.name for p in src.rglob("*"))
    report, observations = run_accept(
        src / "trtls.toml",
        "demo",
        "fast",
        scratch=tmp_path_factory.mktemp("accept-scratch"),
        log=lambda m: None,
        waivers=WAIVE,
    )
    assert sorted(p.name for p in src.rglob("*")) == before, "the user's folder is never written"
    return report, {o.scenario: o for o in observations}


def verdict(obs: C.Observation, num: str) -> C.Verdict:
    return {n: v for n, _, v in C.judge(obs)}[num]


def test_fast_subset_passes_every_criterion(fast_run) -> None:
    report, obs = fast_run
    failing = [
        (s["scenario"], r["criterion"], r["status"], r["message"])
        for s in report["scenarios"]
        for r in s["criteria"]
        if r["status"] not in ("pass", "n/a") and not r["waived"]
    ]
    assert failing == [] and report["passed"] and report["keptFolders"] == {} and report["scratch"] is None
    assert [s["scenario"] for s in report["scenarios"]] == GROUPS["fast"]
    by = {s["scenario"]: s for s in report["scenarios"]}
    assert by["ctrl_c"]["cancelSource"] == "ctrl_c" and by["ide_stop"]["cancelSource"] == "ide_stop"
    assert by["server_shutdown"]["cancelSource"] == "service_shutdown"
    assert by["silent_builder"]["outcome"] == "forced" and by["worker_sigkill"]["outcome"] == "killed"
    assert by["tampered_cache"]["timingCacheMode"] == "quarantined" and by["disk_full"]["outcome"] == "failed"
    # every criterion a scenario declares was measured (or waived), the others are n/a
    for s in report["scenarios"]:
        for r in s["criteria"]:
            declared = r["criterion"] in BY_NAME[s["scenario"]].criteria
            assert (r["status"] != "n/a") == declared, (s["scenario"], r)
    # the waiver covers exactly the validations nothing here could measure
    assert {r["status"] for s in report["scenarios"] for r in s["criteria"] if r["waived"]} <= {"not_checked"}
    # latency per source; the forced stop is counted apart from cooperative ones
    lat = report["cancelLatency"]
    assert {"api", "ctrl_c", "ide_stop", "api (forced)"} <= set(lat)
    assert all(g["request_to_ack_ms"]["n"] >= 1 for g in lat.values())
    # every format renders; JUnit has a testcase per scenario × criterion
    root = ET.fromstring(junit(report))
    assert int(root.get("tests")) == 8 * len(report["scenarios"]) and root.get("failures") == "0"
    assert "PASSED" in to_text(report)


def test_not_checked_never_passes_without_a_waiver(fast_run) -> None:
    report, obs = fast_run
    observations = [obs[n] for n in GROUPS["fast"]]
    bare = build_report(observations, BY_NAME)
    assert bare["passed"] is False and "api_cancel:6" in bare["notChecked"] and "disk_full:6" in bare["notChecked"]
    root = ET.fromstring(junit(bare))
    failures = [f.get("type") for f in root.iter("failure")]
    assert failures and set(failures) == {"not_checked"}
    one = build_report(observations, BY_NAME, waivers=["api_cancel:6"])
    assert "api_cancel:6" not in one["notChecked"] and "disk_full:6" in one["notChecked"]
    assert build_report(observations, BY_NAME, waivers=["6"])["passed"] is True


def test_report_carries_every_runbook_field_for_every_scenario(fast_run) -> None:
    report, _ = fast_run
    root = ET.fromstring(junit(report))
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    for s in report["scenarios"]:
        assert set(SEED_FIELDS) <= set(s["evidence"]), s["scenario"]
        ev = s["evidence"]
        assert ev["tensorrtVersion"] not in (None, "unknown") and ev["gpuSku"] and ev["buildConfigHash"]
        assert s["fault"]["kind"] in ("real", "simulated") and s["fault"]["how"]
        assert all("measured" in r for r in s["criteria"])
        props = {p.get("name"): p.get("value") for p in suites[f"accept.{s['scenario']}"].find("properties")}
        assert {f"evidence.{k}" for k in SEED_FIELDS} <= set(props) and props["fault"] == s["fault"]["kind"]
    by = {s["scenario"]: s for s in report["scenarios"]}
    assert (
        by["api_cancel"]["evidence"]["cancelLatencyMs"] > 0 and by["cold_cache"]["evidence"]["cancelLatencyMs"] is None
    )
    assert by["api_cancel"]["evidence"]["resources"]["peakRssBytes"] > 0
    assert "oomKill" in by["worker_sigkill"]["evidence"]["resources"]["oom"]
    # the measured values a verdict judged are in the report
    c3 = next(r for r in by["ctrl_c"]["criteria"] if r["criterion"] == "3")
    assert c3["measured"]["exitCode"] == 130 and c3["measured"]["cancelSource"] == "ctrl_c"


def test_faults_say_how_they_were_produced(fast_run, tmp_path: Path) -> None:
    report, obs = fast_run
    by = {s["scenario"]: s for s in report["scenarios"]}
    full_disk_possible = mount_namespace_works(tmp_path) is None
    assert by["disk_full"]["fault"]["kind"] == ("real" if full_disk_possible else "simulated")
    if full_disk_possible:
        assert "tmpfs" in by["disk_full"]["fault"]["how"] and "No space left" in by["disk_full"]["evidence"]["error"]
    assert by["worker_sigkill"]["fault"]["kind"] == "simulated" and by["silent_builder"]["fault"]["kind"] == "simulated"


def test_a_cache_trtls_did_not_write_is_reported_honestly(fast_run) -> None:
    obs = fast_run[1]["corrupted_cache"]
    cache = obs.summary["timingCache"]
    assert "not written by trtls" in cache["reason"]
    if obs.summary["timingCacheMode"] != "quarantined":  # nothing could judge the bytes: left as they were
        assert obs.cache_sha_before == obs.cache_sha_after and "unverified" in cache["reason"]
    assert not [e for e in obs.events if e.get("type") == "log" and e.get("severity") == "ERROR"]
    broken = copy.deepcopy(obs)
    broken.events.append(
        {"type": "log", "severity": "ERROR", "msg": "cudaError 35: CUDA driver version is insufficient"}
    )
    assert "raw TensorRT ERROR" in verdict(broken, "5").message


def test_failed_scenarios_keep_their_folders(fast_run, tmp_path: Path) -> None:
    obs = [copy.deepcopy(fast_run[1][n]) for n in ("api_cancel", "ctrl_c")]
    for o in obs:
        o.evidence_dir = str(tmp_path / o.scenario)
        (tmp_path / o.scenario).mkdir()
    obs[1].summary_on_disk["gpuSku"] = None  # breaks criterion 7 of ctrl_c
    report = build_report(obs, BY_NAME, waivers=WAIVE)
    prune_folders(report, tmp_path, keep=False, log=lambda m: None)
    assert report["failedScenarios"] == ["ctrl_c"] and report["keptFolders"] == {"ctrl_c": str(tmp_path / "ctrl_c")}
    assert (tmp_path / "ctrl_c").is_dir() and not (tmp_path / "api_cancel").exists()
    assert report["scratch"] == str(tmp_path) and "evidence kept" in to_text(report)


def test_docs_table_is_generated_from_the_scenarios() -> None:
    doc = (ROOT / "docs" / "reliability.md").read_text(encoding="utf-8")
    assert reliability_table() in doc, "regenerate: python -m trtls.accept.doc_table docs/reliability.md"


def test_list_says_what_each_scenario_proves_and_does_not(capsys) -> None:
    from trtls.cli.main import main

    assert main(["accept", "--list"]) == 0
    out = capsys.readouterr().out
    for s in SCENARIOS:
        assert f"{s.name}" in out and s.does_not_prove in out and s.how in out
    assert out.count("does not prove:") == len(SCENARIOS)


# -- (3) cancel sources, forced, killed, exit code -------------------------------------------------------------
@pytest.mark.parametrize("scenario", ["api_cancel", "ctrl_c", "ide_stop"])
def test_wrong_expected_source_fails_criterion_3(fast_run, scenario: str) -> None:
    obs = copy.deepcopy(fast_run[1][scenario])
    assert verdict(obs, "3").status == "pass"
    obs.expect["cancel_source"] = "service_shutdown"
    v = verdict(obs, "3")
    assert v.status == "fail" and "expected 'service_shutdown'" in v.message


def test_forced_recorded_as_cooperative_fails(fast_run) -> None:
    obs = copy.deepcopy(fast_run[1]["silent_builder"])
    assert verdict(obs, "3").status == "pass"
    obs.summary["forced"] = False
    assert "forced stop was recorded as cooperative" in verdict(obs, "3").message


def test_cooperative_stop_without_acknowledgement_fails(fast_run) -> None:
    obs = copy.deepcopy(fast_run[1]["api_cancel"])
    obs.events = [e for e in obs.events if e.get("type") != "cancel_acknowledged"]
    assert "no cancel_acknowledged" in verdict(obs, "3").message
    obs = copy.deepcopy(fast_run[1]["api_cancel"])
    obs.summary["cleanupLatencyMs"] = None
    assert "cleanup latency not measured" in verdict(obs, "3").message


def test_dead_worker_recorded_as_cancel_fails(fast_run) -> None:
    obs = copy.deepcopy(fast_run[1]["worker_sigkill"])
    assert verdict(obs, "3").status == "pass"
    obs.summary["cancelSource"], obs.summary["outcome"] = "api", "cancelled"
    assert verdict(obs, "3").status == "fail"


def test_ctrl_c_wrong_exit_code_fails(fast_run) -> None:
    obs = copy.deepcopy(fast_run[1]["ctrl_c"])
    obs.extra["exit_code"] = 1
    assert "exited 1, expected 130" in verdict(obs, "3").message


# -- (4) artifacts --------------------------------------------------------------------------------------------
@pytest.fixture
def ctx(tmp_path: Path, quickstart_models: Path) -> runner.Context:
    src = tmp_path / "src"
    shutil.copytree(quickstart_models.parent, src, ignore=shutil.ignore_patterns(".trtls", "build"))
    return runner.prepare(src / "trtls.toml", "demo", tmp_path, lambda m: None)


@pytest.mark.parametrize("skip_cleanup", [False, True])
def test_skip_cleanup_fault_fails_criterion_4(ctx: runner.Context, skip_cleanup: bool) -> None:
    # A partial engine exists when the cancel arrives (planted at the build's own temp path, as if the
    # builder had begun writing). The worker's cleanup removes it; with the skip_cleanup fault it stays.
    def cancel_with_partial(build, sup, waiter) -> None:
        engine_temp_path(build.output, build.id).write_bytes(b"partial engine")
        build.cancel("api")

    faults = {"skip_cleanup": True} if skip_cleanup else None
    obs = runner.in_process_stop(ctx, f"skip_{skip_cleanup}", "api", faults=faults, action=cancel_with_partial)
    v4, v8 = verdict(obs, "4"), verdict(obs, "8")
    if skip_cleanup:
        assert v4.status == "fail" and "partial/temp files left" in v4.message and ".trtls-tmp-" in v4.message
        assert v8.status == "fail"
    else:
        assert v4.status == "pass" and v8.status == "pass", (v4, v8)


def test_previous_engine_changed_fails_criterion_4(fast_run) -> None:
    obs = copy.deepcopy(fast_run[1]["disk_full"])
    assert verdict(obs, "4").status == "pass" and obs.previous_engine_sha
    obs.engine_sha_after = "0" * 64
    assert "previous good engine was changed" in verdict(obs, "4").message
    obs.expect["outcome"] = "built"
    assert "expected built" in verdict(obs, "4").message


# -- (5) cache ------------------------------------------------------------------------------------------------
def test_cache_criterion_fails_on_silent_or_suspect_caches(fast_run) -> None:
    base = fast_run[1]["tampered_cache"]
    assert verdict(base, "5").status == "pass"
    obs = copy.deepcopy(base)
    obs.cache_sha_after = obs.cache_sha_before  # the suspect cache still in place
    assert "suspect cache is still at its path" in verdict(obs, "5").message
    obs = copy.deepcopy(fast_run[1]["api_cancel"])
    obs.summary["timingCache"]["written_back"] = True
    assert "wrote its cache back" in verdict(obs, "5").message
    obs = copy.deepcopy(fast_run[1]["api_cancel"])
    obs.summary["timingCacheMode"] = None
    assert "no explicit cache decision" in verdict(obs, "5").message
    # network change / new GPU target: an unchanged hash or identity is caught
    obs = copy.deepcopy(fast_run[1]["api_cancel"])
    obs.expect["config_hash_differs_from"] = obs.summary["buildConfigHash"]
    obs.expect["identity_differs_from"] = obs.summary["timingCache"]["identity"]
    msg = verdict(obs, "5").message
    assert "buildConfigHash did not change" in msg and "identity did not change" in msg


def test_concurrent_cache_check_catches_a_write_behind_trtls_back(tmp_path: Path) -> None:
    cache, identity = tmp_path / "c.timing-cache", {"module": "x"}
    records = {b"a:1", b"b:1"}
    for r in sorted(records):
        save_merged(
            cache,
            r + b"\n",
            identity,
            lambda old, new: b"\n".join(sorted(set(old.splitlines()) | set(new.splitlines()))) + b"\n",
        )
    assert artifact_scenarios.cache_consistency(cache, identity, records) == []
    cache.write_bytes(b"a:1\n")  # someone overwrote it in place (what trtexec does)
    problems = artifact_scenarios.cache_consistency(cache, identity, records)
    assert "the sidecar digest does not match the file" in problems and "1 of 2 merged records lost" in problems
    identity_path(cache).unlink()
    assert "no readable sidecar" in artifact_scenarios.cache_consistency(cache, identity, records)[0]


# -- (1), (2), (6), (7) ---------------------------------------------------------------------------------------
def test_phase_tree_criterion_fails_without_a_tree(fast_run) -> None:
    obs = copy.deepcopy(fast_run[1]["api_cancel"])
    assert verdict(obs, "1").status == "pass"
    obs.events = [dict(e, parent_id="9.9") if e.get("phase_id") == "0.1" else e for e in obs.events]
    assert "not its tree parent" in verdict(obs, "1").message
    obs.events, obs.live = [e for e in obs.events if e.get("type") != "phase_start"], []
    assert verdict(obs, "1").status == "fail"


def test_stall_criterion_fails_without_baselines_or_quiet(fast_run) -> None:
    obs = copy.deepcopy(fast_run[1]["api_cancel"])
    assert obs.history_had_baselines and verdict(obs, "2").status == "pass"
    obs.live = [[dict(p, baselineS=None) for p in snap] for snap in obs.live]
    assert "usual duration" in verdict(obs, "2").message
    obs.live = [[dict(p, quietForS=None) for p in snap] for snap in obs.live]
    assert "quiet" in verdict(obs, "2").message


def test_retry_criterion(fast_run) -> None:
    obs = copy.deepcopy(fast_run[1]["api_cancel"])
    v = verdict(obs, "6")
    assert obs.retry["action"] == "rebuilt" and obs.retry["policy"] == obs.summary["retryPolicy"]
    # an engine nothing could load is not_checked, never a pass
    assert (v.status, obs.retry["deserializes"]) in (("not_checked", None), ("pass", True))
    obs.retry["deserializes"] = False
    assert "does not deserialise" in verdict(obs, "6").message
    obs.retry["summary"]["outcome"] = "failed"
    assert verdict(obs, "6").status == "fail"
    obs.retry = None
    assert "nothing was retried" in verdict(obs, "6").message


def test_retry_follows_rollback_and_investigate(fast_run) -> None:
    disk = copy.deepcopy(fast_run[1]["disk_full"])
    assert disk.summary["retryPolicy"] == "rollback" and disk.retry["action"] == "kept_previous"
    assert disk.retry["previous_verified"] is True and verdict(disk, "6").status in ("pass", "not_checked")
    disk.retry["previous_verified"] = False
    assert "not byte-for-byte" in verdict(disk, "6").message
    disk.retry["action"] = "rebuilt"
    assert "instead of keeping" in verdict(disk, "6").message
    killed = copy.deepcopy(fast_run[1]["worker_sigkill"])
    assert killed.summary["retryPolicy"] == "investigate" and killed.retry["action"] == "none"
    assert verdict(killed, "6").status == "n/a"
    killed.retry["action"] = "rebuilt"
    assert "investigate, yet the harness ran" in verdict(killed, "6").message


@pytest.mark.parametrize("field", ["cancelLatencyMs", "buildConfigHash", "timingCacheMode", "validationStatus"])
def test_evidence_with_a_field_removed_fails_criterion_7(fast_run, field: str) -> None:
    obs = copy.deepcopy(fast_run[1]["api_cancel"])
    assert verdict(obs, "7").status == "pass"
    del obs.summary_on_disk[field]
    v = verdict(obs, "7")
    assert v.status == "fail" and field in v.message


@pytest.mark.parametrize(
    ("scenario", "field", "value", "says"),
    [
        ("api_cancel", "tensorrtVersion", None, "tensorrtVersion"),
        ("api_cancel", "gpuSku", "none (CPU-only ahead-of-time build)", "does not match the measured device"),
        ("api_cancel", "cancelLatencyMs", None, "cancelLatencyMs is None"),
        ("cold_cache", "cancelLatencyMs", 12.5, "although nothing cancelled"),
        ("api_cancel", "cleanupStatus", "quarantined", "no temp file quarantined"),
        ("api_cancel", "cleanupStatus", "not_needed", "a stopped build always cleans up"),
        ("api_cancel", "retryPolicy", "not_needed", "contradicts outcome"),
        ("cold_cache", "validationStatus", "not_applicable", "contradicts outcome"),
        ("api_cancel", "buildConfigHash", None, "reached the builder"),
        ("api_cancel", "language", "rust", "language"),
    ],
)
def test_evidence_values_are_checked_not_just_present(fast_run, scenario, field, value, says) -> None:
    obs = copy.deepcopy(fast_run[1][scenario])
    assert verdict(obs, "7").status == "pass"
    obs.summary_on_disk[field] = value
    v = verdict(obs, "7")
    assert v.status == "fail" and says in v.message, v.message


# -- (8) resources, for real ---------------------------------------------------------------------------------
def test_held_lock_and_live_process_fail_criterion_8(fast_run, tmp_path: Path) -> None:
    (tmp_path / ".trtls").mkdir()
    lock = tmp_path / ".trtls" / "history.json.lock"
    lock.touch()
    obs = copy.deepcopy(fast_run[1]["api_cancel"])
    assert verdict(obs, "8").status == "pass"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import fcntl,sys,time; f=open({str(lock)!r},'a+'); fcntl.flock(f, fcntl.LOCK_EX); print('x', "
            "flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        holder.stdout.readline()
        obs.locks = runner.lock_probe(tmp_path)
        assert obs.locks == {".trtls/history.json.lock": False}
        obs.alive_pids = [p for p in [holder.pid] if runner.process_alive(p)]
        v = verdict(obs, "8")
        assert v.status == "fail" and "locks still held" in v.message and str(holder.pid) in v.message
    finally:
        holder.kill()
        holder.wait()
    assert runner.lock_probe(tmp_path) == {".trtls/history.json.lock": True} and not runner.process_alive(holder.pid)


# -- LSP, skipped scenarios, report plumbing --------------------------------------------------------------------
def test_server_killed_without_telling_the_user_fails() -> None:
    obs = C.Observation(
        "server_killed", expect={"killed": True, "user_told": True}, summary={"outcome": "killed", "cancelSource": None}
    )
    assert "not told" in C.c3_cancel(obs).message
    obs.extra["user_told"] = True
    assert "OOM killer" in C.c3_cancel(obs).message  # a killed build must say whether the OOM killer acted
    obs.summary["resources"] = {"oom": {"oomKill": None, "how": "the system cannot tell"}}
    assert C.c3_cancel(obs).status == "pass"


def test_skipped_and_broken_scenarios_are_reported() -> None:
    skipped = C.Observation("readonly_output", skipped="no way to make a folder unwritable for root")
    broken = C.Observation("ide_stop", error="TimeoutError: server silent")
    report = build_report([skipped, broken], BY_NAME)
    rows = {s["scenario"]: {r["status"] for r in s["criteria"]} for s in report["scenarios"]}
    # a scenario that could not run measured nothing: not_checked for what it declares, never n/a or pass
    assert rows == {"readonly_output": {"not_checked", "n/a"}, "ide_stop": {"fail"}} and report["passed"] is False
    root = ET.fromstring(junit(report))
    declared = len(BY_NAME["readonly_output"].criteria)
    assert root.get("skipped") == str(8 - declared) and root.get("failures") == str(8 + declared)
    waived = build_report([skipped], BY_NAME, waivers=["readonly_output"])
    assert waived["passed"] is True and waived["notChecked"] == []


def test_percentiles_and_scenario_selection() -> None:
    assert percentile([5.0, 1.0, 3.0, 2.0, 4.0], 50) == 3.0 and percentile([1.0] * 19 + [100.0], 95) == 1.0
    assert stats([1.0, 2.0]) == {"n": 2, "p50": 1.0, "p95": 2.0, "max": 2.0} and stats([])["n"] == 0
    assert [s.name for s in select("ctrl_c,fast")][0] == "ctrl_c" and len(select("all")) == len(SCENARIOS) == 20
    with pytest.raises(ValueError):
        select("nope")
    for blank in ("", " ", ","):  # an unset variable: never the default scenarios' real builds
        with pytest.raises(ValueError, match="no scenario selected"):
            select(blank)
    assert [s.name for s in select(None)] == [s.name for s in select("fast")]


def test_cli_bad_input_exits_2(tmp_path: Path) -> None:
    from trtls.cli.main import main

    assert main(["accept", str(tmp_path), "--engine", "demo"]) == 2
    assert main(["accept", str(tmp_path), "--engine", "demo", "--scenarios", "nope"]) == 2
    (tmp_path / "trtls.toml").write_text("[engines.demo\n")
    assert main(["accept", str(tmp_path), "--engine", "demo"]) == 2
