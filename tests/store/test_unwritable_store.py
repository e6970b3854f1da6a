"""A `read_write` store this account cannot write still serves its engines (issue 32, item 9): `check` does not refuse
it (TRT331 was exit 2 on every miss and every full-path hit while the fast path served); the store is read for this
process — a hit restores, a miss builds, warns TRT331 and TRT333 and exits 0, nothing is written in the store (no use
time, no lock, no quarantine). Real builds against a store made unwritable by `chattr +i` (root), and two real Unix
accounts: Bob reads Alice's store (her folders, mode 0755) through the store's own calls."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.store.conftest import copy_store
from tests.store.helpers import run_build, summaries, with_store
from tests.store.test_two_accounts import ALICE, ALICE_PUBLISHES, BOB, GID, as_account
from trtls.fs.store_root import STORE_FOLDERS
from trtls.store.entries import Store


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.lstat().st_mtime_ns, p.lstat().st_size) for p in sorted(root.rglob("*"))}


@pytest.fixture
def frozen() -> Iterator[list[Path]]:
    """Folders made immutable (`chattr +i`: not even root writes them), made mutable again after the test."""
    made: list[Path] = []
    yield made
    for path in made:
        subprocess.run(["chattr", "-i", str(path)], capture_output=True)


def _freeze(store: Path, made: list[Path]) -> None:
    for sub in STORE_FOLDERS:
        (store / sub).mkdir(exist_ok=True)
        if subprocess.run(["chattr", "+i", str(store / sub)], capture_output=True).returncode != 0:
            pytest.skip("chattr +i is not allowed here (needs root and a file system that supports it)")
        made.append(store / sub)


def test_a_hit_from_a_store_this_account_cannot_write_restores_and_writes_nothing_there(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path, frozen: list[Path]
) -> None:
    store = copy_store(seeded, tmp_path)
    with_store(seed_ws, store)
    _freeze(store, frozen)
    before = _tree(store)
    done = run_build(seed_ws)
    assert done.returncode == 0, done.stderr  # was exit 2: TRT331 before the lookup
    summary = summaries(seed_ws)[-1]
    assert summary["outcome"] == "reused" and summary["engineKey"] == seeded[1]["engineKey"]
    engine = store / "entries" / seeded[1]["engineKey"] / "engine"
    assert (seed_ws / "build" / "demo.engine").read_bytes() == engine.read_bytes()
    assert _tree(store) == before  # no use time, no lock file, nothing in tmp/


def test_a_miss_in_a_store_this_account_cannot_write_builds_and_warns(
    workspace: Path, tmp_path: Path, frozen: list[Path]
) -> None:
    store = tmp_path / "store"
    Store(store).check()  # an empty store, made by trtls
    with_store(workspace, store)
    _freeze(store, frozen)
    before = _tree(store)
    done = run_build(workspace)
    assert done.returncode == 0, done.stderr
    summary = summaries(workspace)[-1]
    assert summary["outcome"] == "built" and (workspace / "build" / "demo.engine").is_file()
    assert summary["engineKey"] and summary["store"]["used"]
    said = " ".join(summary["store"]["warnings"])
    assert "TRT333" in said and "TRT331" in said and "not writable by this user" in said, said
    assert "TRT331" in done.stderr, done.stderr
    assert "TRT333" in done.stderr, done.stderr  # said after the build too (was sliced away by a count)
    assert _tree(store) == before


@pytest.fixture
def alices_store() -> Iterator[Path]:
    """A store Alice made under umask 022 (her folders, mode 0755): others of her group may read it, not write it."""
    if os.geteuid() != 0:
        pytest.skip("two accounts need root to set them up")
    base = Path(tempfile.mkdtemp(prefix="trtls-alice-", dir="/tmp"))
    base.chmod(0o755)
    try:
        for who, uid in (("store", ALICE), ("alice", ALICE), ("bob", BOB)):
            (base / who).mkdir()
            os.chown(base / who, uid, GID)
        yield base / "store"
    finally:
        shutil.rmtree(base, ignore_errors=True)


BOB_READS = """
import errno, json, sys
from pathlib import Path
from trtls.store.entries import Refused, Store
from trtls.store.key import key_of_parts
from trtls.store.lock import KeyLock
store, alice_key, damaged, out = Store(Path(sys.argv[1])), sys.argv[2], sys.argv[3], Path(sys.argv[4])
store.check()  # read_write as configured; not refused
said = {"mode": store.mode, "writable": store.writable, "notes": store.notes}
said["restored"] = store.restore(store.get(alice_key), out, "bob", within=out.parent)
said["kept"] = not store.restore(store.get(alice_key), out, "bob", within=out.parent)
parts = {"format": "forged", "forged": "bob"}
try:
    store.publish(key_of_parts(parts), parts, out, {"buildId": "bob-build"}, None)
except OSError as exc:
    said["publish"] = [exc.errno == errno.EROFS, exc.strerror]
lock = KeyLock(store.root, key_of_parts(parts))  # no lock file there, and none can be made: nothing held
said["unlockedBuild"] = lock.try_acquire("bob-build")
lock.release()
try:
    store.get(damaged)
except Refused as exc:
    said["damaged"] = str(exc)
said["evicted"] = [e.key for e in store.evict(max_size=1)]
print(json.dumps(said))
"""


def test_a_second_account_reuses_from_a_store_it_cannot_write_and_writes_nothing(alices_store: Path) -> None:
    keys = []
    for tag in ("one", "two"):
        engine = alices_store.parent / "alice" / f"{tag}.engine"
        engine.write_bytes(f"alice's {tag} engine ".encode() * 200)
        os.chown(engine, ALICE, GID)
        made = as_account(
            ALICE, ALICE_PUBLISHES.replace('"alice"}', f'"alice-{tag}"}}'), str(alices_store), str(engine)
        )
        assert made.returncode == 0, made.stderr
        keys.append(json.loads(made.stdout)["key"])
    (alices_store / "entries" / keys[1] / "engine").unlink()  # damaged: Bob may not move it aside
    before = _tree(alices_store)
    out = alices_store.parent / "bob" / "demo.engine"
    bob = as_account(BOB, BOB_READS, str(alices_store), keys[0], keys[1], str(out))
    assert bob.returncode == 0, bob.stderr
    said = json.loads(bob.stdout)
    note = f"TRT331 the store folder {alices_store}"
    assert said["mode"] == "read_write" and not said["writable"]
    (only,) = said["notes"]
    assert only.startswith(note) and f"(owner uid {ALICE}, mode 0755)" in only and "none is published" in only
    assert (
        said["restored"]
        and said["kept"]
        and out.read_bytes() == (alices_store.parent / "alice" / "one.engine").read_bytes()
    )
    assert said["publish"] == [True, only]
    assert said["unlockedBuild"] is True
    assert "engine file is missing" in said["damaged"]
    assert said["evicted"] == []
    assert _tree(alices_store) == before  # no use time, no lock, no quarantine, no eviction: Alice's store as it was
