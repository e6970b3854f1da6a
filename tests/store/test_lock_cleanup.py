"""Issue 32 item 3, the locks' half: `locks/<key>.lock` files were never removed — not when their entry was evicted,
not by `trtls store gc` — so a store's `locks/` grew by one file per key ever built, and a key whose lock file another
account left stayed that account's. Now an eviction removes its key's lock file and `store gc` sweeps every lock file
no build holds (said in its report), each locked first and unlinked only while it is still the file at its name
(never through a symlink); a build that opened a lock file just before a sweep removed it locks the new one."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.store.forged import forged_entry
from tests.store.test_two_accounts import ALICE, BOB, as_account, team_store  # noqa: F401  (a fixture)
from trtls.cli.main import main
from trtls.store.entries import Store
from trtls.store.lock import KeyLock, clean_locks


def _gc(store: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """`trtls store gc` of the store TRTLS_STORE names (no recipe in the folder it runs in); its stdout."""
    monkeypatch.setenv("TRTLS_STORE", str(store))
    monkeypatch.chdir(store.parent)
    capsys.readouterr()
    assert main(["store", "gc", *args]) == 0
    return capsys.readouterr().out


def test_gc_removes_the_lock_files_no_build_holds_and_keeps_the_held_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = Store(tmp_path / "store")
    store.check()
    locks = store.root / "locks"
    for key in ("a" * 64, "b" * 64):
        lock = KeyLock(store.root, key)
        assert lock.try_acquire("an earlier build")
        lock.release()  # left behind, as every build's was
    held = KeyLock(store.root, "c" * 64)
    assert held.try_acquire("a build running now")
    target = tmp_path / "precious.txt"
    target.write_text("not a lock")
    (locks / f"{'d' * 64}.lock").symlink_to(target)  # a link at a lock's name: never followed, not counted
    (locks / "notes.txt").write_text("someone's")  # not a name trtls makes: left alone
    try:
        out = _gc(store.root, monkeypatch, capsys)
        assert "2 unheld lock files removed" in out, out
        assert sorted(p.name for p in locks.iterdir()) == sorted([f"{'c' * 64}.lock", f"{'d' * 64}.lock", "notes.txt"])
        assert target.read_text() == "not a lock"
        assert held.holder().endswith("a build running now")  # the holder's file, untouched
    finally:
        held.release()
    assert clean_locks(store.root) == 1  # released now: the next sweep takes it


def test_an_evicted_entry_takes_its_lock_file_with_it_unless_a_build_holds_it(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    store.check()
    first, second = forged_entry(store, tmp_path, "first"), forged_entry(store, tmp_path, "second")
    for entry in (first, second):
        lock = KeyLock(store.root, entry.key)
        assert lock.try_acquire("its build")
        lock.release()
    rebuilding = KeyLock(store.root, second.key)
    assert rebuilding.try_acquire("a --rebuild of the second key")
    try:
        assert store.remove(first.key) and store.remove(second.key)
        assert not (store.root / "locks" / f"{first.key}.lock").exists()
        assert (store.root / "locks" / f"{second.key}.lock").exists()  # held: a build of it runs now
    finally:
        rebuilding.release()


def test_a_build_that_opened_a_lock_file_a_sweep_then_removed_locks_the_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race a sweep opens: a build opens `<key>.lock`, the sweep locks and unlinks it, the build then locks the
    unlinked file — and a third process, finding no file, would make and lock another: two builders of one key. The
    build sees its locked file no longer has the name and locks what has it now."""
    store = Store(tmp_path / "store")
    store.check()
    key = "e" * 64
    earlier = KeyLock(store.root, key)
    assert earlier.try_acquire("an earlier build")
    earlier.release()
    lock = KeyLock(store.root, key)
    opened = KeyLock._open
    swept: list[int] = []

    def open_then_swept(self: KeyLock) -> int | None:
        fd = opened(self)
        if not swept:
            swept.append(clean_locks(store.root))  # between this build's open and its flock
        return fd

    monkeypatch.setattr(KeyLock, "_open", open_then_swept)
    assert lock.try_acquire("this build")
    try:
        assert swept == [1]
        other = KeyLock(store.root, key)
        assert not other.try_acquire("a third process")  # the file at the name is the one this build holds
        assert lock.holder().endswith("this build")
    finally:
        lock.release()


ALICE_BUILDS_TWO_KEYS = """
import sys
from pathlib import Path
from trtls.store.entries import Store
from trtls.store.lock import KeyLock
store = Store(Path(sys.argv[1]))
store.check()
for key in sys.argv[2:]:
    lock = KeyLock(store.root, key)
    assert lock.try_acquire("alice-build")
    lock.release()  # her lock file stays (group-writable: the store's mode)
"""

ALICE_LEAVES_A_PRIVATE_LOCK = """
import os, sys
from pathlib import Path
os.umask(0o077)  # made before trtls applied the store's mode: Bob can neither write nor read it
os.close(os.open(Path(sys.argv[1]) / "locks" / (sys.argv[2] + ".lock"), os.O_CREAT | os.O_RDWR, 0o600))
"""

BOB_COLLECTS = """
import json, sys
from pathlib import Path
from trtls.store.lock import clean_locks
print(json.dumps(clean_locks(Path(sys.argv[1]))))
"""


def test_gc_of_another_account_removes_the_lock_files_it_left_but_one_it_cannot_open(team_store: Path) -> None:  # noqa: F811
    """Alice's lock files in a team's store (group-writable `locks/`): Bob's `store gc` removes them — an unheld lock
    is no one's — but not one he can neither read nor write (mode 0600): he cannot tell whether she holds it."""
    shared, private = "1" * 64, "2" * 64
    built = as_account(ALICE, ALICE_BUILDS_TWO_KEYS, str(team_store), shared, private)
    assert built.returncode == 0, built.stderr
    locks = team_store / "locks"
    (locks / f"{private}.lock").unlink()
    left = as_account(ALICE, ALICE_LEAVES_A_PRIVATE_LOCK, str(team_store), private)
    assert left.returncode == 0, left.stderr
    assert {p.stat().st_uid for p in locks.iterdir()} == {ALICE}
    bob = as_account(BOB, BOB_COLLECTS, str(team_store))
    assert bob.returncode == 0, bob.stderr
    assert json.loads(bob.stdout) == 1
    assert [p.name for p in locks.iterdir()] == [f"{private}.lock"]
    assert os.stat(locks / f"{private}.lock").st_uid == ALICE


def test_a_file_system_whose_names_and_descriptors_never_agree_still_locks_and_never_loops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The check after the lock follows a swept file a few times, not forever: where a name's (st_dev, st_ino) never
    matches its descriptor's, the key is locked as it was before sweeps existed (no RecursionError, no endless wait)."""
    import trtls.store.lock as lock_module

    store = Store(tmp_path / "store")
    store.check()
    asked: list[int] = []

    def never(fd: int, path: Path) -> bool:
        asked.append(fd)
        return False

    monkeypatch.setattr(lock_module, "_still_named", never)
    lock = KeyLock(store.root, "f" * 64)
    try:
        assert lock.try_acquire("this build") and len(asked) == 3
    finally:
        lock.release()
