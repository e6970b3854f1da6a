"""`trtls --version` and `trtls info`: what a bug report needs, from the real installation."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version

import trtls


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "trtls", *args], capture_output=True, text=True, timeout=120)


def test_version_flag() -> None:
    r = run("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"trtls {trtls.__version__}"


def test_info_names_the_builder_a_build_would_use() -> None:
    r = run("info", "--json")
    assert r.returncode == 0, r.stderr
    info = json.loads(r.stdout)
    assert info["trtls"] == trtls.__version__ and info["pygls"] == version("pygls")
    # the probe ran in a worker process and found the installed TensorRT-RTX wheel
    assert info["builder"]["module"] == "tensorrt_rtx"
    assert version("tensorrt-rtx-cu13").startswith(".".join(info["builder"]["version"].split(".")[:2]))
    # introspected, not assumed: TensorRT-RTX has no weak-typing flags, only strongly typed networks
    caps = info["builder"]["capabilities"]
    assert caps["legacy_precision_flags"] == [] and "FP16" not in caps["builder_flags"]
    assert "STRONGLY_TYPED" in caps["network_flags"] and "VERSION_COMPATIBLE" in caps["builder_flags"]
    assert caps["dla_cores"] == 0 and "TACTIC_SHARED_MEMORY" in caps["memory_pools"]
    text = run("info")
    assert text.returncode == 0 and "builder: {" in text.stdout and f"trtls: {trtls.__version__}" in text.stdout


def test_info_says_why_when_the_forced_builder_is_missing() -> None:
    # full TensorRT is not installable here: forcing it must give the reason and exit 1, not a traceback
    env = {**os.environ, "TRTLS_BUILDER_MODULE": "tensorrt"}
    r = subprocess.run(
        [sys.executable, "-m", "trtls", "info", "--json"], capture_output=True, text=True, timeout=120, env=env
    )
    assert r.returncode == 1, r.stdout + r.stderr
    error = json.loads(r.stdout)["builder"]["error"]
    assert "tensorrt" in error and "Traceback" not in error, error
