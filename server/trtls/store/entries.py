"""The store on disk: immutable entries, written whole or not at all, verified every time one is used.

    <store>/entries/<key>/engine        the engine's bytes
    <store>/entries/<key>/entry.json    the key, the key's parts, the engine's sha256 + size, the producing build
    <store>/used/<key>                  empty; its mtime is the entry's last use (LRU) — the entry itself never changes
    <store>/locks/<key>.lock            flock'ed by the one process building that key (store/lock.py)
    <store>/quarantine/<key>-<time>/    an entry that failed verification, moved aside, never used again
    <store>/tmp/                        entries being written (a publish is: write here, fsync, rename into entries/)

A publish renames a complete, fsynced folder into `entries/`, so a reader sees a whole entry or none; a restore
copies the engine to a temp file beside the output while hashing it, and renames it over the output only when the
hash is the entry's. Hard links are never used: a later in-place write to the output (a tool that opens it `r+b`)
would change the store's bytes too. A reflink (FICLONE, copy-on-write) is tried first where the file system can.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from trtls.core.atomic import atomic_writer, fsync_dir, temp_path_for
from trtls.store.key import key_of_parts

ENTRY_FORMAT = "trtls.store-entry/1"
FICLONE = 0x40049409  # linux/fs.h
BLOCK = 1 << 20


class StoreUnusable(Exception):
    """The store folder cannot be used as configured (not a folder, not writable): a located error."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code


class Refused(Exception):
    """An entry failed verification (bytes or key): it was quarantined."""


@dataclass(frozen=True)
class Entry:
    key: str
    folder: Path
    record: dict[str, Any]

    @property
    def engine(self) -> Path:
        return self.folder / "engine"

    @property
    def sha256(self) -> str:
        return str(self.record["engine"]["sha256"])

    @property
    def size(self) -> int:
        return int(self.record["engine"]["size"])

    @property
    def build(self) -> dict[str, Any]:
        return self.record.get("build") or {}


def _pause(point: str, fraction_written: bool) -> None:
    """Test hook: with TRTLS_STORE_PAUSE=<point>, stop half-way through writing (marker file
    TRTLS_STORE_PAUSE_FILE created) until the marker is removed, so a test can SIGKILL us at that exact moment."""
    if os.environ.get("TRTLS_STORE_PAUSE") != point or not fraction_written:
        return
    marker = Path(os.environ["TRTLS_STORE_PAUSE_FILE"])
    marker.write_text(str(os.getpid()))
    while marker.exists():
        time.sleep(0.01)


def _fault(point: str) -> None:
    """Test hook: TRTLS_STORE_FAULT=enospc makes a publish's write fail as a full disk would (ENOSPC)."""
    if os.environ.get("TRTLS_STORE_FAULT") == "enospc" and point == "publish":
        raise OSError(errno.ENOSPC, "No space left on device (TRTLS_STORE_FAULT)")


