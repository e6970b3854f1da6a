"""sha256 of many files, fast, with a stat-keyed digest cache.

Speed: hashlib releases the GIL while it hashes a buffer larger than 2 KiB, so a thread pool hashes
several files at once on several cores. Each file is read with `readinto` into one reused buffer
per thread (no per-chunk allocation; 1 MiB stays in L2); files are handed out largest first so the pool stays balanced.
sha256 of one file is sequential by nature: one core's sha256 is the most one file can get. To get that close, a
file hashed while cores are spare (fewer files left than cores) may be read ahead on a thread of its own into a few
rotating buffers, so the copy out of the page cache (or the wait for the disk) runs beside the hash instead of
between its calls (~18 % of a core: docs/performance.md). Whether that pays depends on the CPU, not on anything a
program can ask it: faster on an AMD EPYC and the 16-core host, slower than none on two Intel Xeon VMs (1.25 against
1.58 GB/s; their two vCPUs may be one core's two threads). So a file of `TRIAL_FROM` or more measures both on its
own blocks — after a first few hashed untimed (from a disk the first blocks wait twice as long as the next, which
made a cold file pick the slower way), in line, read ahead, in line again — and hashes the rest the faster way
(`TRIAL_OUTCOMES` counts the picks); a smaller file is read ahead as before (its few ms decide nothing). Each file
is opened with POSIX_FADV_SEQUENTIAL (the kernel reads ahead further). No mmap: a file truncated while mapped kills
the process with SIGBUS.

Cache: `.trtls/digests.json` maps a file's absolute path to (size, mtime_ns, inode, sha256). A file whose
size, mtime_ns and inode are unchanged is not read again. A file modified within `RACY_NS` of the moment it
was hashed is not cached (its mtime may not change on the next write within the same clock tick). The
cache trusts the file system's mtime: someone who rewrites a file *and* resets its mtime on purpose defeats
it, which is why callers can pass `cache=None` (`trtls gates --no-digest-cache`) to hash everything.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from trtls.core.cgroups import usable_cpus
from trtls.fs import Kind, atomic_write_text, ensure_folder, open_regular, parse_json, read_text

BUF = 1024 * 1024  # fits L2: the copy out of the page cache stays hot for the hash (8 MiB measured ~35% slower)
READ_AHEAD = 3  # buffers going round between a file's reader thread and its hasher: one filling, one hashing, a spare
TRIAL_BLOCKS = 8  # the trial's parts (module doc): this many untimed, in line; 2 × this read ahead; this in line
TRIAL_FROM = 64 * BUF  # a file this large measures both ways first: the trial is 40 of its first blocks
CACHE_FORMAT = "trtls.digests/1"
RACY_NS = 2_000_000_000
CACHE_LIMIT = 256 * 1024 * 1024  # ~150 bytes an entry: a million files

_local = threading.local()
TRIAL_OUTCOMES = {"read_ahead": 0, "in_line": 0}  # this process's picks (module doc): what a benchmark reports
_outcomes_lock = threading.Lock()


class HashCancelled(Exception):
    pass


@dataclass(frozen=True)
class FileDigest:
    path: Path
    size: int
    sha256: str
    cached: bool  # True when the digest came from the cache


def _buffer() -> memoryview:
    buf = getattr(_local, "buf", None)
    if buf is None:
        buf = memoryview(bytearray(BUF))
        _local.buf = buf
    return buf


def sha256_file(
    path: str | os.PathLike[str],
    cancel: Callable[[], bool] | None = None,
    *,
    follow: bool = False,
    read_ahead: bool = False,
) -> tuple[str, os.stat_result]:
    """(hex digest, the stat of the opened file). Reads through one open descriptor (no TOCTOU on the path), a
    regular file only (`fs.open_regular`: a FIFO or a device is refused before a byte is read); a final symlink is
    refused unless `follow` (a Hugging Face cache's snapshot links into its blobs). `read_ahead`: a core is spare
    for a reading thread (a file of `TRIAL_FROM` or more then measures whether it pays: the module doc)."""
    h = hashlib.sha256()
    with open_regular(path, limit=None, follow=follow) as f:
        st = os.fstat(f.fileno())
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
        reader = cast(io.BufferedReader, f)  # what open_regular opens: readinto a buffer larger than its own
        if read_ahead and st.st_size >= TRIAL_FROM:
            _hash_the_faster_way(reader, h, cancel, path)
        elif read_ahead and st.st_size > 2 * BUF:
            _hash_read_ahead(reader, h, cancel, path)
        else:
            _hash_in_line(reader, h, cancel, path)
    return h.hexdigest(), st


def _hash_in_line(
    reader: io.BufferedReader, h: Any, cancel: Callable[[], bool] | None, path: Any, blocks: int | None = None
) -> bool:
    """Hash what `reader` reads, up to `blocks` buffers (None: all of it), in one reused buffer (no allocation per
    chunk). True once the file's end was read."""
    buf = _buffer()
    done = 0
    while blocks is None or done < blocks:
        n = reader.readinto(buf)
        if not n:
            return True
        h.update(buf[:n])
        done += 1
        if cancel is not None and cancel():
            raise HashCancelled(str(path))
    return False


def _hash_the_faster_way(reader: io.BufferedReader, h: Any, cancel: Callable[[], bool] | None, path: Any) -> None:
    """The module doc's trial: after the file's first blocks, the next in line, read ahead, in line (each part's digest
    work is the file's own, in order), then the rest the way whose blocks went faster."""
    clock = time.perf_counter
    if _hash_in_line(reader, h, cancel, path, TRIAL_BLOCKS):  # untimed: a file read from the disk waits longest for
        return  # its first blocks (measured: 2× the next), which would count against whichever way went first
    t0 = clock()
    if _hash_in_line(reader, h, cancel, path, TRIAL_BLOCKS):
        return  # the file ended during the trial (it shrank since its stat): every byte is hashed
    t1 = clock()
    if _hash_read_ahead(reader, h, cancel, path, 2 * TRIAL_BLOCKS):
        return
    t2 = clock()
    if _hash_in_line(reader, h, cancel, path, TRIAL_BLOCKS):
        return
    # the same number of blocks each way; in line counted at its better part: one slow part (a cold file's late wait,
    # a neighbour's burst) must not make the slower way the rest's: read ahead wins by ~5 % where it wins (AMD EPYC),
    # in line by ~25 % (Intel Xeon)
    ahead = t2 - t1 < 2 * min(t1 - t0, clock() - t2)
    with _outcomes_lock:
        TRIAL_OUTCOMES["read_ahead" if ahead else "in_line"] += 1
    (_hash_read_ahead if ahead else _hash_in_line)(reader, h, cancel, path, None)


def _hash_read_ahead(
    reader: io.BufferedReader, h: Any, cancel: Callable[[], bool] | None, path: Any, blocks: int | None = None
) -> bool:
    """Hash what `reader` reads, up to `blocks` buffers (None: all of it), the reading on a thread of its own:
    `READ_AHEAD` buffers go round between the reader (fills a free one) and this thread (hashes a full one, hands it
    back). Both release the GIL while they work. The reader reads no buffer past `blocks` (the file's position is
    where the next part of a trial starts) and is joined before returning, whatever happened: the file is never read
    after its caller closes it. True once the file's end was read."""
    import queue

    free: queue.SimpleQueue[memoryview | None] = queue.SimpleQueue()
    full: queue.SimpleQueue[tuple[memoryview, int] | None | BaseException] = queue.SimpleQueue()
    for _ in range(READ_AHEAD):
        free.put(memoryview(bytearray(BUF)))

    def read() -> None:
        try:
            done = 0
            while blocks is None or done < blocks:
                buf = free.get()
                if buf is None:
                    return
                n = reader.readinto(buf)
                full.put((buf, n))
                done += 1
                if not n:
                    return
            full.put(None)  # `blocks` read, the file not yet at its end
        except BaseException as exc:  # handed to the hashing thread, which raises it
            full.put(exc)

    thread = threading.Thread(target=read, name="trtls-hash-read", daemon=True)
    thread.start()
    try:
        while True:
            got = full.get()
            if isinstance(got, BaseException):
                raise got
            if got is None:
                return False
            buf, n = got
            if not n:
                return True
            h.update(buf[:n])
            free.put(buf)
            if cancel is not None and cancel():
                raise HashCancelled(str(path))
    finally:
        free.put(None)  # a reader waiting for a buffer stops; one reading stops at its next
        thread.join()


class DigestCache:
    """Digests keyed by (absolute path, size, mtime_ns, inode, ctime_ns); loaded from and saved to a JSON file
    atomically.

    The file lives in a recipe's `.trtls/` (`default_cache_path`): it is saved inside `within`, by default the folder
    above `.trtls` (the recipe's folder), so a `.trtls` swapped for a symlink leading out is refused, never written
    through. A cache that cannot be saved is simply not saved (it only saves time)."""

    def __init__(self, path: str | os.PathLike[str] | None, *, within: str | os.PathLike[str] | None = None):
        self.path = Path(path) if path is not None else None
        self.within = Path(within) if within is not None else (self.path.parent.parent if self.path else None)
        self.entries: dict[str, dict[str, Any]] = {}
        self.dirty = False
        self._lock = threading.Lock()
        if self.path is not None:
            self._load()

    def _load(self) -> None:
        assert self.path is not None
        try:
            # this account's own only: a cache another account wrote (or could rewrite) maps a file's stat to any digest
            # it likes — a changed model or checkpoint taken for the one reviewed (a stale engine, gate 1 passed)
            data = parse_json(read_text(self.path, limit=CACHE_LIMIT, follow=False, owned=True))
        except (OSError, ValueError, RecursionError):  # RecursionError: JSON nested deeper than the parser's stack
            return  # a missing, damaged or foreign cache is just an empty one
        if isinstance(data, dict) and data.get("format") == CACHE_FORMAT and isinstance(data.get("files"), dict):
            self.entries = {k: v for k, v in data["files"].items() if isinstance(v, dict)}

    @staticmethod
    def stat_key(st: os.stat_result) -> list[int]:
        # ctime too: a file rewritten in place at its size with its mtime put back (cp -p, rsync -t --inplace, a
        # tool that preserves timestamps) keeps size, mtime and inode, and only the ctime, which no one can set back,
        # says it changed (ccache and Bazel key their caches on it too; issue 32: a stale engine)
        return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns]

    def get(self, path: Path, st: os.stat_result) -> str | None:
        entry = self.entries.get(str(path))
        if entry is None or entry.get("key") != self.stat_key(st):
            return None
        sha = entry.get("sha256")
        return sha if isinstance(sha, str) and len(sha) == 64 else None

    def put(self, path: Path, st: os.stat_result, sha: str) -> None:
        if time.time_ns() - st.st_mtime_ns < RACY_NS:
            return
        with self._lock:
            self.entries[str(path)] = {"key": self.stat_key(st), "sha256": sha}
            self.dirty = True

    def save(self) -> None:
        if self.path is None or self.within is None or not self.dirty:
            return
        text = json.dumps({"format": CACHE_FORMAT, "files": self.entries}, sort_keys=True) + "\n"
        try:
            ensure_folder(self.path.parent, within=self.within)
            atomic_write_text(self.path, text, kind=Kind.cache, within=self.within)
        except OSError:
            return  # a read-only or refused .trtls: the digests are computed again next time, nothing is lost
        self.dirty = False


