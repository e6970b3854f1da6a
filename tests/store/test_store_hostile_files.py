"""What a store holds is untrusted (issue 27, items 3, 11 and 17): a symlink planted at a key's lock, at its use
time or as an entry's folder, and an entry whose engine or record is /dev/zero, a FIFO or a device. Each is refused
before a byte is read or written through it; what it points to is never created, truncated, touched or filled.
Real symlinks, FIFOs and device nodes; the reads run in a child process, so a store that blocks or never ends
cannot hang or fill the test's disk."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tests.store.forged import forged_entry, run_python
from trtls.store.entries import Refused, Store
from trtls.store.lock import KeyLock


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "store")
    s.check()
    return s


def test_a_lock_is_never_opened_through_a_planted_symlink(store: Store, tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    dangling = tmp_path / "would-be-created"
    keys = ["1" * 64, "2" * 64]
    (store.root / "locks" / f"{keys[0]}.lock").symlink_to(victim)
    (store.root / "locks" / f"{keys[1]}.lock").symlink_to(dangling)
    for key in keys:
        lock = KeyLock(store.root, key)
        assert lock.try_acquire("build-1")  # the link is removed (the link itself) and the lock made in its place
        lock.release()
        path = store.root / "locks" / f"{key}.lock"
        assert not path.is_symlink() and stat.S_ISREG(path.lstat().st_mode)
    assert victim.read_text() == "precious" and not dangling.exists()


def test_a_link_planted_at_a_lock_in_a_read_only_store_means_no_lock_not_a_traceback(
    store: Store, tmp_path: Path
) -> None:
    """The hostile run's state (a link at the key's lock, the store's locks folder not writable): the link cannot be
    removed, so this process holds no lock (it cannot publish there anyway) — never an OSError, never the victim."""
    import subprocess

    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    key = "3" * 64
    (store.root / "locks" / f"{key}.lock").symlink_to(victim)
    locks = store.root / "locks"
    if subprocess.run(["chattr", "+i", str(locks)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not allowed here (needs root and a file system that supports it)")
    try:
        lock = KeyLock(store.root, key)
        assert lock.try_acquire("build-1")  # nothing to hold: was OSError EROFS/EPERM from removing the link
        assert lock._fd is None
        lock.release()
    finally:
        subprocess.run(["chattr", "-i", str(locks)], capture_output=True)
    assert (locks / f"{key}.lock").is_symlink() and victim.read_text() == "precious"


def test_a_use_time_is_never_touched_through_a_planted_symlink(store: Store, tmp_path: Path) -> None:
    entry = forged_entry(store, tmp_path, "used")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    os.utime(victim, (1_000_000, 1_000_000))
    dangling = tmp_path / "would-be-created"
    for target in (victim, dangling):
        used = store.root / "used" / entry.key
        used.unlink()
        used.symlink_to(target)
        store.mark_used(entry.key)
        assert not used.is_symlink() and used.is_file()
    assert victim.stat().st_mtime == 1_000_000 and victim.read_text() == "precious" and not dangling.exists()


def test_a_use_time_planted_as_a_hard_link_or_a_fifo_is_replaced_and_kept(store: Store, tmp_path: Path) -> None:
    """A second name of another file (the door refuses to touch it: its time would be the other file's) or a FIFO at
    `used/<key>` is replaced by a use-time file of the store's own, so eviction still sees the entry used now (it was
    left as it was, and the entry looked unused to LRU)."""
    entry = forged_entry(store, tmp_path, "used")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    os.utime(victim, (1_000_000, 1_000_000))
    used = store.root / "used" / entry.key
    for plant in (lambda: os.link(victim, used), lambda: os.mkfifo(used)):
        used.unlink()
        plant()
        store.mark_used(entry.key)
        assert used.is_file() and not used.is_symlink() and os.stat(used).st_nlink == 1
        assert store.last_used(entry.key) > 1_000_000
    assert victim.stat().st_mtime == 1_000_000 and victim.read_text() == "precious"


def test_an_entry_folder_that_is_a_symlink_is_refused_and_nothing_is_written_where_it_points(
    store: Store, tmp_path: Path
) -> None:
    entry = forged_entry(store, tmp_path, "linked")
    elsewhere = tmp_path / "elsewhere"
    (store.root / "entries" / entry.key).rename(elsewhere)  # a whole, valid entry, reached through a link
    (store.root / "entries" / entry.key).symlink_to(elsewhere)
    before = sorted(p.name for p in elsewhere.iterdir())
    with pytest.raises(Refused, match="symlink"):
        store.get(entry.key)
    assert sorted(p.name for p in elsewhere.iterdir()) == before  # no WHY written through the link
    assert not (store.root / "entries" / entry.key).exists()
    (moved,) = (store.root / "quarantine").iterdir()
    assert "symlink" in (moved / "WHY").read_text() and not moved.is_symlink()


READ = """
import json, sys
from pathlib import Path
from trtls.store.entries import Refused, Store
store = Store(Path(sys.argv[1]))
try:
    entry = store.get(sys.argv[2])
    kept = store.restore(entry, Path(sys.argv[3]), "t1", within=Path(sys.argv[3]).parent)
    print(json.dumps({"restored": True}))
except Refused as exc:
    print(json.dumps({"refused": str(exc)}))
"""


def _zero_device(path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    os.mknod(path, stat.S_IFCHR | 0o644, os.makedev(1, 5))  # /dev/zero's numbers


@pytest.mark.parametrize(
    ("part", "what"),
    [("engine", "link to /dev/zero"), ("engine", "device"), ("engine", "fifo"), ("engine", "larger"),
     ("entry.json", "link to /dev/zero"), ("entry.json", "device"), ("entry.json", "fifo")],
)  # fmt: skip
def test_an_entry_part_that_is_not_a_regular_file_of_its_size_is_refused_before_it_is_read(
    store: Store, tmp_path: Path, part: str, what: str
) -> None:
    entry = forged_entry(store, tmp_path, f"{part}-{what}".replace("/", "_"))
    target = entry.folder / part
    target.unlink()
    if what == "link to /dev/zero":
        target.symlink_to("/dev/zero")
    elif what == "device":
        _zero_device(target)
    elif what == "fifo":
        os.mkfifo(target)
    else:
        target.write_bytes(b"x" * (entry.size + 1))
    out = tmp_path / "out" / "demo.engine"
    out.parent.mkdir()
    done = run_python(READ, str(store.root), entry.key, str(out), timeout=60)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert "quarantined" in said.get("refused", ""), said
    assert "do not match" not in said["refused"]  # refused by what it is, before a byte was copied or hashed
    assert list(out.parent.iterdir()) == []  # nothing at the output, not even a temp file
    assert not (store.root / "entries" / entry.key).exists() and len(list((store.root / "quarantine").iterdir())) == 1
