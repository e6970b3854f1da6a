"""Two Unix accounts share one store under the default umask 022 (issue 32, item 3): a team's store (its root
setgid and group-writable, `trust = "group"`) gets group-writable folders and files from every account, so the
second account reuses, locks, marks use, evicts and quarantines what the first one made — and a lock file the
other account left is still locked (read-only: `flock` needs no write access). Two real accounts: child processes
that drop to their own uid, the group's gid and umask 022 before touching the store (root sets them up)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

GID, ALICE, BOB = 40000, 40001, 40002

ALICE_PUBLISHES = """
import json, sys
from pathlib import Path
from trtls.store.entries import Store
from trtls.store.key import key_of_parts
from trtls.store.lock import KeyLock
store, engine = Store(Path(sys.argv[1])), Path(sys.argv[2])
store.check()
parts = {"format": "forged", "forged": "alice"}
key = key_of_parts(parts)
lock = KeyLock(store.root, key)
assert lock.try_acquire("alice-build")
entry = store.publish(key, parts, engine, {"buildId": "alice-build"}, None)
lock.release()  # the lock file stays, Alice's
print(json.dumps({"key": key, "size": entry.size}))
"""

BOB_SHARES = """
import json, sys
from pathlib import Path
from trtls.store.entries import Store
from trtls.store.key import key_of_parts
from trtls.store.lock import KeyLock
store, alice_key, out = Store(Path(sys.argv[1])), sys.argv[2], Path(sys.argv[3])
store.check()  # read_write: not TRT331 although Alice made every folder
said = {"restored": store.restore(store.get(alice_key), out, "bob", within=out.parent)}
lock = KeyLock(store.root, alice_key)
said["locked"] = lock.try_acquire("bob-build")  # Alice's lock file
lock.release()
store.mark_used(alice_key)
parts = {"format": "forged", "forged": "bob"}
said["bobKey"] = store.publish(key_of_parts(parts), parts, out, {"buildId": "bob-build"}, None).key
said["evicted"] = [e.key for e in store.evict(keep=said["bobKey"], max_size=1)]
print(json.dumps(said))
"""

ALICE_QUARANTINES = """
import sys
from pathlib import Path
from trtls.store.entries import Store
store = Store(Path(sys.argv[1]))
store.quarantine(store.root / "entries" / sys.argv[2], "a test says so")
"""


BECOME = """
import json, os, sys, traceback
from pathlib import Path
import trtls.store.entries, trtls.store.lock, trtls.store.key  # imported as root: the interpreter lives in /root
import math, shutil  # and the standard library trtls imports where it is used (fs.remove_tree, store.stats)
os.setgroups([{gid}])
os.setgid({gid})
os.setuid({uid})  # from here on every file system call is the account's
os.umask(0o022)
"""


def as_account(uid: int, code: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TRTLS_STORE_TRUST": "group", "HOME": "/nonexistent"}
    return subprocess.run(
        [sys.executable, "-c", BECOME.format(gid=GID, uid=uid) + code, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.fixture
def team_store() -> Iterator[Path]:
    if os.geteuid() != 0:
        pytest.skip("two accounts need root to set them up")
    base = Path(tempfile.mkdtemp(prefix="trtls-team-", dir="/tmp"))
    base.chmod(0o755)
    try:
        store = base / "store"
        store.mkdir()
        os.chown(store, 0, GID)
        store.chmod(0o2775)  # the team's folder: setgid, group-writable
        for who in ("alice", "bob"):
            (base / who).mkdir()
            os.chown(base / who, ALICE if who == "alice" else BOB, GID)
        yield store
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_second_account_reuses_locks_evicts_and_a_first_quarantines_in_a_shared_store(team_store: Path) -> None:
    engine = team_store.parent / "alice" / "alice.engine"
    engine.write_bytes(b"alice's engine " * 200)
    first = as_account(ALICE, ALICE_PUBLISHES, str(team_store), str(engine))
    assert first.returncode == 0, first.stderr
    alice = json.loads(first.stdout)
    out = team_store.parent / "bob" / "demo.engine"
    second = as_account(BOB, BOB_SHARES, str(team_store), alice["key"], str(out))
    assert second.returncode == 0, second.stderr
    bob = json.loads(second.stdout)
    assert bob["restored"] and bob["locked"] and out.read_bytes() == engine.read_bytes()
    assert bob["evicted"] == [alice["key"]]  # Bob removed Alice's entry: really gone, not only reported
    assert sorted(p.name for p in (team_store / "entries").iterdir()) == [bob["bobKey"]]
    third = as_account(ALICE, ALICE_QUARANTINES, str(team_store), bob["bobKey"])
    assert third.returncode == 0, third.stderr
    assert list((team_store / "entries").iterdir()) == [] and len(list((team_store / "quarantine").iterdir())) == 1
    assert list((team_store / "tmp").iterdir()) == []


ALICE_LEAVES_A_PRIVATE_LOCK = """
import os, sys
from pathlib import Path
os.makedirs(Path(sys.argv[1]) / "locks", exist_ok=True)
os.umask(0o077)  # a lock file made before trtls applied the store's mode, by an account whose umask is 077
os.close(os.open(Path(sys.argv[1]) / "locks" / (sys.argv[2] + ".lock"), os.O_CREAT | os.O_RDWR, 0o600))
"""

BOB_LOCKS_THE_KEY = """
import json, sys
from pathlib import Path
from trtls.store.lock import KeyLock
lock = KeyLock(Path(sys.argv[1]), sys.argv[2])
said = {"acquired": lock.try_acquire("bob-build"), "note": lock.note}
lock.release()
print(json.dumps(said))
"""


def test_a_lock_file_another_account_left_unreadable_is_a_located_warning_not_a_traceback(team_store: Path) -> None:
    """Issue 32 item 3, the lock's half: a lock file Bob can neither write nor read (Alice's, mode 0600) made his
    `trtls build` of that key end in a PermissionError traceback. Now the key is built without single flight and the
    warning names the file, its owner and its mode."""
    key = "a" * 64
    left = as_account(ALICE, ALICE_LEAVES_A_PRIVATE_LOCK, str(team_store), key)
    assert left.returncode == 0, left.stderr
    lock_file = team_store / "locks" / f"{key}.lock"
    assert lock_file.stat().st_uid == ALICE and lock_file.stat().st_mode & 0o777 == 0o600
    bob = as_account(BOB, BOB_LOCKS_THE_KEY, str(team_store), key)
    assert bob.returncode == 0, bob.stderr
    said = json.loads(bob.stdout)
    assert said["acquired"] is True  # Bob builds the key
    assert said["note"].startswith(f"TRT331 the lock file {lock_file} (owner uid {ALICE}, mode 0600)")
    assert lock_file.stat().st_uid == ALICE  # not removed: Alice may hold it now


ALICE_PUBLISHES_TWO_PRIVATE = """
import json, os, sys
from pathlib import Path
from trtls.store.entries import Store
from trtls.store.key import key_of_parts
store, engine = Store(Path(sys.argv[1])), Path(sys.argv[2])
store.check()
keys = []
for name in ("damaged", "whole"):
    parts = {"format": "forged", "forged": name}
    keys.append(store.publish(key_of_parts(parts), parts, engine, {"buildId": name}, None).key)
