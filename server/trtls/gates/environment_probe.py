"""What this machine has, found without importing TensorRT in this process (gate 2's environment side).

The builder's version comes from installed distribution metadata (`importlib.metadata`); Python from this
interpreter; the NVIDIA driver from /proc/driver/nvidia/version; the GPU from `nvidia-smi` when it exists.
`version_matches` is how a recipe's pin is compared with a found version.
"""

from __future__ import annotations

import importlib.metadata as md
import platform
import re
from typing import Any

from trtls.fs import read_text

# (distribution, module) in the order they are looked up
BUILDER_DISTS = (
    ("tensorrt_rtx", "tensorrt_rtx"),
    ("tensorrt-rtx-cu13", "tensorrt_rtx"),
    ("tensorrt-rtx-cu12", "tensorrt_rtx"),
    ("tensorrt", "tensorrt"),
    ("tensorrt-cu13", "tensorrt"),
    ("tensorrt-cu12", "tensorrt"),
    ("tensorrt-cu11", "tensorrt"),
)
CUDA_RUNTIME_DISTS = ("nvidia-cuda-runtime-cu13", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime")


def installed_builders() -> list[dict[str, str]]:
    out: list[dict[str, str]] = []
    seen: set[str] = set()
    for dist, module in BUILDER_DISTS:
        try:
            version = md.version(dist)
        except md.PackageNotFoundError:
            continue
        if module in seen:
            continue
        seen.add(module)
        out.append({"module": module, "version": version, "distribution": dist})
    return out


def _driver_version() -> str | None:
    try:
        text = read_text("/proc/driver/nvidia/version", limit=64 * 1024, follow=True, errors="replace")
    except OSError:
        return None
    m = re.search(r"Kernel Module(?: for [^ ]+)?\s+([0-9][0-9.]+)", text)
    return m.group(1) if m else None


def _nvidia_smi() -> dict[str, str]:
    from trtls.builds.nvidia_smi import nvidia_smi_rows

    rows = nvidia_smi_rows("--query-gpu=name,compute_cap,driver_version", timeout_s=10)
    if not rows or len(rows[0]) < 3:
        return {}
    return {"gpu_name": rows[0][0], "compute_capability": rows[0][1], "cuda_driver": rows[0][2]}


def discover_environment() -> dict[str, Any]:
    """What this machine has, found without importing TensorRT."""
    env: dict[str, Any] = {"python": platform.python_version(), "builders": installed_builders()}
    for dist in CUDA_RUNTIME_DISTS:
        try:
            env["cuda_runtime"] = md.version(dist)
            break
        except md.PackageNotFoundError:
            continue
    smi = _nvidia_smi()
    env["cuda_driver"] = smi.get("cuda_driver") or _driver_version()
    env["gpu_name"] = smi.get("gpu_name")
    env["compute_capability"] = smi.get("compute_capability")
    try:
        env["onnxruntime"] = md.version("onnxruntime")
    except md.PackageNotFoundError:
        env["onnxruntime"] = None
    return env


def version_matches(pin: str, found: str) -> bool:
    """Dotted-prefix match: pin 10.3 matches 10.3.0.26, not 10.30."""
    p, f = pin.strip().split("."), str(found).strip().split(".")
    return f[: len(p)] == p
