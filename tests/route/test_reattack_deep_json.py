"""A route record nested deeper than Python's JSON parser's stack (`[` × 200,000: a few hundred KB, far under every
record's size bound) is a bad record like any other: `trtls route status|promote|rollback` say what they can and
never end in a traceback. Before, each of these files raised RecursionError out of the command: the promotion
ledger, the last complete gates summary, the exports record, the checkpoint digest cache, trtls.lock.json and the
bundle's sidecar."""

from __future__ import annotations

from pathlib import Path

import pytest
from _lifecycle_sample import ROUTE, trtls

DEEP = "[" * 200_000
RECORDS = [
    "trtls.promotions.jsonl",
    f".trtls/routes/{ROUTE}/complete-summary.json",
    f".trtls/routes/{ROUTE}/exports.json",
    ".trtls/digests.json",
    "trtls.lock.json",
    f"build/{ROUTE}.bundle.trtls.json",
]


@pytest.fixture
def root(promoted: Path) -> Path:
    return promoted


@pytest.mark.parametrize("record", RECORDS)
def test_a_record_nested_too_deeply_is_a_bad_record_not_a_traceback(root: Path, record: str) -> None:
    path = root / record
    assert path.is_file(), record
    path.write_text(DEEP + "\n")
    for command in ("status", "promote", "rollback"):
        r = trtls("route", command, "--route", ROUTE, "--approver", "ci@example.com", cwd=root)
        assert "Traceback" not in r.stderr and "RecursionError" not in r.stderr, (record, command, r.stderr[-2000:])
        assert r.returncode in (0, 2, 3, 4), (record, command, r.returncode, r.stdout, r.stderr)
    if record == "trtls.promotions.jsonl":  # a ledger trtls cannot read is tampered: exit 4, never appended to
        r = trtls("route", "status", "--route", ROUTE, cwd=root)
        assert r.returncode == 4 and "not a JSON record" in r.stdout + r.stderr, r.stdout + r.stderr
        assert path.read_text() == DEEP + "\n"


@pytest.mark.parametrize("name", ["config.json", "tokenizer_config.json"])
def test_a_checkpoint_json_nested_too_deeply_is_a_file_that_does_not_parse(prepared: Path, tmp_path: Path, name: str):
    """The checkpoint's own JSON files (config.json, a tokenizer's) are read by gate 1 and by `route build`'s preflight:
    nested deeper than the parser's stack, `route build` ended in a RecursionError traceback and gate 1 said "could
    not run: RecursionError". It is a file that does not parse now (TRT504/TRT511 hold), and the build is refused
    located (the lock sees the changed file too)."""
    from _lifecycle_sample import copy

    root = copy(prepared, tmp_path / "route")
    (snapshot,) = (root / "checkpoints" / "models--trtls--tiny-mlp" / "snapshots").iterdir()
    (snapshot / name).unlink()  # a link into blobs/: the damaged file replaces the link, the blob stays
    (snapshot / name).write_text(DEEP + "]" * 200_000)
    r = trtls("route", "build", "--route", ROUTE, cwd=root)
    assert "Traceback" not in r.stderr and "RecursionError" not in r.stdout + r.stderr, r.stderr[-2000:]
    assert r.returncode == 4 and "gate 1 refuses the checkpoint" in r.stdout + r.stderr, (r.stdout, r.stderr)
    r = trtls("gates", "--route", ROUTE, "--gate", "1", cwd=root)
    assert "RecursionError" not in r.stdout and f"{name}" in r.stdout, r.stdout
    assert "nested deeper than the JSON parser can read" in r.stdout, r.stdout
    if name == "config.json":  # built anyway: the route build's own read of it says the same, located
        r = trtls("route", "build", "--route", ROUTE, "--unverified-checkpoint", cwd=root)
        assert "Traceback" not in r.stderr and r.returncode == 2, (r.returncode, r.stderr[-2000:])
        assert "config.json does not parse: nested deeper than the JSON parser can read" in r.stderr, r.stderr
