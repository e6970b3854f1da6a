"""One verdict per route, the same on every identical run (issue 29, item 5): 10 consecutive `trtls gates` runs of the
route sample's ONNX Runtime route give the same decision while a real busy-looping child process takes a core beside
them. The route's baseline is its own bundle, and its regression floor is set to 0 ms so that nothing but the
statistic decides: the old rule (5 interleaved rounds of wall-clock p95) read per-round ratios of one artifact
against itself from ~1.0 to over the 1.25 limit under such load and went pass ↔ "too noisy to judge" between runs;
the paired rule (both artifacts in one process, per-request CPU time, a fixed number of pairs) judges the same way
every time. Also: the pass message says what happened to the figure (fell/rose), never "the rise is under the floor"
when it fell."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tests.route._lifecycle_sample import ROUTE, set_in_route, supported_sample, trtls

from trtls.gates.release.interleaved import judge_regression
from trtls.gates.release.paired import judge_paired, judge_set

RUNS = 10


@pytest.fixture(scope="module")
def sample(tmp_path_factory) -> Path:
    root = supported_sample(tmp_path_factory.mktemp("stable") / "route")
    set_in_route(root, "max_build_s = 600, warmup = 50", "max_build_s = 600, regression_floor_ms = 0, warmup = 50")
    return root


def test_ten_identical_gates_runs_under_a_cpu_burner_give_one_decision(sample):
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        decisions, baselines = [], []
        for _ in range(RUNS):
            r = trtls("gates", "--route", ROUTE, "--format", "json", cwd=sample)
            s = json.loads(r.stdout)
            decisions.append(s["decision"])
            (b,) = [c for c in s["gates"]["5"]["checks"] if c["name"] == "release.baseline"]
            baselines.append((b["status"], b["message"]))
        assert burner.poll() is None  # the burner ran through every run
    finally:
        burner.kill()
        burner.wait()
    assert decisions == ["supported"] * RUNS, (decisions, baselines)
    assert all(status == "pass" for status, _ in baselines), baselines
    for _, message in baselines:
        assert "CPU time per request" in message and "interleaved pairs" in message, message


def test_the_paired_statistic_is_stated_and_judged_per_input_set():
    rng = np.random.default_rng(3)
    n = 200
    index = [k % 2 for k in range(n)]
    # set 0 ("short"): candidate = baseline; set 1 ("long"): candidate twice the baseline's CPU time
    base = [1e-3 if k % 2 == 0 else 4e-3 for k in range(n)]
    cand = [b * (1.0 if k % 2 == 0 else 2.0) * (1 + 0.01 * rng.standard_normal()) for k, b in enumerate(base)]
    paired = {"input": index, "cand_cpu_s": cand, "base_cpu_s": base, "cand_wall_s": cand, "base_wall_s": base}
    verdict = judge_paired(paired, ["short", "long"], clock="cpu", max_regression=0.25, floor_ms=0.1)
    assert verdict["status"] == "reject" and verdict["message"].startswith("long: regression")
    assert verdict["sets"]["short"]["status"] == "pass" and verdict["sets"]["long"]["pairs"] == n // 2
    assert "candidate / baseline cpu time per request, per input set" in verdict["statistic"]


def test_a_straddled_limit_is_not_checked_and_a_fall_is_said_as_a_fall():
    rng = np.random.default_rng(4)
    base = np.full(400, 1e-3)
    noisy = base * np.exp(rng.normal(np.log(1.25), 0.4, 400))  # median ratio at the limit, wide spread
    v = judge_set(noisy, base, clock="cpu", max_regression=0.25, floor_ms=0.0)
    assert v["status"] == "not_checked" and v["ci"][0] < 1.25 < v["ci"][1], v
    faster = judge_set(base * 0.7, base, clock="cpu", max_regression=0.25, floor_ms=0.1)
    assert faster["status"] == "pass" and "(fell 30.0 %)" in faster["message"]


def test_the_rounds_rule_says_a_fall_is_a_fall():
    """The pass message of the command runner's rule said "the p95 rise is under the 0.1 ms floor" when p95 fell."""
    rounds_c = [np.full(40, 0.7) for _ in range(5)]
    rounds_b = [np.full(40, 1.0) for _ in range(5)]
    v = judge_regression(rounds_c, rounds_b, max_regression=0.25, floor_ms=0.1)
    assert v["status"] == "pass" and "the p95 fell (30 %)" in v["message"] and "rise" not in v["message"]


def test_a_limit_near_the_figure_stays_not_checked_on_two_runs_hit_by_different_bursts():
    """An absolute latency limit judged on two runs of one artifact, each hit by a burst of another process (30 and
    60 consecutive slow requests): the percentile's interval resamples stretches of consecutive requests, so both runs
    read "too noisy to judge". Resampled request by request, the first run's interval was narrow (1.02-1.04 ms,
    pass) and the second's wide (not_checked): the verdict flipped between identical runs."""
    from trtls.gates.release.measure import Thresholds, measurement_of
    from trtls.gates.release.performance import check_performance
    from trtls.runtimes import RunResult, RuntimeSpec

    statuses = []
    for seed, burst in ((5, 30), (6, 60)):
        rng = np.random.default_rng(seed)
        lat_ms = rng.normal(1.0, 0.02, 1000)
        lat_ms[400 : 400 + burst] = rng.normal(3.0, 0.5, burst)
        m = measurement_of(
            RuntimeSpec("onnxruntime", model="m.onnx"), RunResult("ok", latencies_s=list(lat_ms / 1e3)), 5
        )
        (latency,) = [c for c in check_performance(m, Thresholds(latency_p95_ms=1.5)) if c.name == "release.latency"]
        statuses.append((latency.status, latency.message))
    assert [s for s, _ in statuses] == ["not_checked", "not_checked"], statuses
    assert all("straddles the 1.5 ms limit" in msg for _, msg in statuses)