def default_cache_path(recipe_dir: str | os.PathLike[str]) -> Path:
    return Path(recipe_dir) / ".trtls" / "digests.json"


def hash_files(
    paths: Iterable[str | os.PathLike[str]],
    cache: DigestCache | None = None,
    workers: int | None = None,
    cancel: Callable[[], bool] | None = None,
    *,
    follow: bool = False,
) -> dict[Path, FileDigest]:
    """sha256 of every path (absolute paths as keys). Uses and updates `cache`; saves it at the end. `follow`: a
    final symlink is followed (see `sha256_file`)."""
    items: list[tuple[Path, os.stat_result]] = []
    for p in paths:
        path = Path(p).absolute()
        items.append((path, os.stat(path, follow_symlinks=follow)))
    out: dict[Path, FileDigest] = {}
    todo: list[tuple[Path, os.stat_result]] = []
    for path, st in items:
        sha = cache.get(path, st) if cache is not None else None
        if sha is not None:
            out[path] = FileDigest(path, st.st_size, sha, True)
        else:
            todo.append((path, st))
    todo.sort(key=lambda item: item[1].st_size, reverse=True)

    cores = usable_cpus()  # its affinity and CPU quota, not the machine's count (core.cgroups)
    n = max(1, min(workers or cores, len(todo)))
    spare = n < cores  # fewer hashing threads than cores: each file's reading runs on an idle one

    def work(item: tuple[Path, os.stat_result]) -> FileDigest:
        path, _ = item
        sha, st = sha256_file(path, cancel, follow=follow, read_ahead=spare)
        if cache is not None:
            cache.put(path, st, sha)
        return FileDigest(path, st.st_size, sha, False)

    if todo:
        if n == 1:
            results = [work(item) for item in todo]
        else:
            from concurrent.futures import ThreadPoolExecutor  # only when there is something to hash

            with ThreadPoolExecutor(max_workers=n, thread_name_prefix="trtls-hash") as pool:
                results = list(pool.map(work, todo))
        for d in results:
            out[d.path] = d
    if cache is not None:
        cache.save()
    return out
