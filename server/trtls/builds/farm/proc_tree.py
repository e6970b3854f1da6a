"""The processes under a process, read from /proc (Linux; no psutil): what an embedded Ray instance left behind,
and the CPU time of every process a farm run starts (benchmarks/bench_farm_overhead.py).

A process is named by (pid, start time): a recycled pid is another process. Ending them goes through the door
(`trtls.fs.lineage`): only processes it saw under this one, and only while they are still those processes.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass

from trtls.fs import read_bytes, read_text
from trtls.fs.lineage import Witnessed, signal_witnessed, still_running

TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    start: int  # clock ticks since boot
    cpu_s: float  # user + system of the process itself (its threads), not of its children
    name: str  # argv joined (Ray renames its workers: `ray::NodeWorker`, `ray::DashboardAgent`)


def read(pid: int) -> Proc | None:
    try:
        stat = read_text(f"/proc/{pid}/stat", limit=None, follow=True, errors="replace")
        raw = read_bytes(f"/proc/{pid}/cmdline", limit=None, follow=True)
    except (OSError, ValueError):
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z":
        return None
    name = b" ".join(p for p in raw.split(b"\0") if p).decode(errors="replace")
    cpu = (int(fields[11]) + int(fields[12])) / TICKS
    return Proc(pid, int(fields[1]), int(fields[19]), cpu, name)


def all_procs() -> dict[int, Proc]:
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (p := read(int(entry))) is not None:
            out[p.pid] = p
    return out


def descendants(root: int, procs: dict[int, Proc] | None = None) -> dict[int, Proc]:
    procs = procs if procs is not None else all_procs()
    children: dict[int, list[int]] = {}
    for p in procs.values():
        children.setdefault(p.ppid, []).append(p.pid)
    out: dict[int, Proc] = {}
    frontier = [root]
    while frontier:
        for child in children.get(frontier.pop(), []):
            if child not in out:
                out[child] = procs[child]
                frontier.append(child)
    return out


def alive(procs: dict[int, Proc]) -> list[Proc]:
    """Those of `procs` that still run (same pid and start time)."""
    left = []
    for p in procs.values():
        now = read(p.pid)
        if now is not None and now.start == p.start:
            left.append(now)
    return left


def end(procs: list[Witnessed], grace_s: float = 1.0) -> list[Witnessed]:
    """SIGTERM what still runs of `procs` (witnessed under this process: `fs.lineage.witness`), SIGKILL what is
    left after `grace_s`; returns what was ended."""
    left = still_running(procs)
    for p in left:
        signal_witnessed(p, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while (still := still_running(left)) and time.monotonic() < deadline:
        time.sleep(0.05)
    for p in still:
        signal_witnessed(p, signal.SIGKILL)
    return left
