"""`trtls store ls --json` rows say what the store says: an entry's build record (free text a publisher wrote) was
spread over the row after its key, size and last use, so a record holding `"key": "../../../home"` gave a script
that removes `entries/<key>` a path of the attacker's choosing. And a signing key that cannot be read (a FIFO, a
missing file) refused every entry one by one (`the signing key No such file or directory`) and exited 0, where a
build says TRT340 once and exits 2. Real store, real `trtls` processes, a real FIFO."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.store.forged import forged_entry
from trtls.store.entries import Store
from trtls.store.key import key_of_parts


def test_a_build_record_never_overrides_the_key_size_or_use_time(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    store.check()
    plain = forged_entry(store, tmp_path, "plain")
    parts = {"format": "forged", "forged": "liar"}
    engine = tmp_path / "liar.engine"
    engine.write_bytes(b"x" * 300)
    lie = {"buildId": "b", "engine": "e", "key": "../../../home", "size": 1, "lastUsed": 9e99, "verified": True}
    store.publish(key_of_parts(parts), parts, engine, lie, None)
    (tmp_path / "trtls.toml").write_text(f'[store]\npath = "{store.root}"\n')
    for args in (("--json",), ("--json", "--verify")):
        done = subprocess.run(
            [sys.executable, "-m", "trtls", "store", "ls", *args], cwd=tmp_path, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        rows = {r["key"]: r for r in json.loads(done.stdout)}
        assert sorted(rows) == sorted([plain.key, key_of_parts(parts)])
        liar = rows[key_of_parts(parts)]
        assert liar["size"] == 300 and liar["lastUsed"] < 9e99 and liar["buildId"] == "b"
        assert liar.get("verified") is (True if "--verify" in args else None), "the record claimed it verified"


def test_a_signing_key_that_cannot_be_used_is_said_once_like_a_build_says_it(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    store.check()
    forged_entry(store, tmp_path, "plain")
    (tmp_path / "trtls.toml").write_text(f'[store]\npath = "{store.root}"\n')
    os.mkfifo(tmp_path / "key.fifo")
    for key, why in ((tmp_path / "key.fifo", "is not a regular file"), (tmp_path / "none", "No such file")):
        env = {**os.environ, "TRTLS_STORE_KEY_FILE": str(key)}
        done = subprocess.run(
            [sys.executable, "-m", "trtls", "store", "ls"], cwd=tmp_path, capture_output=True, text=True, env=env
        )
        assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
        expected = f"{store.root}: TRT340 the store is not trusted: its signing key {key} cannot be used: {why}"
        assert done.stderr.startswith(expected), done.stderr


@pytest.mark.parametrize("linked", ["entries", "quarantine", "tmp"])
def test_ls_and_gc_never_read_or_sweep_through_a_store_folder_swapped_for_a_link(tmp_path: Path, linked: str) -> None:
    """A build refused a store whose `entries` is a symlink (TRT339), but `store ls` listed the entries of the folder
    it named, read their records and tried to move a damaged one aside; now both say what a build says."""
    store = Store(tmp_path / "store")
    store.check()
    entry = forged_entry(store, tmp_path, "elsewhere")
    (entry.folder / "engine").write_bytes(b"cut")  # damaged: a listing would try to quarantine it
    outside = tmp_path / "outside"
    outside.mkdir()
    os.rename(store.root / linked, outside / linked)
    (store.root / linked).symlink_to(outside / linked)
    before = sorted(str(p.relative_to(outside)) for p in outside.rglob("*"))
    (tmp_path / "trtls.toml").write_text(f'[store]\npath = "{store.root}"\n')
    for action in ("ls", "gc"):
        done = subprocess.run(
            [sys.executable, "-m", "trtls", "store", action], cwd=tmp_path, capture_output=True, text=True
        )
        assert done.returncode == 2 and done.stdout == "", done.stdout + done.stderr
        said = f"{store.root}: TRT339 the store's {linked} is a symlink or not a folder: {store.root / linked}"
        assert done.stderr.startswith(said), done.stderr
    assert sorted(str(p.relative_to(outside)) for p in outside.rglob("*")) == before
