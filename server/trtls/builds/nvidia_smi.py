"""Asking `nvidia-smi` (the driver's own tool) for CSV rows: the GPUs a gate records, the GPU memory a worker holds.
One owner for how it is called and read, so a missing tool, a failing driver or a hang reads the same everywhere:
no rows (None), never an exception."""

from __future__ import annotations

import shutil
import subprocess


def nvidia_smi_rows(query: str, *, timeout_s: float) -> list[list[str]] | None:
    """`nvidia-smi <query> --format=csv,noheader,nounits` as rows of stripped fields; None when the tool is missing,
    fails, or does not answer within `timeout_s`."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        res = subprocess.run(
            [exe, query, "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if res.returncode != 0:
        return None
    return [[field.strip() for field in line.split(",")] for line in res.stdout.splitlines() if line.strip()]
