"""`nvidia_smi_rows` is the one way trtls asks the driver's tool (the gates' GPU record, a worker's GPU memory): a
missing tool, a failing one and a hung one all read as no rows, never an exception. A real executable on PATH
stands in for the driver's tool (this machine has no GPU)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from trtls.builds.nvidia_smi import nvidia_smi_rows
from trtls.builds.supervisor.resources import gpu_memory_bytes
from trtls.gates.environment_probe import _nvidia_smi


def _tool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    exe = tmp_path / "nvidia-smi"
    exe.write_text("#!/bin/sh\n" + body + "\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")


def test_rows_are_read_the_same_by_both_callers(tmp_path, monkeypatch):
    _tool(
        tmp_path,
        monkeypatch,
        'case "$1" in --query-gpu=*) echo "NVIDIA H200, 9.0, 580.65.06";; '
        f'--query-compute-apps=*) echo "{os.getpid()}, 512"; echo "1, 7";; esac',
    )
    assert nvidia_smi_rows("--query-gpu=name,compute_cap,driver_version", timeout_s=5) == [
        ["NVIDIA H200", "9.0", "580.65.06"]
    ]
    assert _nvidia_smi() == {"gpu_name": "NVIDIA H200", "compute_capability": "9.0", "cuda_driver": "580.65.06"}
    assert gpu_memory_bytes(os.getpid()) == 512 << 20 and gpu_memory_bytes(2) == 0


def test_a_failing_or_hung_tool_is_no_rows(tmp_path, monkeypatch):
    _tool(tmp_path, monkeypatch, 'echo "NVIDIA-SMI has failed" >&2; exit 9')
    assert nvidia_smi_rows("--query-gpu=name", timeout_s=5) is None and _nvidia_smi() == {}
    assert gpu_memory_bytes(os.getpid()) is None
    _tool(tmp_path, monkeypatch, "exec sleep 30")
    assert nvidia_smi_rows("--query-gpu=name", timeout_s=0.5) is None


def test_the_gpu_memory_is_asked_seldom_not_at_the_rss_pace(tmp_path, monkeypatch):
    """On the 16-core H200 host the supervisor's nvidia-smi 4 times a second cost a `large` build's CLI 8–41 % more
    CPU than the bare build; now one query waits at least 100× the last one's time (and GPU_MIN_INTERVAL_S)."""
    from trtls.builds.supervisor.resources import GPU_MIN_INTERVAL_S, ResourceSampler

    calls = tmp_path / "calls"
    _tool(tmp_path, monkeypatch, f'echo x >> "{calls}"; sleep 0.1; echo "{os.getpid()}, 512"')
    sampler = ResourceSampler(os.getpid(), device=True)
    assert not sampler.gpu_due()  # not before GPU_FIRST_S: a short build never starts the tool
    sampler.gpu_due_at = 0.0
    for _ in range(20):  # 5 s of the supervisor's 0.25 s samples, in a loop
        sampler.sample()
    assert calls.read_text().count("x") == 1 and sampler.gpu_queries == 1
    assert sampler.peak_rss and sampler.peak_gpu == 512 << 20
    assert sampler.gpu_interval_s >= max(GPU_MIN_INTERVAL_S, 0.1 * 100)  # the tool took ≥ 0.1 s
    gpu = sampler.record(None, "built", 0)["gpuMemory"]
    assert gpu["peakGpuMemoryBytes"] == 512 << 20
    assert "(1, at most one every" in gpu["how"] and "lower bound" in gpu["how"]
    short = ResourceSampler(os.getpid(), device=True)
    short.sample()
    assert calls.read_text().count("x") == 1  # a worker that ended within GPU_FIRST_S: no query at all
    assert short.record(None, "built", 0)["gpuMemory"]["how"].startswith("not measured: the worker ended before")
