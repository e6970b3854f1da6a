"""`trtls route rollback` looks for the bundle to roll back to at the route's own paths and at the path the
promotion's ledger record names (its rollback artifact). A ledger line is text anyone with the repository can
write — its chain digests are recomputable — and an edited one naming a file outside the recipe folder had trtls
read that file, record it as the promoted bundle and exit 0 ("/elsewhere/x.bundle holds the promoted bundle now").
A path out of the ledger is now looked at only inside the recipe's real folder; the route's own paths still are."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from _lifecycle_sample import ROUTE, trtls

from trtls.gates.lifecycle.ledger import record_digest


@pytest.fixture
def root(promoted: Path) -> Path:
    return promoted


def forge_rollback_artifact(root: Path, path: str, data: bytes) -> None:
    """The only promotion record, its rollback artifact pointed at `path` holding `data`, its digest recomputed."""
    ledger = root / "trtls.promotions.jsonl"
    (line,) = ledger.read_text().splitlines()
    record = json.loads(line)
    record["rollback_artifact"] = {"path": path, "digest": "sha256:" + hashlib.sha256(data).hexdigest()}
    record["record_sha256"] = record_digest(record)
    ledger.write_text(json.dumps(record, sort_keys=True, separators=(",", ":")) + "\n")


def test_a_ledger_path_out_of_the_recipe_folder_is_never_read(root: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere" / "other.bundle"
    outside.parent.mkdir()
    outside.write_bytes(b"another project's bundle")
    for path in (str(outside), "../elsewhere/other.bundle"):
        forge_rollback_artifact(root, path, outside.read_bytes())
        before = (root / "trtls.promotions.jsonl").read_bytes()
        r = trtls("route", "rollback", "--route", ROUTE, "--approver", "ci@example.com", cwd=root)
        assert r.returncode == 3, (path, r.stdout, r.stderr)
        assert "no file holds bundle" in r.stdout + r.stderr and "other.bundle" not in r.stdout + r.stderr
        assert (root / "trtls.promotions.jsonl").read_bytes() == before  # the pointer was not moved


def test_a_ledger_path_inside_the_recipe_folder_is_still_found(root: Path) -> None:
    kept = root / "build" / "kept.bundle"
    shutil.copyfile(root / "releases" / f"{ROUTE}-previous.bundle", kept)
    forge_rollback_artifact(root, "build/kept.bundle", kept.read_bytes())
    (root / "releases" / f"{ROUTE}-previous.bundle").unlink()
    r = trtls("route", "rollback", "--route", ROUTE, "--approver", "ci@example.com", cwd=root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "build/kept.bundle holds the promoted bundle now" in r.stdout
