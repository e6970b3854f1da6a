"""The device without a cuInit (issue 32 item 7, issue 31): the store's fast path asks whether device 0 is the one its
memo's key was computed with. A process's first cuInit costs ~0.2 s on a GPU host — more than the rest of a hit — so
the kernel driver's own files answer first (builds.cuda.device_fingerprint): its version, each GPU this process can
open (device node minor, model, UUID, bus) and the variables that choose CUDA's devices. Real files in a folder laid
out as /proc/driver/nvidia and /dev are (this host has no NVIDIA driver: its own answer is None, and the driver is
asked as before)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trtls.builds import cuda
from trtls.builds.avoidance.memo import _same_device

INFO = "Model: \t\t NVIDIA H200\nGPU UUID: \t GPU-4fd2\nBus Location: \t 0000:{bus}:00.0\nDevice Minor: \t {minor}\n"


@pytest.fixture
def driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A driver with two GPUs, of which this process can open the first's node only."""
    proc, dev = tmp_path / "proc", tmp_path / "dev"
    (proc / "gpus").mkdir(parents=True)
    dev.mkdir()
    (proc / "version").write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.95.05\n")
    for minor, bus in ((0, "18"), (1, "2a")):
        gpu = proc / "gpus" / f"0000:{bus}:00.0"
        gpu.mkdir()
        (gpu / "information").write_text(INFO.format(bus=bus, minor=minor))
    (dev / "nvidia0").write_text("")
    (dev / "nvidiactl").write_text("")
    monkeypatch.setattr(cuda, "NVIDIA_PROC", str(proc))
    monkeypatch.setattr(cuda, "DEVICE_NODES", str(dev))
    for var in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


def test_the_fingerprint_changes_with_what_decides_device_0(driver: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = cuda.device_fingerprint()
    assert first is not None and "NVIDIA H200" in first and "580.95.05" in first
    assert cuda.device_fingerprint() == first  # stable

    info = driver / "proc" / "gpus" / "0000:2a:00.0" / "information"
    info.write_text(INFO.format(bus="2a", minor=1).replace("H200", "L40S"))
    assert cuda.device_fingerprint() == first, "a GPU this process cannot open changed what it sees"

    (driver / "dev" / "nvidia1").write_text("")  # now it can open the second GPU too
    second = cuda.device_fingerprint()
    assert second != first and "L40S" in str(second)

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert cuda.device_fingerprint() not in (first, second)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")

    (driver / "proc" / "version").write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  590.10\n")
    assert cuda.device_fingerprint() != second  # another driver


def test_no_driver_files_no_fingerprint(driver: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cuda, "NVIDIA_PROC", str(driver / "absent"))
    assert cuda.device_fingerprint() is None


def test_the_fast_paths_device_check_takes_the_fingerprint_else_asks_the_driver(driver: Path) -> None:
    """A memo whose device this host's driver would not report (an H200 here, where cuda_driver() finds none): with
    the fingerprint read beside it, the same device; with another fingerprint, the driver is asked and disagrees."""
    here = cuda.cuda_driver()
    elsewhere = {"cuda_driver": "13.0", "device_name": "NVIDIA H200", "compute_capability": "9.0"}
    assert here != elsewhere
    fingerprint = cuda.device_fingerprint()
    assert _same_device({"device": elsewhere, "deviceFingerprint": fingerprint})
    assert not _same_device({"device": elsewhere, "deviceFingerprint": fingerprint + " changed"})
    assert not _same_device({"device": elsewhere})  # a memo from before the fingerprint: the driver decides
    assert _same_device({"device": here})  # no fingerprint kept: the driver asked, and it agrees
