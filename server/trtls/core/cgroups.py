"""Where a process's control groups are, and how many CPUs it may keep busy — one owner for every place that sizes
work by CPUs: the check's wait for the worker's start (builds/supervisor/speculation.py), the hashing threads
(checkpoint/hashing.py), and the CPUs an embedded or warm farm node offers Ray (builds/farm/cluster.py, cli/farm.py).

`os.cpu_count()` is the machine's CPUs. A process may be allowed fewer: its affinity (`taskset`, a cpuset) and its
cgroup's CPU quota (a container's `--cpus`, a CI runner's limit: cgroup v2 `cpu.max`, v1 `cpu.cfs_quota_us` over
`cpu.cfs_period_us`, the tightest of the cgroup and its ancestors). Sizing work by the machine's count there starts
more threads or cells than can run at once: they take turns, and a wait meant for a scarce CPU is skipped.

The kernel's files are read through the door (`trtls.fs.read`), as every read is; one that cannot be read says
nothing, and the count falls back to what can be told.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from trtls.fs.read import read_text

CGROUP_ROOT = Path("/sys/fs/cgroup")
_KERNEL_FILE_LIMIT = 1 << 20  # a cgroup or /proc file of one process is a few KiB
_V1_CPU_MOUNTS = ("cpu", "cpu,cpuacct", "cpuacct,cpu")  # where distributions mount cgroup v1's cpu controller


def _kernel_text(path: str | Path) -> str:
    return read_text(path, limit=_KERNEL_FILE_LIMIT, follow=True, errors="replace")


def cgroup_dirs(controller: str, pid: int | str = "self", root: Path = CGROUP_ROOT) -> list[Path]:
    """The folders of `pid`'s cgroup that hold `controller`'s files, from /proc/PID/cgroup: cgroup v1's mount of that
    controller (each name distributions use) and cgroup v2's unified tree (at the root, or under `unified/` in a
    hybrid layout). Folders that may not exist; [] when /proc cannot tell."""
    try:
        lines = _kernel_text(f"/proc/{pid}/cgroup").splitlines()
    except OSError:
        return []
    return dirs_from_lines(lines, controller, root)


def dirs_from_lines(lines: list[str], controller: str, root: Path = CGROUP_ROOT) -> list[Path]:
    """`cgroup_dirs` of a /proc/PID/cgroup's lines (`ID:CONTROLLERS:PATH`)."""
    out: list[Path] = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        rel = path.strip().lstrip("/")
        if controller in controllers.split(","):
            mounts = _V1_CPU_MOUNTS if controller == "cpu" else (controller,)
            out += [root / mount / rel for mount in mounts]
        elif controllers == "":
            out += [root / rel, root / "unified" / rel]
    return out


def cpu_quota(pid: int | str = "self", root: Path = CGROUP_ROOT) -> float | None:
    """The CPU quota `pid` runs under, in CPUs (1.5: one and a half CPUs' time per period): the tightest of its cpu
    cgroup and every ancestor up to the root; None when none sets one or none can be read."""
    return quota_of_dirs(cgroup_dirs("cpu", pid, root), root)


def quota_of_dirs(dirs: list[Path], root: Path = CGROUP_ROOT) -> float | None:
    """`cpu_quota` over cgroup folders and their ancestors, up to (and with) the mount each is under."""
    quotas: list[float] = []
    for folder in dirs:
        here = folder
        while here.is_relative_to(root) and here != root:  # from the group up to its mount, never above the root
            q = _quota_in(here)
            if q is not None:
                quotas.append(q)
            if here.parent == root:
                break
            here = here.parent
    return min(quotas) if quotas else None


def _quota_in(folder: Path) -> float | None:
    """The quota one cgroup folder sets: v2 `cpu.max` (`QUOTA PERIOD`, `max` for none), v1 `cpu.cfs_quota_us`
    (-1 for none) over `cpu.cfs_period_us`. None: no quota, or no such file."""
    try:
        fields = _kernel_text(folder / "cpu.max").split()
        if len(fields) == 2 and fields[0] != "max":
            return _ratio(fields[0], fields[1])
        return None
    except OSError:
        pass
    try:
        quota = _kernel_text(folder / "cpu.cfs_quota_us").strip()
        period = _kernel_text(folder / "cpu.cfs_period_us").strip()
    except OSError:
        return None
    return _ratio(quota, period)


def _ratio(quota: str, period: str) -> float | None:
    try:
        q, p = int(quota), int(period)
    except ValueError:
        return None
    return q / p if q > 0 and p > 0 else None


def affinity_cpus() -> int:
    """The CPUs this process may be scheduled on (its affinity where the platform says it, else the machine's)."""
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        try:
            return max(1, len(affinity(0)))
        except OSError:
            pass
    return os.cpu_count() or 1


def usable_cpus() -> int:
    """How many CPUs this process may keep busy at once: its affinity, lowered to its cgroup's CPU quota rounded up (a
    quota of 1.5 CPUs keeps two threads running part of the time each); at least 1."""
    cpus = affinity_cpus()
    quota = cpu_quota()
    return cpus if quota is None else max(1, min(cpus, math.ceil(quota)))
