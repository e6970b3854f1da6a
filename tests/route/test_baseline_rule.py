"""Gate 5's baseline rule established in one run (interleaved rounds, a bootstrap interval of the p95 ratio), and an
absolute latency limit inside the measurement's interval: judged only when the figures say so."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _lifecycle_sample import ROUTE, copy, trtls

from trtls.gates.release import Measurement
from trtls.gates.release.interleaved import judge_regression
from trtls.gates.release.measure import Thresholds
from trtls.gates.release.performance import check_performance


def rounds(rng, center: float, spread: float, n: int = 5, size: int = 40) -> list[np.ndarray]:
    return [np.abs(rng.normal(center, spread, size)) + 0.01 for _ in range(n)]


def test_noise_larger_than_the_effect_is_too_noisy_to_judge_not_a_regression():
    rng = np.random.default_rng(1)
    # the candidate's p95 is ~1.3x the baseline's in this draw, but the spread is as large as the effect
    verdict = judge_regression(rounds(rng, 1.3, 0.6), rounds(rng, 1.0, 0.5), max_regression=0.25, floor_ms=0.1)
    assert verdict["status"] == "not_checked" and verdict["message"].startswith("too noisy to judge: CV ")
    low, high = verdict["ci"]
    assert low < 1.25 < high


def test_an_established_regression_rejects_and_identical_artifacts_pass():
    rng = np.random.default_rng(2)
    slow = judge_regression(rounds(rng, 2.0, 0.02), rounds(rng, 1.0, 0.01), max_regression=0.25, floor_ms=0.1)
    assert slow["status"] == "reject" and slow["ci"][0] > 1.25 and "regression established" in slow["message"]
    same = judge_regression(rounds(rng, 1.0, 0.01), rounds(rng, 1.0, 0.01), max_regression=0.25, floor_ms=0.1)
    assert same["status"] == "pass" and same["rounds"] == 5


def test_an_absolute_limit_inside_the_measurements_interval_is_not_judged():
    m = Measurement(
        "ort",
        50,
        5,
        0.8,
        1.0,
        1.2,
        0.9,
        1000.0,
        100.0,
        None,
        0.1,
        0.1,
        0.2,
        latency_ci_ms={"p50": [0.7, 0.9], "p95": [0.8, 1.3], "p99": [1.0, 1.6]},
    )
    (lat,) = [c for c in check_performance(m, Thresholds(latency_p95_ms=1.1)) if c.name == "release.latency"]
    assert lat.status == "not_checked" and lat.message.startswith("too noisy to judge: ")
    assert "straddles the 1.1 ms limit" in lat.message
    (lat,) = [c for c in check_performance(m, Thresholds(latency_p95_ms=0.5)) if c.name == "release.latency"]
    assert lat.status == "reject"  # the whole interval is over
    (lat,) = [c for c in check_performance(m, Thresholds(latency_p95_ms=5.0)) if c.name == "release.latency"]
    assert lat.status == "pass"


@pytest.fixture
def root(prepared, tmp_path) -> Path:
    return copy(prepared, tmp_path / "route")


def test_the_sample_baseline_is_judged_on_interleaved_rounds_in_the_run(root):
    import json

    r = trtls("gates", "--route", ROUTE, "--gate", "5", "--format", "json", cwd=root)
    s = json.loads(r.stdout)
    (b,) = [c for c in s["gates"]["5"]["checks"] if c["name"] == "release.baseline"]
    assert b["status"] == "pass", b
    lat = b["evidence"]["latency"]
    assert lat["rounds"] == 5 and lat["statistic"].startswith("p95 ratio, 95 % bootstrap CI")
    assert len(lat["per_round_ratio"]) == 5 and lat["ci"][0] <= lat["ratio"] <= lat["ci"][1]
