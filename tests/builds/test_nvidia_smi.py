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
