"""A restore that cannot write its output (issue 27, item 16, the store's side): an immutable output file or folder,
a read-only mount, a full disk. The store raises one typed error (`RestoreFailed`, an OSError carrying TRT412 or
TRT405 and the output's path) and leaves the output as it was, with no temp file beside it; an output that already
holds the entry's bytes is kept (nothing written, so an immutable one is no error). Real `chattr +i` (root), real
tmpfs mounts in a private mount namespace (`unshare -m`)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.store.forged import can_unshare_mounts, forged_entry, run_python
from trtls.store.entries import Entry, RestoreFailed, Store


def _chattr(flag: str, path: Path) -> bool:
    return subprocess.run(["chattr", flag, str(path)], capture_output=True).returncode == 0


@pytest.fixture
def immutable() -> Iterator[list[Path]]:
    made: list[Path] = []
    yield made
    for path in made:
        _chattr("-i", path)


def _make_immutable(path: Path, made: list[Path]) -> None:
    if not _chattr("+i", path):
        pytest.skip("chattr +i is not allowed here (needs root and a file system that supports it)")
    made.append(path)


@pytest.fixture
def store_and_entry(tmp_path: Path) -> tuple[Store, Entry]:
    store = Store(tmp_path / "store")
    store.check()
    return store, forged_entry(store, tmp_path, "restored")


def test_an_immutable_output_is_a_located_error_and_stays_as_it_was(
    store_and_entry: tuple[Store, Entry], tmp_path: Path, immutable: list[Path]
) -> None:
    store, entry = store_and_entry
    out = tmp_path / "out" / "demo.engine"
    out.parent.mkdir()
    out.write_bytes(b"vtrt an older engine")
    _make_immutable(out, immutable)
    with pytest.raises(RestoreFailed) as failed:
        store.restore(entry, out, "t1", within=out.parent)
    assert failed.value.code == "TRT412" and failed.value.filename == str(out)
    # why, and only why: the caller says "nothing was restored, the output is as it was" once (a build's warning)
    assert failed.value.strerror.startswith("the engine could not be written there: ")
    assert "as it was" not in failed.value.strerror, failed.value.strerror
    assert out.read_bytes() == b"vtrt an older engine"
    assert sorted(p.name for p in out.parent.iterdir()) == ["demo.engine"]


def test_an_immutable_output_folder_is_a_located_error(
    store_and_entry: tuple[Store, Entry], tmp_path: Path, immutable: list[Path]
) -> None:
    store, entry = store_and_entry
    out = tmp_path / "out" / "demo.engine"
    out.parent.mkdir()
    _make_immutable(out.parent, immutable)
    with pytest.raises(RestoreFailed) as failed:
        store.restore(entry, out, "t1", within=out.parent)
    assert failed.value.code == "TRT405" and list(out.parent.iterdir()) == []


def test_an_output_that_already_holds_the_engine_is_kept_even_when_immutable(
    store_and_entry: tuple[Store, Entry], tmp_path: Path, immutable: list[Path]
) -> None:
    """A fresh checkout whose output already holds the entry's bytes: nothing is rewritten."""
    store, entry = store_and_entry
    out = tmp_path / "out" / "demo.engine"
    out.parent.mkdir()
    out.write_bytes(entry.engine.read_bytes())
    _make_immutable(out, immutable)
    assert store.restore(entry, out, "t1", within=out.parent) is False


MOUNTED = """
import json, subprocess, sys
from pathlib import Path
from trtls.store.entries import Entry, RestoreFailed, Store
store_dir, key, mnt, how = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), sys.argv[4]
size = "size=64k" if how == "full" else "size=4m"
subprocess.run(["mount", "-t", "tmpfs", "-o", size, "tmpfs", str(mnt)], check=True)
out = mnt / "build" / "demo.engine"
out.parent.mkdir()
out.write_bytes(b"vtrt an older engine")
if how == "read-only":
    subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
store = Store(store_dir)
try:
    store.restore(store.get(key), out, "t1", within=mnt)
    said = {"restored": True}
except RestoreFailed as exc:
    said = {"code": exc.code, "errno": exc.errno, "filename": exc.filename}
said["left"] = sorted(p.name for p in out.parent.iterdir())
said["output"] = out.read_bytes().decode()
print(json.dumps(said))
"""


@pytest.mark.parametrize(("how", "err"), [("read-only", 30), ("full", 28)])  # EROFS, ENOSPC
def test_a_read_only_mount_or_a_full_disk_is_a_located_error(tmp_path: Path, how: str, err: int) -> None:
    if not can_unshare_mounts():
        pytest.skip("no private mount namespace here (unshare -m needs root)")
    store = Store(tmp_path / "store")
    store.check()
    entry = forged_entry(store, tmp_path, how, data=b"\x01" * (256 << 10))  # larger than the full disk's 64 KiB
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    done = run_python(MOUNTED, str(store.root), entry.key, str(mnt), how, unshare=True)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    assert said == {"code": "TRT412", "errno": err, "filename": str(mnt / "build" / "demo.engine"),
                    "left": ["demo.engine"], "output": "vtrt an older engine"}  # fmt: skip


def test_a_store_folder_that_cannot_be_written_is_named(tmp_path: Path, immutable: list[Path]) -> None:
    store = Store(tmp_path / "store")
    store.check()
    entry = forged_entry(store, tmp_path, "kept")
    _make_immutable(store.root / "entries", immutable)
    unwritable = Store(tmp_path / "store")
    unwritable.check()  # not refused: served as read (issue 32, item 9)
    assert unwritable.unwritable is not None and not unwritable.writable
    assert unwritable.unwritable.startswith("TRT331") and str(store.root / "entries") in unwritable.unwritable
    assert unwritable.notes == [unwritable.unwritable]
    with pytest.raises(OSError, match="TRT331") as refused:
        forged_entry(unwritable, tmp_path, "not-stored")
    assert refused.value.errno == 30  # EROFS
    out = tmp_path / "out" / "demo.engine"
    got = unwritable.get(entry.key)
    assert got is not None and unwritable.restore(got, out, "t1", within=tmp_path)
    assert out.read_bytes() == entry.engine.read_bytes()
