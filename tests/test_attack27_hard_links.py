"""A hard link planted where trtls changes a file in place (issue 27, tried again after items 3 and 10): O_NOFOLLOW
refuses a symlink, not a second name of a file. A build wrote its output lock's holder line into `.trtls/locks/<x>.lock`
in place, so a hard link to the recipe there truncated `trtls.toml` to the holder line (then to nothing). Now every
in-place change of the door — a lock's holder line, an append, a stream, a touch, a mode — refuses a file with more
than one name and leaves it as it was. Real builds, real hard links, real files."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trtls import fs
from trtls.builds.supervisor.output_lock import lock_path
from trtls.core.paths import UnsafeWrite
from trtls.fs import Kind
from trtls.fs.stream import open_stream


def test_a_hard_link_to_the_recipe_at_the_output_lock_leaves_the_recipe_whole(workspace: Path) -> None:
    recipe = workspace / "trtls.toml"
    before = recipe.read_bytes()
    lock = lock_path(workspace / ".trtls" / "locks", workspace / "build" / "demo.engine")
    lock.parent.mkdir(parents=True)
    os.link(recipe, lock)  # the lock's name is now a second name of the recipe

    done = subprocess.run(
        [sys.executable, "-m", "trtls", "build", str(workspace), "--engine", "demo"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    text = done.stdout + done.stderr
    assert recipe.read_bytes() == before, "the recipe was rewritten through the output lock's hard link"
    assert done.returncode == 1 and "TRT411" in text and "hard link" in text, text
    assert "Traceback" not in text and "[Errno" not in text, text
    assert not (workspace / "build" / "demo.engine").exists()  # nothing was built without the lock


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim.toml"
    victim.write_text("[engines.mine]\n")
    return victim


@pytest.mark.parametrize(
    "change",
    [
        lambda p, w: fs.append_text(p, "a line\n", kind=Kind.store_stats, within=w),
        lambda p, w: open_stream(p, kind=Kind.evidence, within=w).close(),  # truncates a stream it opens
        lambda p, w: open_stream(p, kind=Kind.evidence, within=w, truncate=False).write(b"x"),
        lambda p, w: os.close(fs.open_lock_file(p, kind=Kind.store_lock, within=w)),
        lambda p, w: fs.touch(p, kind=Kind.store_entry, within=w),
        lambda p, w: fs.chmod(p, 0o666, kind=Kind.store_entry, within=w),
    ],
    ids=["append", "stream", "stream-append", "lock", "touch", "chmod"],
)
def test_the_door_never_changes_a_file_in_place_through_a_second_name(tmp_path: Path, change: object) -> None:
    victim = _victim(tmp_path)
    os.chmod(victim, 0o600)
    mtime = victim.stat().st_mtime_ns - 10**9
    os.utime(victim, ns=(mtime, mtime))
    folder = tmp_path / "store" / "stats"
    folder.mkdir(parents=True)
    name = folder / ("c" * 64 + ".lock")
    os.link(victim, name)
    with pytest.raises(UnsafeWrite, match="hard link"):
        change(name, tmp_path / "store")  # type: ignore[operator]
    st = victim.stat()
    assert victim.read_text() == "[engines.mine]\n"
    assert (st.st_mode & 0o777, st.st_mtime_ns) == (0o600, mtime), "the linked file's mode or time changed"


def test_a_write_that_fails_midway_names_the_file_it_was_writing(tmp_path: Path) -> None:
    """A full disk (here: the file size limit, a real EFBIG from write(2)) while a record's temp file is written said
    `OSError: [Errno 28] No space left on device` with no path: a build ended with `supervisor error: OSError …`."""
    target = tmp_path / ".trtls" / "runs" / "b1" / "running.json"
    target.parent.mkdir(parents=True)
    code = (
        "import resource, signal, sys\n"
        "from pathlib import Path\n"
        "from trtls import fs\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))\n"
        "p = Path(sys.argv[1])\n"
        "try:\n"
        "    fs.atomic_write_bytes(p, b'x' * 100000, kind=fs.Kind.evidence, within=p.parents[3])\n"
        "except OSError as exc:\n"
        "    print(exc.errno, exc.filename)\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(target)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["27", str(target)], done.stdout  # EFBIG, and the record's own path
    assert sorted(p.name for p in target.parent.iterdir()) == []  # the temp file went with the failure


def test_a_hard_link_at_a_store_lock_is_replaced_by_a_lock_of_its_own(tmp_path: Path) -> None:
    """The store's key lock replaces a name planted where its lock goes (a symlink, a FIFO, now a hard link) with a
    lock file of its own: the file the planted name led to keeps its bytes, the key is still locked."""
    from trtls.store.entries import Store
    from trtls.store.lock import KeyLock

    store = tmp_path / "store"
    Store(store).check()  # made and marked
    victim = _victim(tmp_path)
    key = "d" * 64
    os.link(victim, store / "locks" / f"{key}.lock")
    lock = KeyLock(store, key)
    try:
        assert lock.try_acquire("demo-1")
    finally:
        lock.release()
    assert victim.read_text() == "[engines.mine]\n" and victim.stat().st_nlink == 1
    assert (store / "locks" / f"{key}.lock").stat().st_nlink == 1