for key in keys:  # her entries as an older trtls left them: not group-writable
    folder = store.root / "entries" / key
    os.chmod(folder, 0o2755)
with open(store.root / "entries" / keys[0] / "engine", "r+b") as fh:
    fh.truncate(10)
print(json.dumps(keys))
"""

BOB_MEETS_THEM = """
import json, sys
from pathlib import Path
from trtls.store.entries import Refused, Store
store = Store(Path(sys.argv[1]))
store.check()
said = {}
try:
    store.get(sys.argv[2])
    said["refused"] = None
except Refused as exc:
    said["refused"] = str(exc)
said["evicted"] = [e.key for e in store.evict(max_size=1)]
said["left"] = store.left_in_place
print(json.dumps(said))
"""


def test_an_entry_another_account_left_unmovable_is_refused_and_kept_with_its_owner_named(team_store: Path) -> None:
    """Issue 32 item 3, quarantine and eviction: an entry folder another account made without group write (an older
    trtls, mode 2755) cannot be moved by Bob. Its damage was said as 'could not be moved to quarantine/' with no why,
    and `gc`'s eviction skipped it in silence; now both name the folder, the error and its owner."""
    engine = team_store.parent / "alice" / "alice.engine"
    engine.write_bytes(b"alice's engine " * 200)
    first = as_account(ALICE, ALICE_PUBLISHES_TWO_PRIVATE, str(team_store), str(engine))
    assert first.returncode == 0, first.stderr
    damaged, whole = json.loads(first.stdout)
    second = as_account(BOB, BOB_MEETS_THEM, str(team_store), damaged)
    assert second.returncode == 0, second.stderr
    said = json.loads(second.stdout)
    located = f"could not be moved: Permission denied (owner uid {ALICE}, mode 2755)"
    assert said["refused"] is not None and f"{team_store / 'entries' / damaged} {located}" in said["refused"]
    assert said["evicted"] == []  # not Bob's to remove: nothing claimed
    assert f"{team_store / 'entries' / whole} {located}" in said["left"]
    assert sorted(p.name for p in (team_store / "entries").iterdir()) == sorted([damaged, whole])


BOB_COLLECTS = """
import sys
from trtls.cli.main import main  # imported as root, as BECOME's modules are
import trtls.cli.store, trtls.store.config
"""


def test_gc_says_each_entry_it_could_not_remove_and_exits_1(team_store: Path) -> None:
    """`trtls store gc` printed only how many entries it evicted: Alice's two private entries (mode 2755), which Bob
    cannot move, were left over the bound in silence, exit 0. Now each is said — the folder, the error, its owner —
    and the command exits 1."""
    engine = team_store.parent / "alice" / "alice.engine"
    engine.write_bytes(b"alice's engine " * 200)
    first = as_account(ALICE, ALICE_PUBLISHES_TWO_PRIVATE, str(team_store), str(engine))
    assert first.returncode == 0, first.stderr
    keys = json.loads(first.stdout)
    code = BOB_COLLECTS + BECOME.format(gid=GID, uid=BOB) + "sys.exit(main(sys.argv[1:]))"
    argv = ["store", "gc", "--max-size", "1"]  # no recipe in Bob's folder: the store TRTLS_STORE names
    env = {**os.environ, "TRTLS_STORE_TRUST": "group", "HOME": "/nonexistent", "TRTLS_STORE": str(team_store)}
    bob = subprocess.run(
        [sys.executable, "-c", code, *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=team_store.parent / "bob",
        timeout=120,
    )
    assert bob.returncode == 1 and "Traceback" not in bob.stderr, bob.stdout + bob.stderr
    for key in keys:
        left = f"  left in place: {team_store / 'entries' / key} could not be moved: Permission denied"
        assert f"{left} (owner uid {ALICE}, mode 2755)" in bob.stdout, bob.stdout
    assert bob.stdout.count("left in place: ") == 2, "each entry once"
    assert "evicted 0 entries" in bob.stdout and "2 entries could not be removed (left in place)" in bob.stdout
    assert sorted(p.name for p in (team_store / "entries").iterdir()) == sorted(keys)
