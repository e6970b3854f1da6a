"""Helpers for build-core tests: start real builds of the quickstart sample and stop them at a chosen phase."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from trtls.builds.supervisor.supervisor import Build, Supervisor
from trtls.core.recipe import load_recipe
from trtls.core.summary_record import Summary


def loaded(ws: Path, edit: dict[str, str] | None = None):
    path = ws / "trtls.toml"
    if edit:
        text = path.read_text()
        for old, new in edit.items():
            assert old in text, old
            text = text.replace(old, new)
        path.write_text(text)
    rec = load_recipe(path)
    assert rec.recipe is not None, [f.message for f in rec.findings]
    return rec


def cancel_at_phase(build: Build, phase_index: int, action) -> None:
    """Call `action(build)` when the `phase_index`-th phase (0-based, start order) starts."""
    seen = {"n": 0}

    def listener(b: Build, ev: Any) -> None:
        if ev is not None and ev.type == "phase_start":
            if seen["n"] == phase_index:
                action(b)
            seen["n"] += 1

    build.listeners.append(listener)


async def run_build(ws: Path, engine: str = "demo", **start_kwargs: Any) -> tuple[Supervisor, Build]:
    sup = Supervisor()
    build = sup.start(loaded(ws), engine, **start_kwargs)
    return sup, build


def leftovers(ws: Path) -> list[Path]:
    """Temp files a build may have left anywhere under the workspace (quarantined evidence is not left over)."""
    quarantine = ws / ".trtls" / "quarantine"
    return [
        p for p in ws.rglob("*") if (".trtls-tmp-" in p.name or p.name.endswith(".tmp")) and quarantine not in p.parents
    ]


def process_gone(pid: int | None) -> bool:
    if pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().split(")")[-1].split()[0] == "Z"


def process_gone_soon(pid: int | None, timeout: float = 30.0) -> bool:
    """`process_gone` once the worker has had time to exit: a worker that reported its end is reaped beside the
    summary, not before it (builds/supervisor/supervisor.py, `reap_beside`), so on a loaded machine it may still be
    closing when the summary is read. Its exit needs no event loop (the kernel ends it; a zombie counts as gone)."""
    end = time.monotonic() + timeout
    while not process_gone(pid):
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


async def wait_until(predicate, timeout: float = 60.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not predicate():
        assert loop.time() < end, "condition not met in time"
        await asyncio.sleep(0.02)


@contextlib.contextmanager
def sleeper_with_nonce(nonce: str) -> Iterator[subprocess.Popen[bytes]]:
    """A live process group leader whose environment carries `nonce` as a trtls worker's would (fs.kill.NONCE_ENV):
    what a record naming it, planted or true, points at. Killed and reaped afterwards."""
    from trtls.fs.kill import NONCE_ENV

    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        start_new_session=True,
        env={**os.environ, NONCE_ENV: nonce},
    )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


async def external_worker_build(folder: Path, worker_source: str) -> tuple[Build, Summary, str]:
    """A build of engine `svc` by a worker written from docs/protocol.md (`worker_source`, run as a script; what it
    sends comes from the environment the caller set): the finished Build, its summary, and summary.json's text."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "worker.py").write_text(worker_source)
    (folder / "trtls.toml").write_text(
        f'[engines.svc]\nonnx = "none.onnx"\noutput = "out/svc.engine"\n'
        f'worker = ["{sys.executable}", "{folder / "worker.py"}"]\n'
    )
    build = Supervisor().start(load_recipe(folder / "trtls.toml"), "svc")
    summary = await build.wait()
    (path,) = (folder / ".trtls" / "runs").glob("*/summary.json")
    return build, summary, path.read_text()
