"""The device without a cuInit (issue 32 item 7, issue 31): the store's fast path asks whether device 0 is the one its
memo's key was computed with. A process's first cuInit costs ~0.2 s on a GPU host — more than the rest of a hit — so
the kernel driver's own files answer first (builds.cuda.device_fingerprint): its version, each GPU this process can
open (device node minor, model, UUID, bus) and the variables that choose CUDA's devices. Real files in a folder laid
out as /proc/driver/nvidia and /dev are (this host has no NVIDIA driver: its own answer is None, and the driver is
asked as before)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trtls.builds import cuda
from trtls.builds.avoidance.lookup import prepare
from trtls.builds.avoidance.memo import _same_device, remembered_device
from trtls.core.recipe import load_recipe

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
    for var in cuda.CHOOSING_VARIABLES:
        monkeypatch.delenv(var, raising=False)
    # the account's device memo (memo.account_device_path) of this fake driver stays in the test's own folder
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "cache").mkdir()
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


def _memo(state: Path, name: str, device: dict, fingerprint: str | None) -> None:
    (state / "engines").mkdir(parents=True, exist_ok=True)
    (state / "engines" / name).write_text(json.dumps({"device": device, "deviceFingerprint": fingerprint}))


def test_a_build_takes_its_device_from_the_memo_while_the_driver_files_say_the_same(
    driver: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key's device without a cuInit (issue 31): the last build's memo says device 0 was an H200 (this host's
    driver, asked, finds none), and the driver's files are those read beside it, so `prepare` keys the build with the
    H200 and the driver is never asked; another fingerprint, a damaged memo, a memo of another engine or a device with
    other fields: the driver is asked, as before."""
    elsewhere = {"cuda_driver": "13.0", "device_name": "NVIDIA H200", "compute_capability": "9.0"}
    state = workspace / ".trtls"
    asked: list[int] = []
    real_driver = cuda.cuda_driver
    monkeypatch.setattr(cuda, "cuda_driver", lambda: asked.append(1) or real_driver())

    _memo(state, "demo.hit.json", elsewhere, cuda.device_fingerprint())
    assert remembered_device(state, "demo") == elsewhere
    use = prepare(load_recipe(workspace / "trtls.toml"), "demo", no_store=True)
    assert use.device == elsewhere and asked == [], "the memo said the device: no cuInit"
    assert use.key is not None and use.key.parts["target"]["device"] == "NVIDIA H200"

    assert remembered_device(state, "other") is None  # no memo of that engine
    _memo(state, "demo.hit.json", elsewhere, "another driver")
    assert remembered_device(state, "demo") is None
    _memo(state, "demo.job.json", elsewhere, cuda.device_fingerprint())  # a --no-store build's memo says it too
    assert remembered_device(state, "demo") == elsewhere
    (state / "engines" / "demo.job.json").chmod(0o666)  # another account could have written what it says
    assert remembered_device(state, "demo") is None, "only this account's own memo says the device"
    (state / "engines" / "demo.job.json").chmod(0o644)
    assert remembered_device(state, "demo") == elsewhere
    (state / "engines" / "demo.job.json").write_text("{not json")
    assert remembered_device(state, "demo") is None
    _memo(state, "demo.job.json", {**elsewhere, "extra": 1}, cuda.device_fingerprint())
    assert remembered_device(state, "demo") is None, "only the driver probe's own fields"
    use = prepare(load_recipe(workspace / "trtls.toml"), "demo", no_store=True)
    assert asked == [1] and use.device == real_driver(), "no memo holds: the driver is asked"


