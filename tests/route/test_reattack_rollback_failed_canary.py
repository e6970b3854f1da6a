"""A second `trtls route rollback` after a failed canary restored the very bundle the canary failed: promote #1,
its canary fails (`route status`: canary_failed, exit 4), rollback #4 moves the pointer to the rollback artifact, and
a rollback of that rollback returned to promotion #1's bundle — `route status` then said `valid`, exit 0, `canary
not_started`: the failed canary forgotten. A bundle whose (latest) canary failed is never a rollback's target now:
the rollback is refused (exit 3), the pointer stays. The real route sample's supported copy, real CLI processes."""

from __future__ import annotations

import json
from pathlib import Path

from _lifecycle_sample import ROUTE, trtls

WHO = {"TRTLS_APPROVER": "ci@example.com"}


def test_a_bundle_whose_canary_failed_is_never_rolled_back_to(promoted: Path) -> None:
    assert trtls("route", "canary", "--route", ROUTE, "start", cwd=promoted, env=WHO).returncode == 0
    r = trtls(
        "route", "canary", "--route", ROUTE, "fail", "--figure", "p95_ms=80", "--figure", "error_rate=5%",
        cwd=promoted, env=WHO,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    failed = json.loads(trtls("route", "status", "--route", ROUTE, "--format", "json", cwd=promoted).stdout)
    digest = failed["routes"][0]["promoted_bundle"]
    assert failed["routes"][0]["state"] == "canary_failed"
    # the advised rollback: to the promotion's rollback artifact
    r = trtls("route", "rollback", "--route", ROUTE, cwd=promoted, env=WHO)
    assert r.returncode == 0 and "the promotion's rollback artifact" in r.stdout, r.stdout + r.stderr
    ledger = (promoted / "trtls.promotions.jsonl").read_bytes()
    # a rollback of the rollback: nowhere to go but the failed bundle, so refused, nothing written
    r = trtls("route", "rollback", "--route", ROUTE, cwd=promoted, env=WHO)
    assert r.returncode == 3, r.stdout + r.stderr
    assert "the canary failed for promotion #1: its bundle is never rolled back to" in r.stdout + r.stderr, r.stdout
    assert (promoted / "trtls.promotions.jsonl").read_bytes() == ledger
    st = json.loads(trtls("route", "status", "--route", ROUTE, "--format", "json", cwd=promoted).stdout)["routes"][0]
    assert st["promoted_bundle"] != digest and st["state"] != "valid", st
