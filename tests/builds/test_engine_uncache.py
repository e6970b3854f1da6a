"""The engine a build replaces has its page cache dropped before the new one is written (builds/artifacts.py
`uncache_replaced`): its bytes stay as they are, and only a regular file inside the write root is touched — never a
link's target, never a FIFO opened for reading (which would block).

Real files, the kernel's own answer (mincore on a mapping of the file) for what is cached."""

from __future__ import annotations

import ctypes
import mmap
import os
from pathlib import Path

import pytest

from trtls.builds.artifacts import uncache_replaced

PAGE = mmap.PAGESIZE
LIBC = ctypes.CDLL(None, use_errno=True)


def cached_pages(path: Path) -> int:
    """How many of the file's pages the page cache holds (mincore over a private mapping that touches none)."""
    size = path.stat().st_size
    with open(path, "rb") as fh, mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_COPY) as mm:
        pages = (size + PAGE - 1) // PAGE
        vec = (ctypes.c_ubyte * pages)()
        addr = ctypes.addressof(ctypes.c_char.from_buffer(mm))
        if LIBC.mincore(ctypes.c_void_p(addr), ctypes.c_size_t(size), vec) != 0:
            raise OSError(ctypes.get_errno(), "mincore")
        return sum(b & 1 for b in vec)


def on_tmpfs(path: Path) -> bool:
    """tmpfs keeps every page it holds (they are the files): nothing there can leave the cache."""
    best, fstype = "", ""
    for line in Path("/proc/mounts").read_text().splitlines():
        mount, kind = line.split()[1], line.split()[2]
        if str(path).startswith(mount.rstrip("/") + "/") and len(mount) > len(best):
            best, fstype = mount, kind
    return fstype == "tmpfs"


def cached_file(path: Path, size: int = 8 << 20) -> bytes:
    if on_tmpfs(path):
        pytest.skip("the test folder is on tmpfs, whose pages are the files themselves")
    data = os.urandom(size)
    with open(path, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())  # clean pages: what a finished build leaves
    path.read_bytes()  # and cached
    return data


def test_the_replaced_engines_pages_leave_the_cache_and_its_bytes_stay(tmp_path: Path) -> None:
    engine = tmp_path / "demo.engine"
    data = cached_file(engine)
    before = cached_pages(engine)
    assert before > 0.9 * len(data) / PAGE
    uncache_replaced(engine, tmp_path)
    assert cached_pages(engine) < before // 10
    assert engine.read_bytes() == data


def test_a_link_in_the_outputs_place_is_not_followed(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    target = outside / "someone.bin"
    cached_file(target)
    root = tmp_path / "ws"
    root.mkdir()
    (root / "demo.engine").symlink_to(target)
    before = cached_pages(target)
    uncache_replaced(root / "demo.engine", root)
    assert cached_pages(target) >= before - 1  # the link's target was never opened


def test_a_fifo_in_the_outputs_place_is_left_alone_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "demo.engine"
    os.mkfifo(fifo)
    uncache_replaced(fifo, tmp_path)  # a blocking open for reading would never return: no writer comes
    assert fifo.is_fifo()


def test_nothing_there_is_nothing_to_drop(tmp_path: Path) -> None:
    uncache_replaced(tmp_path / "absent.engine", tmp_path)
    assert not (tmp_path / "absent.engine").exists()
