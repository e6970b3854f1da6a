"""A store with real entries that no TensorRT build made: each one an engine of chosen bytes published under the
key of made-up parts (`key_of_parts`), so a test can plant links, FIFOs and devices in it without a build."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from trtls.store.entries import Entry, Store
from trtls.store.key import key_of_parts


def forged_entry(store: Store, tmp_path: Path, tag: str, data: bytes = b"engine bytes " * 100) -> Entry:
    """Publish `data` under the key of `{"forged": tag}`."""
    parts = {"format": "forged", "forged": tag}
    engine = tmp_path / f"{tag}.engine"
    engine.write_bytes(data)
    return store.publish(key_of_parts(parts), parts, engine, {"buildId": f"build-{tag}"}, None)


def run_python(code: str, *args: str, unshare: bool = False, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`code` in a fresh interpreter (with `unshare -m`: in a mount namespace of its own, so a tmpfs it mounts
    disappears with it). A child bounds what a broken store can do to a test: a FIFO that blocks, /dev/zero that
    never ends (its file size limit is 64 MiB, its memory 4 GiB)."""
    prefix = ["unshare", "-m"] if unshare else []
    limit = (
        "import resource\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (64 << 20, 64 << 20))\n"
        "resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))\n"
    )
    return subprocess.run(
        [*prefix, sys.executable, "-c", limit + code, *args], capture_output=True, text=True, timeout=timeout
    )


def can_unshare_mounts() -> bool:
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    return probe.returncode == 0
