"""What a process's exit costs after it initialized CUDA (cuInit), against one that did not: wall from the process's
last mark (just before os._exit) to its parent's wait returning. Standard library only (ctypes on libcuda.so.1).

    python benchmarks/probe_cuda_exit.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

CHILD = r"""
import ctypes, os, sys, time
mode = sys.argv[1]
t0 = time.monotonic_ns()
if mode != "none":
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        sys.stdout.write("0 0 0\n"); sys.stdout.flush(); os._exit(3)
    rc = lib.cuInit(0)
    if mode == "device":
        d = ctypes.c_int(0); lib.cuDeviceGet(ctypes.byref(d), 0)
        name = ctypes.create_string_buffer(256); lib.cuDeviceGetName(name, 256, d)
t1 = time.monotonic_ns()
sys.stdout.write(f"{t0} {t1} {time.monotonic_ns()}\n"); sys.stdout.flush()
os._exit(0)
"""


def one(mode: str) -> tuple[float, float, float]:
    start = time.monotonic_ns()
    proc = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, check=False)
    end = time.monotonic_ns()
    if proc.returncode == 3:
        raise SystemExit("no libcuda.so.1 on this machine: nothing to compare")
    t0, t1, last = (int(x) for x in proc.stdout.split())
    return (t1 - t0) / 1e6, (end - last) / 1e6, (end - start) / 1e6


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    for mode in ("none", "init", "device"):
        rows = [one(mode) for _ in range(args.rounds)]
        init, exit_, total = (statistics.median(c) for c in zip(*rows, strict=True))
        print(f"{mode:>6}: cuInit {init:7.1f} ms  exit {exit_:6.1f} ms  whole process {total:7.1f} ms (median of {args.rounds})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
