"""What a bug report needs: versions of trtls and its stack, and the builder module a worker would load.

Shared by `trtls info` and the language server's `trtls.printDebugInformation`. The builder is asked in a
child process (`python -m trtls.builds.worker --probe`): neither the CLI's nor the server's process imports
TensorRT.
"""

from __future__ import annotations

import json
import platform
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from trtls import __version__


def _version_of(distribution: str) -> str | None:
    try:
        return version(distribution)
    except PackageNotFoundError:
        return None


def probe_builder(timeout_s: float = 60.0) -> dict[str, Any]:
    """The worker's builder environment (module, version, CUDA, device), or {"error": why}."""
    try:
        out = subprocess.run(
            [sys.executable, "-m", "trtls.builds.worker", "--probe"], capture_output=True, text=True, timeout=timeout_s
        )
        lines = out.stdout.strip().splitlines()
        return (
            json.loads(lines[-1]) if lines else {"error": out.stderr.strip()[-500:] or f"probe exited {out.returncode}"}
        )
    except (subprocess.SubprocessError, ValueError, OSError) as exc:
        return {"error": str(exc)}


def debug_information(builder: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "trtls": __version__,
        "pygls": _version_of("pygls"),
        "lsprotocol": _version_of("lsprotocol"),
        "python": f"{platform.python_version()} ({sys.executable})",
        "platform": platform.platform(),
        "builder": builder if builder is not None else probe_builder(),
    }


def as_text(info: dict[str, Any]) -> str:
    return "\n".join(f"{k}: {json.dumps(v) if isinstance(v, (dict, list)) else v}" for k, v in info.items())
