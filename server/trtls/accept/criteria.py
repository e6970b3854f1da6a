"""The eight acceptance criteria, as plain functions over what one scenario run observed.

Each criterion takes an `Observation` (built by the runner from real builds: the evidence on disk,
the live snapshots, file digests, process and lock probes) and returns a `Verdict`: pass, fail,
not_checked (it should have been measured and was not: never a pass) or n/a (it does not apply, with the
reason), plus the measured values it judged. Nothing here starts a build, so a test can hand a criterion
an observation made by a real run and then broken on purpose, and see it fail.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable
from typing import Any

from trtls.accept.observation import FAIL, NA, NOT_CHECKED, PASS, Observation, Verdict, measured
from trtls.core.evidence import record_problems
from trtls.core.vocabulary import CACHE_DECISIONS

__all__ = ["FAIL", "NA", "NOT_CHECKED", "PASS", "Observation", "Verdict", "judge"]
PHASE_ID = re.compile(r"^\d+(\.\d+)*$")


def _outcome(obs: Observation) -> str | None:
    return (obs.summary or {}).get("outcome")


# -- (1) phase tree ---------------------------------------------------------------------------------
def c1_phase_tree(obs: Observation) -> Verdict:
    starts = [e for e in obs.events if e.get("type") == "phase_start"]
    source = "events"
    phases: list[dict[str, Any]] = [
        {"id": e.get("phase_id"), "parent": e.get("parent_id"), "t": e.get("t_ns")} for e in starts
    ]
    if not phases and obs.live:
        source = "live snapshots"  # the events file died with its writer (server killed): the client's view
        seen: dict[str, dict[str, Any]] = {}
        for snap in obs.live:
            for p in snap:
                seen.setdefault(p["id"], {"id": p["id"], "parent": p.get("parentId"), "t": p.get("elapsedS")})
        phases = list(seen.values())
    if not phases:
        return Verdict(FAIL, "no phase was observed (no phase_start events, no live tree)")
    ids = [p["id"] for p in phases]
    problems = []
    bad_ids = [i for i in ids if not isinstance(i, str) or not PHASE_ID.match(i)]
    if bad_ids:
        problems.append(f"phase ids that are not tree positions: {bad_ids[:3]}")
    if len(set(ids)) != len(ids):
        problems.append("a phase id was started twice")
    known = set(ids)
    for p in phases:
        parent = p["parent"]
        if parent is None:
            if "." in str(p["id"]):
                problems.append(f"phase {p['id']} has no parent")
        elif parent not in known or not str(p["id"]).startswith(str(parent) + "."):
            problems.append(f"phase {p['id']} names parent {parent}, which is not its tree parent")
        if p["t"] is None:
            problems.append(f"phase {p['id']} has no timestamp")
    if source == "events":
        times = [p["t"] for p in phases]
        if any(b < a for a, b in itertools.pairwise(times)):
            problems.append("phase_start timestamps go backwards")
        finished = {e.get("phase_id") for e in obs.events if e.get("type") == "phase_finish"}
        tree = {p.get("id"): p.get("status") for p in (obs.summary or {}).get("phaseTree") or []}
        open_left = [i for i in ids if i not in finished and tree.get(i) == "running"]
        if open_left:
            problems.append(f"phases left running in the evidence: {open_left[:3]}")
    if problems:
        return Verdict(FAIL, "; ".join(problems[:4]))
    roots = sum(1 for p in phases if p["parent"] is None)
    return Verdict(
        PASS, f"{len(phases)} phases from {source}, {roots} root(s), stable dotted ids, parents and timestamps"
    )


# -- (2) stall evidence -----------------------------------------------------------------------------
def c2_stall_evidence(obs: Observation) -> Verdict:
    running = [p for snap in obs.live for p in snap if p.get("status") == "running"]
    if not running:
        return Verdict(FAIL, "no live snapshot of a running phase was taken while the build ran")
    no_elapsed = [p for p in running if not isinstance(p.get("elapsedS"), (int, float)) or p["elapsedS"] < 0]
    no_quiet = [p for p in running if p.get("quietForS") is None]
    if no_elapsed:
        return Verdict(FAIL, f"{len(no_elapsed)} running phase(s) without elapsed time")
    if len(no_quiet) == len(running):
        return Verdict(FAIL, "no running phase showed how long the builder had been quiet")
    with_baseline = [p for p in running if p.get("baselineS") is not None]
    if obs.expect.get("no_baselines") and with_baseline:
        return Verdict(FAIL, f"{len(with_baseline)} running-phase samples showed a usual duration from another config")
    if obs.history_had_baselines:
        if not with_baseline:
            return Verdict(
                FAIL, "history held durations for this build config, but no running phase showed its usual duration"
            )
        note = f"baseline shown on {len(with_baseline)} running-phase samples"
    else:
        note = "baseline n/a: first build of this config (no history yet)"
    quiet_max = max((p["quietForS"] for p in running if p.get("quietForS") is not None), default=0.0)
    return Verdict(
        PASS, f"{len(running)} running-phase samples with elapsed and quiet_for (max quiet {quiet_max:.2f} s); {note}"
    )


# -- (3) cancel acknowledged ------------------------------------------------------------------------
def c3_cancel(obs: Observation) -> Verdict:
    s = obs.summary or {}
    want = obs.expect.get("cancel_source")
    if obs.expect.get("killed"):
        if s.get("outcome") != "killed":
            return Verdict(FAIL, f"a dead worker must be recorded as killed, not {s.get('outcome')}")
        if s.get("cancelSource") is not None:
            return Verdict(FAIL, f"a dead worker was recorded as cancelled by {s.get('cancelSource')}")
        if obs.expect.get("user_told") and not obs.extra.get("user_told"):
            return Verdict(FAIL, "the user was not told about the interrupted build")
        oom = (s.get("resources") or {}).get("oom")
        if not isinstance(oom, dict) or "oomKill" not in oom or not oom.get("how"):
            return Verdict(
                FAIL, "a killed build does not say whether the OOM killer was involved (or that it cannot tell)"
            )
        told = "; the user was told (window/showMessage)" if obs.expect.get("user_told") else ""
        verdict = {True: "yes", False: "no", None: "cannot tell"}[oom["oomKill"]]
        return Verdict(
            PASS,
            f"recorded as killed ({s.get('error')}), never as a cancel; OOM killer: {verdict} ({oom['how']}){told}",
        )
    if want is None:
        if s.get("cancelSource") is not None:
            return Verdict(FAIL, f"nothing cancelled this build, yet the evidence says {s.get('cancelSource')}")
        return Verdict(NA, "no cancel in this scenario")
    problems = []
    if s.get("cancelSource") != want:
        problems.append(f"cancel source {s.get('cancelSource')!r}, expected {want!r}")
    forced_expected = bool(obs.expect.get("forced"))
    if bool(s.get("forced")) != forced_expected:
        problems.append(
            "a forced stop was recorded as cooperative"
            if forced_expected
            else "a cooperative stop was recorded as forced"
        )
    want_outcome = "forced" if forced_expected else "cancelled"
    if s.get("outcome") != want_outcome:
        problems.append(f"outcome {s.get('outcome')}, expected {want_outcome}")
    code = obs.expect.get("exit_code")
    if code is not None and obs.extra.get("exit_code") != code:
        problems.append(f"the command exited {obs.extra.get('exit_code')}, expected {code}")
    if not forced_expected:
        acks = [e for e in obs.events if e.get("type") == "cancel_acknowledged"]
        if not acks:
            problems.append("no cancel_acknowledged event from the worker")
        elif acks[0].get("source") != want:
            problems.append(f"the worker acknowledged source {acks[0].get('source')!r}, expected {want!r}")
    lat, clean = s.get("cancelLatencyMs"), s.get("cleanupLatencyMs")
    if not isinstance(lat, (int, float)) or lat < 0:
        problems.append(f"request → acknowledgement latency not measured ({lat})")
    if not isinstance(clean, (int, float)) or clean < 0:
        problems.append(f"acknowledgement → cleanup latency not measured ({clean})")
    if problems:
        return Verdict(FAIL, "; ".join(problems))
    kind = "forced after the grace (SIGTERM/SIGKILL)" if forced_expected else "cooperative"
    return Verdict(PASS, f"{want}: {kind}; request→ack {lat:.1f} ms, ack→cleanup {clean:.1f} ms")


# -- (4) no partial engine, previous engine intact ---------------------------------------------------
def c4_artifacts(obs: Observation) -> Verdict:
    s = obs.summary or {}
    if obs.leftovers:
        return Verdict(FAIL, f"partial/temp files left: {obs.leftovers[:3]}")
    outcome = s.get("outcome")
    want = obs.expect.get("outcome")
    if want is not None and outcome != want:
        return Verdict(FAIL, f"outcome {outcome} ({s.get('error')}), expected {want}")
    why = obs.expect.get("error_has")
    if why is not None and why not in str(s.get("error")):
        return Verdict(FAIL, f"the build failed for another reason than expected ({why!r}): {s.get('error')}")
    if outcome == "built":
        art = s.get("engineArtifact") or {}
        if obs.engine_sha_after is None or art.get("sha256") != obs.engine_sha_after:
            return Verdict(FAIL, "the built engine on disk does not match the engine the evidence records")
        return Verdict(
            PASS,
            "no temp files; the new engine on disk matches its recorded sha256 (previous engine replaced atomically)",
        )
    if obs.previous_engine_sha is None:
        if obs.engine_sha_after is not None:
            return Verdict(FAIL, f"a {outcome} build left an engine at the output path")
        return Verdict(PASS, f"no temp files; no engine was left by the {outcome} build")
    if obs.engine_sha_after != obs.previous_engine_sha:
        return Verdict(FAIL, "the previous good engine was changed or removed by a build that did not succeed")
    if s.get("previousEngineIntact") is False:
        return Verdict(FAIL, "the evidence says the previous engine is not intact, but it is byte-for-byte the same")
    return Verdict(
        PASS, f"no temp files; the previous engine is byte-for-byte intact (sha256 {obs.previous_engine_sha[:12]}…)"
    )


# -- (5) timing-cache decision ------------------------------------------------------------------------
def c5_cache(obs: Observation) -> Verdict:
    s = obs.summary or {}
    cache = s.get("timingCache") or {}
    decision = s.get("timingCacheMode")
    problems = []
    if decision not in CACHE_DECISIONS:
        problems.append(f"no explicit cache decision (timingCacheMode={decision!r})")
    if not cache.get("reason"):
        problems.append("the cache decision has no reason")
    want = obs.expect.get("cache_decisions")
    if want and decision not in want:
        problems.append(f"decision {decision}, expected one of {want}")
    if s.get("outcome") != "built" and cache.get("written_back"):
        problems.append(f"a {s.get('outcome')} build wrote its cache back")
    if decision == "quarantined":
        q = cache.get("quarantined_to")
        there = obs.quarantined_exists if obs.quarantined_exists is not None else bool(q) and os.path.exists(str(q))
        if not q or not there:
            problems.append("quarantined, but the quarantined file is not there")
        if obs.cache_sha_after is not None and obs.cache_sha_after == obs.cache_sha_before:
            problems.append("the suspect cache is still at its path")
    elif not cache.get("written_back") and obs.cache_sha_before != obs.cache_sha_after:
        problems.append("the cache file changed although the build says it did not write it back")
    other = obs.expect.get("config_hash_differs_from")
    if other is not None and s.get("buildConfigHash") == other:
        problems.append("the buildConfigHash did not change although the network did")
    ident = obs.expect.get("identity_differs_from")
    if ident is not None:
        if cache.get("identity") == ident:
            problems.append("the cache identity did not change for another GPU target")
        if decision == "reused":
            problems.append("a cache made for another GPU target was reused")
    net = obs.expect.get("network_differs_from")
    if net is not None and (s.get("network") or {}).get("inputs") == net.get("inputs"):
        problems.append("the evidence shows the same network input types although they changed")
    has = obs.expect.get("cache_reason_has")
    if has is not None and has not in str(cache.get("reason")):
        problems.append(f"the cache decision does not say {has!r}: {cache.get('reason')}")
    if obs.expect.get("no_raw_errors"):
        raw: list[str] = [
            str(e.get("msg"))
            for e in obs.events
            if e.get("type") == "log" and e.get("severity") in ("ERROR", "INTERNAL_ERROR")
        ]
        if raw:
            problems.append(
                f"{len(raw)} raw TensorRT ERROR line(s) reached the user without explanation: {raw[0][:120]!r}"
            )
    if obs.expect.get("cache_consistent") is not None and not obs.extra.get("cache_consistent"):
        problems.append(f"concurrent writers left an inconsistent cache: {obs.extra.get('cache_problem')}")
    if problems:
        return Verdict(FAIL, "; ".join(problems))
    extra = []
    if other is not None:
        extra.append("buildConfigHash changed with the network")
    if ident is not None:
        extra.append("identity differs for the new target, not reused")
    if obs.expect.get("cache_consistent") is not None:
        extra.append(obs.extra.get("cache_note", "concurrent writes consistent"))
    return Verdict(PASS, f"{decision}: {cache.get('reason')}" + (f" ({'; '.join(extra)})" if extra else ""))


# -- (6) retry ---------------------------------------------------------------------------------------
def c6_retry(obs: Observation) -> Verdict:
    """The retry follows the evidence's advice: retry_cold/retry_with_cache rebuild, rollback keeps and
    verifies the previous engine, investigate runs nothing blindly. A result nobody could load is not_checked."""
    advised = (obs.summary or {}).get("retryPolicy")
    r = obs.retry
    if advised in (None, "not_needed"):
        return Verdict(NA, "the build succeeded: nothing to retry")
    if advised == "investigate":
        if r is not None and r.get("action") not in (None, "none"):
            return Verdict(FAIL, f"the advice was investigate, yet the harness ran {r.get('action')}")
        return Verdict(NA, f"the advice is investigate ({(obs.summary or {}).get('retryRule')}): no blind retry")
    if r is None:
        return Verdict(FAIL, f"the advice was {advised}, but nothing was retried")
    if r.get("policy") != advised:
        return Verdict(FAIL, f"the advice was {advised}, the harness applied {r.get('policy')}")
    des = r.get("deserializes")
    if advised == "rollback":
        if r.get("action") != "kept_previous":
            return Verdict(FAIL, f"rollback advised, but the harness {r.get('action')} instead of keeping the engine")
        if not r.get("previous_verified"):
            return Verdict(FAIL, "rollback advised, but the previous engine is not byte-for-byte what it was")
        what = "rollback: the previous engine is kept and byte-for-byte verified"
    else:
        rs = r.get("summary") or {}
        if rs.get("outcome") != "built":
            return Verdict(
                FAIL, f"the retry ({advised}) did not build: {rs.get('outcome')} {rs.get('error') or ''}".strip()
            )
        if rs.get("validationStatus") not in ("pending", "not_applicable"):
            return Verdict(
                FAIL,
                f"a finished build claims validation {rs.get('validationStatus')!r}; "
                "it must stay pending until something runs it",
            )
        what = f"retry ({advised}) built in {rs.get('durationS')} s"
    if des is False:
        return Verdict(FAIL, f"{what}, but the engine does not deserialise in the runtime")
    if des is None:
        return Verdict(
            NOT_CHECKED, f"{what}; its validation was not measured: no runtime here can load an engine (no device)"
        )
    return Verdict(PASS, f"{what}; the engine deserialises in the runtime")


# -- (7) evidence record: present, typed, consistent ---------------------------------------------------
def c7_evidence(obs: Observation) -> Verdict:
    disk = obs.summary_on_disk
    if disk is None:
        return Verdict(FAIL, "no summary.json was written")
    problems = [f"summary.json: {p}" for p in record_problems(disk)]
    inventory_left = [
        a.get("path")
        for a in disk.get("artifacts") or []
        if a.get("action") == "removed" and a.get("path") in obs.leftovers
    ]
    if inventory_left:
        problems.append(f"the inventory says removed, but these are still there: {inventory_left[:3]}")
    if disk.get("cancelSource") != (obs.summary or {}).get("cancelSource"):
        problems.append("summary.json and the summary the face returned disagree on cancelSource")
    rs = (obs.retry or {}).get("summary_on_disk")
    if (obs.retry or {}).get("action") == "rebuilt":
        if rs is None:
            problems.append("the retry wrote no summary.json")
        else:
            problems.extend(f"retry summary.json: {p}" for p in record_problems(rs))
    if problems:
        return Verdict(FAIL, "; ".join(problems[:6]))
    return Verdict(
        PASS,
        "every runbook field present, typed and consistent (cancel latency iff cancelled, cleanup status = inventory)"
        + (" for the stopped build and the retry" if rs is not None else ""),
    )


# -- (8) resources released ----------------------------------------------------------------------------
def c8_resources(obs: Observation) -> Verdict:
    problems = []
    if obs.alive_pids:
        problems.append(f"processes still alive: {obs.alive_pids}")
    if obs.leftovers:
        problems.append(f"temp files left: {obs.leftovers[:3]}")
    held = [p for p, free in obs.locks.items() if not free]
    if held:
        problems.append(f"locks still held: {held}")
    if problems:
        return Verdict(FAIL, "; ".join(problems))
    return Verdict(PASS, f"{len(obs.pids)} process(es) gone, no temp files, {len(obs.locks)} lock file(s) free")


CRITERIA: list[tuple[str, str, Callable[[Observation], Verdict]]] = [
    ("1", "phase tree observed", c1_phase_tree),
    ("2", "stall evidence while running", c2_stall_evidence),
    ("3", "cancel acknowledged from its source", c3_cancel),
    ("4", "no partial engine, previous engine intact", c4_artifacts),
    ("5", "timing-cache decision explicit", c5_cache),
    ("6", "retry follows the advice, result validated", c6_retry),
    ("7", "evidence record complete and consistent", c7_evidence),
    ("8", "resources released", c8_resources),
]
TITLES = {num: title for num, title, _ in CRITERIA}


def judge(obs: Observation, declared: tuple[str, ...] | None = None) -> list[tuple[str, str, Verdict]]:
    """Every criterion on one observation. `declared` = the criteria the scenario sets out to measure: one of
    them that comes back n/a was not measured (not_checked); the others are n/a. A skipped scenario measured
    nothing (not_checked), a broken one fails."""
    out = []
    for num, title, fn in CRITERIA:
        expected = declared is None or num in declared
        if obs.error:
            v = Verdict(FAIL, f"scenario error: {obs.error}")
        elif not expected:
            v = Verdict(NA, "not part of this scenario")
        elif obs.skipped:
            v = Verdict(NOT_CHECKED, f"scenario not run here: {obs.skipped}")
        else:
            try:
                v = fn(obs)
            except Exception as exc:
                v = Verdict(FAIL, f"criterion could not judge: {type(exc).__name__}: {exc}")
            if v.status == NA and declared is not None:
                v = Verdict(NOT_CHECKED, f"this scenario should measure it, but: {v.message}")
            try:
                v.measured = v.measured or measured(num, obs)
            except Exception as exc:
                v.measured = {"error": f"{type(exc).__name__}: {exc}"}
        out.append((num, title, v))
    return out
