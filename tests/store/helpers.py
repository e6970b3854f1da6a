"""Helpers for the engine-store tests: `trtls build` as a real child process against a recipe with a `[store]`
table, and a probe (sitecustomize on PYTHONPATH) that records every process that starts a worker or imports
TensorRT, so a test can count them (a worker started parked counts once it is told to start)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

PROBE = """
import os, sys
_d = os.environ.get("TRTLS_TEST_PROBE_DIR")
if _d:
    _argv = getattr(sys, "orig_argv", [])
    # a worker started parked (builds/worker/parked.py) is a worker once it is told to start: it then loads its modules
    _parked = "trtls.builds.worker" in _argv and "--parked" in _argv
    if "trtls.builds.worker" in _argv and not _parked:
        open(os.path.join(_d, f"worker-{os.getpid()}"), "w").close()
    def _hook(event, args):
        if _parked and event == "import" and str(args[0]) == "trtls.builds.worker.main":
            open(os.path.join(_d, f"worker-{os.getpid()}"), "w").close()
        if event == "import" and str(args[0]).startswith("tensorrt"):
            open(os.path.join(_d, f"tensorrt-{os.getpid()}"), "w").close()
        if event == "import" and str(args[0]) == "pydantic":
            open(os.path.join(_d, f"pydantic-{os.getpid()}"), "w").close()
    sys.addaudithook(_hook)
"""


def with_store(
    ws: Path, store: Path, mode: str = "read_write", max_size: str | None = None, remote: str | None = None
) -> None:
    text = (ws / "trtls.toml").read_text()
    table = f'\n[store]\npath = "{store}"\nmode = "{mode}"\n'
    if max_size:
        table += f'max_size = "{max_size}"\n'
    if remote:
        table += f'remote = "{remote}"\n'
    (ws / "trtls.toml").write_text(text + table)


def probe_env(probe_dir: Path, **extra: str) -> dict[str, str]:
    probe_dir.mkdir(parents=True, exist_ok=True)
    site = probe_dir / "site"
    site.mkdir(exist_ok=True)
    (site / "sitecustomize.py").write_text(PROBE)
    env = {**os.environ, "TRTLS_TEST_PROBE_DIR": str(probe_dir), **extra}
    env["PYTHONPATH"] = os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])
    return env


def probes(probe_dir: Path, kind: str) -> list[str]:
    return sorted(p.name for p in probe_dir.glob(f"{kind}-*"))


def build_cmd(ws: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "trtls", "build", str(ws), "--engine", "demo", *args]


def run_build(ws: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(build_cmd(ws, *args), capture_output=True, text=True, env=env, timeout=900)


def summaries(ws: Path) -> list[dict[str, Any]]:
    """Every evidence record of the workspace, oldest first."""
    out = [json.loads(p.read_text()) for p in (ws / ".trtls" / "runs").glob("*/summary.json")]
    return sorted(out, key=lambda s: s.get("startedAt") or 0)


def entries(store: Path) -> list[Path]:
    return sorted((store / "entries").glob("*"))


def local_entry_whole(store: Path, key: str, sha: str) -> None:
    """The local store's entry `key` holds together (its record and its engine) and its engine hashes to `sha`."""
    from trtls.store.entries import Store

    local = Store(store)
    entry = local.get(key, remote=False)
    assert entry is not None and entry.sha256 == sha
    local.verify(entry)


def built_once(seeded_ws: Path, root: Path) -> tuple[Path, str]:
    """The seed's pristine workspace copied under `root` and built once into a store of its own: the workspace and
    its one run's id (every record a build leaves, for a test to damage)."""
    import shutil

    ws = root / "ws"
    shutil.copytree(seeded_ws.parent / "pristine", ws)
    with_store(ws, root / "store")
    done = run_build(ws)
    assert done.returncode == 0, done.stderr
    (run,) = [p.name for p in (ws / ".trtls" / "runs").iterdir()]
    return ws, run
