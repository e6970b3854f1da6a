"""Hashing throughput of trtls.checkpoint.hashing: GB/s of a first (page-cached) run and the cached re-run ratio.

Creates ~1.5 GB of temp files under /tmp (removed at the end).
Usage: python benchmarks/bench_hashing.py [--gb 1.5] [--files 6]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import tempfile
import time
from pathlib import Path

from trtls.checkpoint.hashing import RACY_NS, DigestCache, hash_files


def _ceiling(threads: int) -> float:
    """sha256 of an L2-resident buffer on `threads` threads: the most any file hasher can reach here."""
    from concurrent.futures import ThreadPoolExecutor

    buf = os.urandom(1 << 20)

    def run(n: int) -> None:
        h = hashlib.sha256()
        for _ in range(n):
            h.update(buf)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(run, [512] * threads))
    return threads * 512 * len(buf) / (time.perf_counter() - t0) / 1e9


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gb", type=float, default=1.5)
    ap.add_argument("--files", type=int, default=6)
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="trtls-bench-hash-", dir="/tmp"))
    try:
        size = int(args.gb * 1e9 / args.files)
        block = os.urandom(16 * 1024 * 1024)
        paths = []
        for i in range(args.files):
            p = root / f"shard-{i:02d}.safetensors"
            with open(p, "wb") as f:
                left = size
                while left > 0:
                    n = min(left, len(block))
                    f.write(block[:n])
                    left -= n
            paths.append(p)
        old = time.time_ns() - 2 * RACY_NS  # let the cache accept the files (no racy-mtime skip)
        for p in paths:
            os.utime(p, ns=(old, old))
        total = size * args.files
        hash_files(paths[:1], None)  # warm the page cache for one file, then all
        for p in paths:
            with open(p, "rb") as f:
                while f.read(64 << 20):
                    pass
        one = hashlib.sha256(paths[0].read_bytes()).hexdigest()
        ceiling = _ceiling(args.workers or os.cpu_count() or 1)
        cache = DigestCache(root / "digests.json")
        t0 = time.perf_counter()
        first = hash_files(paths, cache, workers=args.workers)
        t_first = time.perf_counter() - t0
        assert first[paths[0].absolute()].sha256 == one
        cache2 = DigestCache(root / "digests.json")
        t0 = time.perf_counter()
        again = hash_files(paths, cache2, workers=args.workers)
        t_again = time.perf_counter() - t0
        assert all(d.cached for d in again.values())
        print(f"cpus: {os.cpu_count()}  files: {args.files} x {size / 1e6:.0f} MB = {total / 1e9:.2f} GB (page cache)")
        print(
            f"hardware ceiling: in-memory sha256, 1 MiB buffers, {args.workers or os.cpu_count()} threads: "
            f"{ceiling:.2f} GB/s"
        )
        print(f"first run:  {t_first:.3f} s  {total / t_first / 1e9:.2f} GB/s")
        print(f"re-run:     {t_again * 1000:.2f} ms  ratio {t_again / t_first * 100:.3f}% of the first run")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
