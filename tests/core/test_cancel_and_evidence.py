from __future__ import annotations

import threading

import pytest

from trtls.core.cancel import CancelToken
from trtls.core.evidence import retry_advice, validation_status


def test_first_source_wins_and_later_ones_are_kept() -> None:
    token = CancelToken()
    seen: list[str] = []
    token.on_request(seen.append)
    assert token.request("ide_stop", 10)
    assert not token.request("ctrl_c", 20)
    assert token.source == "ide_stop" and token.t_request_ns == 10
    assert token.later_requests == [("ctrl_c", 20)]
    assert seen == ["ide_stop"]


def test_listener_added_after_request_fires_at_once() -> None:
    token = CancelToken()
    token.request("api")
    seen: list[str] = []
    token.on_request(seen.append)
    assert seen == ["api"]


def test_unknown_source_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown cancel source"):
        CancelToken().request("keyboard")


def test_two_tokens_never_share_state() -> None:
    a, b = CancelToken(), CancelToken()
    a.request("api")
    assert a.is_set and not b.is_set


def test_concurrent_requests_pick_exactly_one_source() -> None:
    token = CancelToken()
    winners: list[bool] = []
    threads = [
        threading.Thread(target=lambda s=s: winners.append(token.request(s)))
        for s in ("api", "ctrl_c", "ide_stop", "ci_timeout") * 5
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert winners.count(True) == 1 and len(token.later_requests) == 19


def test_latencies() -> None:
    token = CancelToken()
    token.request("api", 1_000_000)
    token.t_ack_ns, token.t_cleanup_ns = 3_000_000, 3_500_000
    assert token.latencies_ms() == {"cancelLatencyMs": 2.0, "cleanupLatencyMs": 0.5}


@pytest.mark.parametrize(
    "outcome,cache,intact,repeated,policy",
    [
        ("built", "reused", False, None, "not_needed"),
        ("cancelled", "reused", True, None, "retry_with_cache"),
        ("cancelled", "quarantined", True, None, "retry_cold"),
        ("cancelled", "not_applicable", False, None, "retry_cold"),
        ("failed", "cold", True, None, "rollback"),
        ("failed", "cold", False, None, "investigate"),
        ("forced", "reused", False, None, "retry_cold"),
        ("killed", "reused", True, None, "investigate"),
        ("cancelled", "reused", True, "Timing tactics", "investigate"),
    ],
)
def test_retry_rules(outcome: str, cache: str, intact: bool, repeated: str | None, policy: str) -> None:
    advice = retry_advice(outcome, cache, intact, repeated)
    assert advice.policy == policy and advice.rule


def test_a_build_never_claims_correctness() -> None:
    assert validation_status("built") == "pending"
    assert {validation_status(o) for o in ("cancelled", "failed", "forced", "killed")} == {"not_applicable"}
