"""Where TensorRT's builder allocates from, and what it costs: `build_serialized_network` of a quickstart model in a
plain TensorRT-RTX script, on the script's main thread (as trtls's worker builds since 2026-12-06) against a second
thread (as it built before), with the second thread's allocations from glibc's main arena (`mallopt(M_ARENA_MAX, 1)`
first, as the worker of 2026-12-05 did) or from its own arena with a 64 MiB top pad (`MALLOC_TOP_PAD_`). Each variant
a fresh process, interleaved; the build call's own wall time, the process's minor page faults and CPU time. No trtls
code in the timed process.

    python benchmarks/probe_builder_heap.py [--model demo|large] [--rounds 20]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import workspace

HERE = Path(__file__).resolve().parent

CHILD = r"""
import sys
if sys.argv[3] == "thread-main-arena":
    import ctypes
    ctypes.CDLL(None).mallopt(-8, 1)  # M_ARENA_MAX, before any thread
import threading, time
sys.path.insert(0, sys.argv[4])
from _bare_build import prepared  # the bare script's own preparation: parse, the recipe's profiles, settings

def build(out):
    _, builder, network, _, config = prepared(sys.argv[1])
    t = time.monotonic_ns()
    plan = builder.build_serialized_network(network, config)
    out.append((time.monotonic_ns() - t) / 1e6)
    assert plan is not None

out = []
if sys.argv[3] == "main-thread":
    build(out)
else:
    thread = threading.Thread(target=build, args=(out,))
    thread.start()
    thread.join()
print(out[0])
"""

VARIANTS = {
    "main-thread": {},
    "thread": {},
    "thread-main-arena": {},
    "thread-top-pad-64MiB": {"MALLOC_TOP_PAD_": str(64 << 20)},
}


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--model", default="demo", choices=("demo", "large"))
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    ws = workspace(Path(tempfile.mkdtemp(prefix="trtls-probe-heap-")))
    onnx = ws / "models" / f"{args.model}.onnx"
    base = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    got: dict[str, list[tuple[float, int, float]]] = {v: [] for v in VARIANTS}
    for r in range(args.rounds):
        names = list(VARIANTS)
        for name in names[r % len(names) :] + names[: r % len(names)]:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            done = subprocess.run(
                [sys.executable, "-c", CHILD, str(onnx), "-", name, str(HERE)],
                capture_output=True,
                text=True,
                check=True,
                env={**base, **VARIANTS[name]},
            )
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            got[name].append((float(done.stdout.split()[-1]), after.ru_minflt - before.ru_minflt, cpu))
        print(f"  round {r + 1}/{args.rounds}, load {os.getloadavg()[0]:.1f}", flush=True)
    print(f"== build_serialized_network of {args.model}, {args.rounds} interleaved rounds (medians) ==")
    for name, rows in got.items():
        ms = [b for b, _, _ in rows]
        print(
            f"  {name:22} {statistics.median(ms):8.1f} ms (min {min(ms):.1f}, max {max(ms):.1f})  "
            f"minor faults {statistics.median(f for _, f, _ in rows):8.0f}  "
            f"CPU {statistics.median(c for _, _, c in rows):.2f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
