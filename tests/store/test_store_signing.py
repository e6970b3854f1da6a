"""A team's store with a signing key (issue 27, item 12): an entry is used only when its record carries the team's
HMAC, so forging an engine takes the key, not only write access to the store. A forged entry that is whole and
self-consistent (engine bytes and record rewritten together, the attack of item 12) is refused, in `mode = "read"`
too; a real `trtls build` signs what it publishes when TRTLS_STORE_KEY_FILE names the key."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from tests.store.conftest import copy_store
from tests.store.forged import forged_entry
from tests.store.helpers import entries, run_build, summaries, with_store
from trtls.store.entries import NotTrusted, Store, StoreUnusable


@pytest.fixture
def team_key(tmp_path: Path) -> Path:
    path = tmp_path / "team.key"
    path.write_text(os.urandom(32).hex() + "\n")
    path.chmod(0o600)
    return path


def forge(folder: Path, data: bytes) -> None:
    """Rewrite an entry's engine and its record together: whole and self-consistent, and not the team's."""
    (folder / "engine").write_bytes(data)
    record = json.loads((folder / "entry.json").read_text())
    record["engine"] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    (folder / "entry.json").write_text(json.dumps(record))


def test_a_forged_entry_is_refused_and_a_signed_one_is_used(tmp_path: Path, team_key: Path) -> None:
    store = Store(tmp_path / "store", signing_key_file=team_key)
    store.check()
    entry = forged_entry(store, tmp_path, "signed")  # published with the key: signed
    assert str(entry.record["signature"]).startswith("hmac-sha256:")
    out = tmp_path / "out" / "demo.engine"
    out.parent.mkdir()
    assert store.restore(entry, out, "t1", within=out.parent) and out.read_bytes() == entry.engine.read_bytes()
    forge(entry.folder, b"a forged engine " * 40)
    for reader in (store, Store(tmp_path / "store", "read", signing_key_file=team_key)):
        with pytest.raises(NotTrusted, match="not signed with the team's key"):
            reader.get(entry.key)
    assert (entry.folder / "engine").read_bytes() == b"a forged engine " * 40  # refused, not "repaired" in place
    fresh = tmp_path / "fresh.engine"
    fresh.write_bytes(b"the team's engine " * 40)
    again = store.publish(entry.key, entry.record["parts"], fresh, {"buildId": "again"}, None)
    assert again.engine.read_bytes() == fresh.read_bytes() and store.replaced is not None  # the forgery replaced


def test_a_signing_key_that_cannot_be_used_refuses_the_store(tmp_path: Path) -> None:
    short = tmp_path / "short.key"
    short.write_text("too short")
    for key in (short, tmp_path / "missing.key"):
        with pytest.raises(StoreUnusable, match="signing key") as refused:
            Store(tmp_path / "store", signing_key_file=key).check()
        assert refused.value.code == "TRT340"


def test_a_build_signs_what_it_publishes_and_refuses_what_the_team_did_not_sign(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path, team_key: Path
) -> None:
    store = copy_store(seeded, tmp_path)  # the seed's entry was published without a key: not the team's
    with_store(seed_ws, store)
    env = {**os.environ, "TRTLS_STORE_KEY_FILE": str(team_key)}
    done = run_build(seed_ws, env=env)
    assert done.returncode == 0, done.stderr
    (s,) = summaries(seed_ws)
    assert s["outcome"] == "built", "an entry the team did not sign was used"
    assert any("not signed with the team's key" in w for w in s["store"]["warnings"]), s["store"]
    assert s["store"]["signingKey"] == str(team_key)
    (folder,) = entries(store)
    assert json.loads((folder / "entry.json").read_text())["signature"].startswith("hmac-sha256:")
    (seed_ws / "build" / "demo.engine").unlink()
    again = run_build(seed_ws, env=env)
    assert again.returncode == 0 and summaries(seed_ws)[-1]["outcome"] == "reused", again.stderr