def copy_hashing(src: BinaryIO, dst: BinaryIO, point: str) -> tuple[str, int]:
    """Copy src → dst (a reflink where possible), returning the sha256 and size of the bytes now in dst."""
    h = hashlib.sha256()
    size = os.fstat(src.fileno()).st_size
    try:
        fcntl.ioctl(dst.fileno(), FICLONE, src.fileno())
        dst.seek(0)
        with open(dst.name, "rb") as back:  # hash what the clone holds: the verification reads the bytes
            n = 0
            while block := back.read(BLOCK):
                h.update(block)
                n += len(block)
                _pause(point, n >= size // 2)
        return h.hexdigest(), n
    except OSError:
        pass  # no reflink here (another file system, tmpfs, ext4): copy
    n = 0
    while block := src.read(BLOCK):
        h.update(block)
        if point == "publish":
            _fault(point)
        dst.write(block)
        n += len(block)
        _pause(point, n >= size // 2)
    return h.hexdigest(), n


class Store:
    def __init__(self, root: Path, mode: str = "read_write", max_size: int | None = None):
        self.root = Path(root)
        self.mode = mode
        self.max_size = max_size

    # -- checks --------------------------------------------------------------------------------
    def check(self) -> None:
        """Raise StoreUnusable when the folder cannot serve its mode (a missing read-only store is an empty one)."""
        if self.root.exists() and not self.root.is_dir():
            raise StoreUnusable("TRT330", f"the store path {self.root} is not a folder")
        if self.mode == "read":
            return
        try:
            for sub in ("entries", "used", "locks", "quarantine", "tmp"):
                (self.root / sub).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreUnusable("TRT331", f"the store folder {self.root} cannot be written: {exc.strerror}") from exc
        if not os.access(self.root / "entries", os.W_OK) or not os.access(self.root / "tmp", os.W_OK):
            raise StoreUnusable("TRT331", f"the store folder {self.root} is not writable (mode = read_write)")

    # -- reading -------------------------------------------------------------------------------
    def get(self, key: str) -> Entry | None:
        """The entry of `key` if its record holds together (recorded key = its parts' key = its folder's name);
        an entry that does not is quarantined (Refused)."""
        folder = self.root / "entries" / key
        try:
            record = json.loads((folder / "entry.json").read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            self.quarantine(folder, f"unreadable entry.json: {exc}")
            raise Refused(f"store entry {key[:12]} has an unreadable record; quarantined") from exc
        if (
            not isinstance(record, dict)
            or record.get("format") != ENTRY_FORMAT
            or record.get("key") != key
            or key_of_parts(record.get("parts") or {}) != key
        ):
            self.quarantine(folder, "its recorded key does not match its content")
            raise Refused(f"store entry {key[:12]}'s recorded key does not match its content; quarantined")
        return Entry(key, folder, record)

    def entries(self) -> list[Entry]:
        out = []
        for folder in sorted((self.root / "entries").glob("*")):
            try:
                e = self.get(folder.name)
            except Refused:
                continue
            if e is not None:
                out.append(e)
        return out

    def last_used(self, key: str) -> float:
        try:
            return (self.root / "used" / key).stat().st_mtime
        except OSError:
            return 0.0

    def touch(self, key: str) -> None:
        if self.mode != "read_write":
            return  # a read-only store is never written, not even its use times
        try:
            (self.root / "used" / key).touch()
        except OSError:
            pass

    def restore(self, entry: Entry, output: Path, tag: str, within: str | os.PathLike[str] | None = None) -> None:
        """Make `output` identical to the entry through the atomic writer (temp file created O_EXCL | O_NOFOLLOW in
        the output's real folder, hashed while copied, fsynced, renamed there; never through a symlink, and with
        `within`, never into a real folder outside it: UnsafeWrite). A hash that is not the entry's quarantines the
        entry and leaves `output` untouched (Refused)."""
        output.parent.mkdir(parents=True, exist_ok=True)
        mismatch: str | None = None
        try:
            with (
                open(entry.engine, "rb") as src,
                atomic_writer(output, within=within, temp_name=temp_path_for(output, tag).name) as dst,
            ):
                sha, _ = copy_hashing(src, dst, "restore")
                if sha != entry.sha256:
                    mismatch = sha
                    raise Refused("mismatch")  # leaves the block: the writer removes its temp, output untouched
        except Refused:
            if mismatch is None:
                raise
            self.quarantine(entry.folder, f"engine sha256 {mismatch[:12]}… is not the recorded {entry.sha256[:12]}…")
            raise Refused(f"store entry {entry.key[:12]}'s engine bytes do not match its sha256; quarantined") from None
        self.touch(entry.key)

    # -- writing -------------------------------------------------------------------------------
    def publish(self, key: str, parts: dict[str, Any], engine: Path, build: dict[str, Any], sha: str | None) -> Entry:
        """Store `engine` under `key` (a no-op when the key is stored already). `sha`: the engine's hash as the
        worker wrote it; a copy that reads other bytes (the output changed meanwhile) is not stored. Raises
        OSError (a full disk, a read-only store)."""
        if self.mode != "read_write":
            raise OSError(errno.EROFS, "the store is read-only (mode = read)")
        existing = self.get(key)
        if existing is not None:
            self.touch(key)
            return existing
        self.check()
        tmp = self.root / "tmp" / f"{key}.{os.getpid()}.{time.monotonic_ns()}"
        tmp.mkdir()
        try:
            with open(engine, "rb") as src, open(tmp / "engine", "wb") as dst:
                got, size = copy_hashing(src, dst, "publish")
                dst.flush()
                os.fsync(dst.fileno())
            if sha is not None and got != sha:
                raise OSError(errno.EIO, f"the engine changed while it was copied ({got[:12]}… ≠ {sha[:12]}…)")
            record = {
                "format": ENTRY_FORMAT,
                "key": key,
                "parts": parts,
                "engine": {"sha256": got, "size": size},
                "build": build,
                "createdAt": time.time(),
            }
            with open(tmp / "entry.json", "w", encoding="utf-8") as fh:
                json.dump(record, fh, indent=1, default=str)
                fh.flush()
                os.fsync(fh.fileno())
            fsync_dir(tmp)
            try:
                os.rename(tmp, self.root / "entries" / key)
            except OSError as exc:
                if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                    raise
                shutil.rmtree(tmp, ignore_errors=True)  # another process published the same key first
            fsync_dir(self.root / "entries")
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self.touch(key)
        entry = self.get(key)
        assert entry is not None
        self.evict(keep=key)
        return entry

    def quarantine(self, folder: Path, why: str) -> None:
        if self.mode != "read_write":
            return  # a read-only store is refused, not changed: its owner fixes it
        dest = self.root / "quarantine" / f"{folder.name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.rename(folder, dest)
            (dest / "WHY").write_text(why + "\n")
        except OSError:
            pass

    def remove(self, key: str) -> None:
        folder = self.root / "entries" / key
        trash = self.root / "tmp" / f"evicted-{key}-{os.getpid()}-{time.monotonic_ns()}"
        try:
            os.rename(folder, trash)  # gone from entries/ at once; a restore holding the file still reads it
        except OSError:
            return
        shutil.rmtree(trash, ignore_errors=True)
        (self.root / "used" / key).unlink(missing_ok=True)

    def evict(self, keep: str | None = None, max_size: int | None = None) -> list[Entry]:
        """Remove least recently used entries until the store fits its bound; `keep` is never evicted."""
        bound = max_size if max_size is not None else self.max_size
        if bound is None or self.mode != "read_write":
            return []
        entries = sorted(self.entries(), key=lambda e: self.last_used(e.key))
        total = sum(e.size for e in entries)
        evicted = []
        for e in entries:
            if total <= bound:
                break
            if e.key == keep:
                continue
            self.remove(e.key)
            total -= e.size
            evicted.append(e)
        return evicted

    def clean_tmp(self, older_than_s: float = 3600) -> int:
        """Remove what a killed publish left in tmp/ (never inside entries/): folders whose writer (the pid in
        the name) is gone, and anything older than `older_than_s`."""
        n = 0
        now = time.time()
        for p in (self.root / "tmp").glob("*"):
            try:
                if not _writer_alive(p.name) or now - p.stat().st_mtime > older_than_s:
                    shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink()
                    n += 1
            except OSError:
                continue
        return n


def _writer_alive(name: str) -> bool:
    """`<key>.<pid>.<ns>`: is that pid still running? (Unknown names count as alive: age decides.)"""
    parts = name.split(".")
    if len(parts) != 3 or not parts[1].isdigit():
        return True
    try:
        os.kill(int(parts[1]), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
