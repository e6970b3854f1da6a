"""What a build worker cost, measured from outside: peak memory, GPU memory, and the kernel's OOM killer.

- Peak RSS: the worker reports its own `getrusage` peak in `build_finished`; a worker that dies cannot, so
  the supervisor also samples `VmHWM` (the kernel's high-water mark) from /proc while it runs. For a
  killed worker the last sample is a lower bound and is labelled so.
- GPU memory: only where a device exists (`nvidia-smi --query-compute-apps`); otherwise `no device`. Not at the
  RSS's pace: one query is a process that loads NVML (measured on the 16-core H200 host, 2026-12-05: a `large`
  build's CLI used 1.08–1.41× the bare build's CPU while the supervisor asked 4 times a second, 1.006× on a
  machine with no GPU), so the first comes after GPU_FIRST_S and each next after at least GPU_MIN_INTERVAL_S, and
  at least 1/GPU_COST_SHARE times as long as the last one took: its own cost stays under 1 % of one core.
- OOM killer: the worker's memory cgroup counts the processes the OOM killer took (cgroup v2
  `memory.events` `oom_kill`, cgroup v1 `memory.oom_control` `oom_kill`). The counter is read before the
  worker starts and after it died: a rise says the OOM killer acted in that cgroup during the build (the
  cgroup may hold other processes, so it is "involved", not proof it chose this worker); no counter
  readable means the system cannot tell, recorded as null.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from trtls.core.cgroups import cgroup_dirs
from trtls.fs.read import read_text

PROC_LIMIT = 1 << 20  # /proc and cgroup files of one process are a few KiB
GPU_FIRST_S = 1.0  # a worker that ended before this held no GPU memory worth a query
GPU_MIN_INTERVAL_S = 5.0
GPU_COST_SHARE = 0.01  # the share of one core nvidia-smi may take: the next query waits 100× the last one's time


def _proc_text(path: str | Path) -> str:
    """A /proc or /sys file (the kernel's, read through the door like every read)."""
    return read_text(path, limit=PROC_LIMIT, follow=True, errors="replace")


def vm_hwm_bytes(pid: int) -> int | None:
    """The process's peak RSS so far (VmHWM), None when /proc cannot tell (gone, not Linux)."""
    try:
        text = _proc_text(f"/proc/{pid}/status")
    except OSError:
        return None
    m = re.search(r"^VmHWM:\s+(\d+)\s+kB", text, re.M)
    return int(m.group(1)) * 1024 if m else None


def _memory_cgroup_files(pid: int | str = "self") -> list[Path]:
    """The files that may count the OOM killer's kills in `pid`'s memory cgroup: cgroup v1's `memory.oom_control`,
    v2's `memory.events` (core.cgroups says where the cgroup is)."""
    return [d / name for d in cgroup_dirs("memory", pid) for name in ("memory.oom_control", "memory.events")]


def oom_kill_count(pid: int | str = "self") -> dict[str, Any] | None:
    """{"count": N, "source": file} from the first memory cgroup file that has an oom_kill counter."""
    for f in _memory_cgroup_files(pid):
        try:
            m = re.search(r"^oom_kill (\d+)$", _proc_text(f), re.M)
        except OSError:
            continue
        if m:
            return {"count": int(m.group(1)), "source": str(f)}
    return None


def oom_verdict(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, Any]:
    """Whether the OOM killer acted while the worker ran: true, false, or null (the system cannot tell)."""
    if before is None or after is None or before.get("source") != after.get("source"):
        return {"oomKill": None, "how": "no readable memory-cgroup oom_kill counter: the system cannot tell"}
    rose = after["count"] > before["count"]
    return {
        "oomKill": rose,
        "how": f"{after['source']} oom_kill {before['count']} → {after['count']} during the build"
        + (" (the cgroup may hold other processes)" if rose else ""),
    }


def gpu_memory_bytes(pid: int) -> int | None:
    """GPU memory the process holds, from nvidia-smi; None when it cannot be read."""
    from trtls.builds.nvidia_smi import nvidia_smi_rows

    rows = nvidia_smi_rows("--query-compute-apps=pid,used_memory", timeout_s=5)
    if rows is None:
        return None
    for fields in rows:
        if len(fields) == 2 and fields[0] == str(pid) and fields[1].isdigit():
            return int(fields[1]) << 20
    return 0


class ResourceSampler:
    """Peak RSS and GPU memory of one worker, sampled by the supervisor while it runs: the RSS at every call (a
    /proc read), the GPU memory when `gpu_due` (an nvidia-smi process, on its own cadence: see the module's text)."""

    def __init__(self, pid: int, device: bool):
        self.pid, self.device = pid, device
        self.peak_rss: int | None = None
        self.peak_gpu: int | None = None
        self.gpu_queries = 0
        self.gpu_interval_s = GPU_MIN_INTERVAL_S
        self.gpu_due_at = time.monotonic() + GPU_FIRST_S
        self.oom_before = oom_kill_count("self")  # the worker inherits this cgroup

    def sample(self) -> None:
        """The RSS, and the GPU memory when it is due (blocking: the supervisor calls `sample_gpu` on a thread)."""
        self.sample_rss()
        if self.gpu_due():
            self.sample_gpu()

    def sample_rss(self) -> None:
        rss = vm_hwm_bytes(self.pid)
        if rss is not None:
            self.peak_rss = max(self.peak_rss or 0, rss)

    def gpu_due(self) -> bool:
        return self.device and time.monotonic() >= self.gpu_due_at

    def sample_gpu(self) -> None:
        t0 = time.monotonic()
        gpu = gpu_memory_bytes(self.pid)
        took = time.monotonic() - t0
        self.gpu_queries += 1
        self.gpu_interval_s = max(GPU_MIN_INTERVAL_S, took / GPU_COST_SHARE)
        self.gpu_due_at = time.monotonic() + self.gpu_interval_s
        if gpu is not None:
            self.peak_gpu = max(self.peak_gpu or 0, gpu)

    def record(self, reported_rss: int | None, outcome: str, exit_code: int | None) -> dict[str, Any]:
        """The `resources` block of the evidence."""
        rss: dict[str, Any]
        if reported_rss is not None:
            rss = {"peakRssBytes": reported_rss, "how": "the worker's getrusage(RUSAGE_SELF).ru_maxrss"}
        elif self.peak_rss is not None:
            rss = {
                "peakRssBytes": self.peak_rss,
                "how": "last /proc VmHWM sample before the worker ended (a lower bound)",
            }
        else:
            rss = {"peakRssBytes": None, "how": "not measured: the worker ended before a sample"}
        gpu: dict[str, Any]
        every = f"at most one every {self.gpu_interval_s:g} s"
        if not self.device:
            gpu = {"peakGpuMemoryBytes": None, "how": "no device"}
        elif self.peak_gpu is not None:
            gpu = {
                "peakGpuMemoryBytes": self.peak_gpu,
                "how": f"nvidia-smi --query-compute-apps samples ({self.gpu_queries}, {every}): a lower bound",
            }
        elif self.gpu_queries == 0:
            gpu = {"peakGpuMemoryBytes": None, "how": f"not measured: the worker ended before {GPU_FIRST_S:g} s"}
        else:
            gpu = {"peakGpuMemoryBytes": None, "how": "unknown: nvidia-smi was not available"}
        out: dict[str, Any] = {**rss, "gpuMemory": gpu}
        if outcome == "killed":
            out["oom"] = oom_verdict(self.oom_before, oom_kill_count("self") if self.oom_before else None)
            out["oom"]["exitSignal"] = -exit_code if exit_code is not None and exit_code < 0 else None
        return out
