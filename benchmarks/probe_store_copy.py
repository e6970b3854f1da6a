"""The store's copy of an engine (`trtls.store.copying.copy_hashing`: a publish, a restore), its hash in line with the
write against its hash beside the write on a second thread, in the same interleaved rounds.

The source is a file of random bytes the size of `large`'s engine (137,841,380 bytes, 131.5 MiB), in the page cache
as a just-built engine is; each copy goes to a new file in the same folder (the store and the build's output share a
file system in the default layout) and is fsynced, as the publish's `atomic_writer` does, then deleted outside the
timing. "In line" is the same function with the threshold for the second thread set above the file's size, so the
two differ only in where the hash runs. Printed: the median wall and CPU of each, and the median of the per-round
ratios beside / in line (below 1: faster). Not a `run_all` benchmark: it says what the store's publish of `large`
gains (docs/performance.md, "The store's copy, hash beside write").

Usage: python benchmarks/probe_store_copy.py [--rounds 9] [--bytes 137841380] [--dir DIR] [--json F]
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import parser
from trtls.store import copying


def cpu_s() -> float:
    me = resource.getrusage(resource.RUSAGE_SELF)
    return me.ru_utime + me.ru_stime


def copy_once(src: Path, dst: Path, beside: bool) -> tuple[float, float, str]:
    copying.HASH_BESIDE_FROM = 8 * copying.BLOCK if beside else 1 << 62
    t0, c0 = time.perf_counter(), cpu_s()
    with open(src, "rb") as s, open(dst, "wb") as d:
        digest, _ = copying.copy_hashing(s, d, "publish")
        d.flush()
        os.fsync(d.fileno())
    return time.perf_counter() - t0, cpu_s() - c0, digest


def main() -> int:
    ap = parser(__doc__)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--bytes", type=int, default=137_841_380)
    ap.add_argument("--dir", type=Path, default=None, help="where the files go (default: a temp folder in /tmp)")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="trtls-probe-copy-", dir=args.dir))
    src = root / "engine"
    with open(src, "wb") as f:
        left = args.bytes
        while left > 0:
            f.write(os.urandom(min(left, 16 << 20)))
            left -= min(left, 16 << 20)
    got: dict[str, list[tuple[float, float]]] = {"in line": [], "beside": []}
    ratios: list[float] = []
    digests = set()
    for r in range(args.rounds + 1):  # round 0 warms the page cache and the allocator, not counted
        order = ["in line", "beside"] if r % 2 else ["beside", "in line"]
        this: dict[str, float] = {}
        for how in order:
            dst = root / f"copy-{how.replace(' ', '-')}"
            wall, cpu, digest = copy_once(src, dst, how == "beside")
            dst.unlink()
            digests.add(digest)
            if r:
                got[how].append((wall, cpu))
                this[how] = wall
        if r:
            ratios.append(this["beside"] / this["in line"])
    src.unlink()
    root.rmdir()
    assert len(digests) == 1, "the two copies hashed the same bytes differently"
    result = {
        "bytes": args.bytes,
        "rounds": args.rounds,
        **{
            how: {
                "wall_ms": 1000 * statistics.median(w for w, _ in v),
                "cpu_ms": 1000 * statistics.median(c for _, c in v),
            }
            for how, v in got.items()
        },
        "ratio_beside_in_line": statistics.median(ratios),
        "ratios": ratios,
    }
    print(f"{args.bytes:,} bytes, {args.rounds} interleaved rounds (copy + fsync, page cache warm)")
    for how in ("in line", "beside"):
        print(f"  hash {how:7}: wall {result[how]['wall_ms']:.1f} ms, CPU {result[how]['cpu_ms']:.1f} ms")
    print(f"  beside / in line, median of the rounds' ratios: {result['ratio_beside_in_line']:.3f}")
    print("  per round: " + " ".join(f"{x:.3f}" for x in ratios))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