def test_the_library_path_is_part_of_the_fingerprint(driver: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A CUDA forward-compatibility libcuda (found through LD_LIBRARY_PATH) reports another driver version than the
    kernel module: another library path, another fingerprint."""
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    first = cuda.device_fingerprint()
    monkeypatch.setenv("LD_LIBRARY_PATH", "/usr/local/cuda/compat")
    assert cuda.device_fingerprint() not in (None, first)


def test_a_projects_first_build_takes_the_device_this_account_last_probed_on_this_host(
    driver: Path, workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh checkout, a CI job's clone or a removed memo has no memo of its own: the key's device then comes from
    this account's last driver probe on this host ($XDG_CACHE_HOME/trtls/device.json, written beside the driver
    fingerprint), so the project's first build — a store hit on the full path included — runs no cuInit (~0.2 s and
    ~60 ms at exit on an H200 host). Only while the driver's files say what they said, and only the account's own
    file."""
    import shutil

    from trtls.builds.avoidance.memo import account_device_path

    elsewhere = {"cuda_driver": "13.0", "device_name": "NVIDIA H200", "compute_capability": "9.0"}
    asked: list[int] = []
    monkeypatch.setattr(cuda, "cuda_driver", lambda: asked.append(1) or dict(elsewhere))

    use = prepare(load_recipe(workspace / "trtls.toml"), "demo", no_store=True)
    assert asked == [1] and use.device == elsewhere, "nothing remembered yet: the driver is asked"
    kept = json.loads(account_device_path().read_text())
    assert kept == {"deviceFingerprint": cuda.device_fingerprint(), "device": elsewhere}

    fresh = tmp_path / "fresh-checkout"
    shutil.copytree(workspace, fresh, ignore=shutil.ignore_patterns(".trtls"))
    assert remembered_device(fresh / ".trtls", "demo") == elsewhere
    use = prepare(load_recipe(fresh / "trtls.toml"), "demo", no_store=True)
    assert asked == [1] and use.device == elsewhere, "the account's probe said the device: no cuInit"

    account_device_path().chmod(0o666)  # another account could have written what it says
    assert remembered_device(fresh / ".trtls", "other") is None
    account_device_path().chmod(0o644)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")  # another device 0: another fingerprint
    assert remembered_device(fresh / ".trtls", "other") is None
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert remembered_device(fresh / ".trtls", "other") == elsewhere

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "no-such-cache" / "deeper"))  # no existing folder to make it in
    prepare(load_recipe(fresh / "trtls.toml"), "demo", no_store=True)
    assert not account_device_path().exists(), "the memo's folder is made only inside an existing cache or home"


MATRIX_DRIVER = """
import json, sys
from trtls.builds import cuda
cuda.NVIDIA_PROC, cuda.DEVICE_NODES = sys.argv[1], sys.argv[2]
asked = []
cuda.cuda_driver = lambda: asked.append("cuInit") or {"cuda_driver": "13.0", "device_name": "NVIDIA H200",
                                                       "compute_capability": "9.0"}
real_warm = cuda.warm_driver
cuda.warm_driver = lambda *a, **k: asked.append("warm thread") or real_warm(*a, **k)
from trtls.cli.main import main
code = main(["build", sys.argv[3], *sys.argv[4:]])
print(json.dumps({"code": code, "asked": asked}))
"""


def test_a_matrix_takes_its_device_from_the_accounts_probe_and_starts_no_cuinit(
    driver: Path, workspace: Path, tmp_path: Path
) -> None:
    """`--all` and `--matrix` (a farm run's driver) key their cells in this process; where this account's last probe
    on this host still says the device, that process starts no cuInit thread at all (~0.19 s of CPU and ~60 ms at its
    exit on an H200 host). A real process with this fake driver's files; its first run probes (and remembers), the
    second asks nothing."""
    recipe = workspace / "trtls.toml"
    recipe.write_text(recipe.read_text().split("[engines.large]")[0])  # `--all`: demo only
    env = {**os.environ, "XDG_CACHE_HOME": str(driver / "cache"), "TRTLS_STORE": "off"}
    answers = []
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-c", MATRIX_DRIVER, str(driver / "proc"), str(driver / "dev"), str(workspace), "--all"],
            capture_output=True,
            text=True,
            timeout=600,
            env=env,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        answers.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    assert answers[0]["code"] == 0 and "cuInit" in answers[0]["asked"], answers[0]
    assert answers[1] == {"code": 0, "asked": []}, "the account's probe said the device: no cuInit, no thread for it"
    assert (
        remembered_device(workspace / ".trtls", None)
        == json.loads((driver / "cache" / "trtls" / "device.json").read_text())["device"]
    )
