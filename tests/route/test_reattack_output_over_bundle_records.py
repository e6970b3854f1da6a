"""`-o` over the records a route build writes beside its bundle: `trtls gates --format json -o
build/tiny_ort.bundle.trtls.json` (or `.cdx.json`, or the previous bundle's) replaced the bundle's sidecar or SBOM
with the gates report — both JSON, so "a file of its own format" let it through — and the bundle then read as one
trtls did not write (gate 3 rejects, `route build` will not replace it). The write policy protects each route's
bundle and previous bundle's sidecar and SBOM now: TRT109, nothing written, for every `-o` writer. The real route
sample's supported copy and real CLI processes."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from _lifecycle_sample import ROUTE, copy, trtls

RECORDS = [
    (f"build/{ROUTE}.bundle.trtls.json", f"the sidecar record of the bundle of route '{ROUTE}'"),
    (f"build/{ROUTE}.bundle.cdx.json", f"the SBOM of the bundle of route '{ROUTE}'"),
    (f"releases/{ROUTE}-previous.bundle.trtls.json", f"the sidecar record of the previous bundle of route '{ROUTE}'"),
    (f"releases/{ROUTE}-previous.bundle.cdx.json", f"the SBOM of the previous bundle of route '{ROUTE}'"),
]


@pytest.mark.parametrize(("record", "what"), RECORDS)
def test_no_report_is_written_over_a_bundles_sidecar_or_sbom(prepared: Path, tmp_path: Path, record: str, what: str):
    root = copy(prepared, tmp_path / "route")
    path = root / record
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    for command in (
        ("gates", "--route", ROUTE, "--gate", "1", "--format", "json", "-o", record),
        ("report", "--route", ROUTE, "-o", record),
    ):
        r = trtls(*command, cwd=root)
        assert r.returncode == 2, (command, r.returncode, r.stdout[-1000:], r.stderr[-1000:])
        assert f"TRT109 is {what}" in r.stderr and "nothing written" in r.stderr, r.stderr
        assert hashlib.sha256(path.read_bytes()).hexdigest() == before, command
    # the bundle is still one trtls wrote: gate 3 accepts its sidecar and SBOM
    r = trtls("gates", "--route", ROUTE, "--gate", "3", cwd=root)
    assert "TRT703" in r.stdout and "REJECT TRT703" not in r.stdout and "HOLD   TRT708" not in r.stdout, r.stdout


def test_no_report_is_written_over_the_promotion_ledger(promoted: Path) -> None:
    """A ledger of one promotion is one JSON line: `gates --format json -o trtls.promotions.jsonl` replaced the
    hash-chained audit record with the report, and `route status` then called the ledger tampered. The ledger is
    protected like the lock file now (TRT109, nothing written); the route's own steps still append to it."""
    ledger = promoted / "trtls.promotions.jsonl"
    before = ledger.read_bytes()
    for command in (
        ("gates", "--route", ROUTE, "--gate", "1", "--format", "json", "-o", ledger.name),
        ("check", ".", "--format", "json", "-o", ledger.name),
    ):
        r = trtls(*command, cwd=promoted)
        assert r.returncode == 2 and "TRT109 is the promotion ledger" in r.stderr, (command, r.stdout, r.stderr)
        assert ledger.read_bytes() == before, command
    r = trtls("route", "canary", "--route", ROUTE, "start", "--approver", "ci@example.com", cwd=promoted)
    assert r.returncode == 0, r.stdout + r.stderr
    assert ledger.read_bytes().startswith(before) and len(ledger.read_bytes().splitlines()) == 2
