"""What a process's exit costs after it initialized CUDA (cuInit), against one that did not, and when its parent sees
the end of its output: wall from the child's last mark (just before os._exit) to the parent reading end-of-file on the
child's stdout, and to the parent's wait returning. `close` modes close stdout themselves before os._exit. Standard
library only (ctypes on libcuda.so.1).

    python benchmarks/probe_cuda_exit.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
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
    lib.cuInit(0)
    d = ctypes.c_int(0); lib.cuDeviceGet(ctypes.byref(d), 0)
t1 = time.monotonic_ns()
sys.stdout.write(f"{t0} {t1} {time.monotonic_ns()}\n"); sys.stdout.flush()
if mode.endswith("close"):
    os.close(1); os.close(2)
os._exit(0)
"""


def one(mode: str) -> tuple[float, float, float, float]:
    start = time.monotonic_ns()
    proc = subprocess.Popen([sys.executable, "-c", CHILD, mode], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    data = proc.stdout.read()  # to end-of-file
    eof = time.monotonic_ns()
    code = proc.wait()
    end = time.monotonic_ns()
    if code == 3:
        raise SystemExit("no libcuda.so.1 on this machine: nothing to compare")
    t0, t1, last = (int(x) for x in data.split())
    return (t1 - t0) / 1e6, (eof - last) / 1e6, (end - last) / 1e6, (end - start) / 1e6


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs; median of {args.rounds} runs each (ms after the child's last mark)")
    for mode in ("none", "init", "init-close"):
        rows = [one(mode) for _ in range(args.rounds)]
        init, eof, exit_, total = (statistics.median(c) for c in zip(*rows, strict=True))
        print(
            f"{mode:>10}: cuInit {init:6.1f} ms  end of output {eof:6.1f} ms  exit {exit_:6.1f} ms  "
            f"process {total:6.1f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
