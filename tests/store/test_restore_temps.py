"""Issue 32 item 9: a restore killed by SIGKILL leaves `<output>.trtls-tmp-<id>` beside the output; the next build of
that output (holding the output's lock) removes it, and so does `trtls gc` for every engine output of the recipe
whose lock it can take. Real `trtls build` processes, a real SIGKILL half-way through the restore's copy."""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.store.conftest import copy_store
from tests.store.helpers import build_cmd, probe_env, run_build, with_store


def temps(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f"{out.name}.trtls-tmp-"))


def kill_mid_restore(ws: Path, tmp_path: Path) -> None:
    """A `trtls build` SIGKILLed with half the engine copied into its temp beside the output."""
    marker = tmp_path / "paused"
    env = probe_env(tmp_path / "probe", TRTLS_STORE_PAUSE="restore", TRTLS_STORE_PAUSE_FILE=str(marker))
    proc = subprocess.Popen(build_cmd(ws), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    marker.unlink()


def test_the_next_build_removes_what_a_killed_restore_left(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    with_store(seed_ws, copy_store(seeded, tmp_path))
    out = seed_ws / "build" / "demo.engine"
    kill_mid_restore(seed_ws, tmp_path)
    left = temps(out)
    assert len(left) == 1 and not out.exists()  # the half-copy, never under the output's name
    done = run_build(seed_ws)
    assert done.returncode == 0, done.stderr
    assert hashlib.sha256(out.read_bytes()).hexdigest() == seeded[1]["engineArtifact"]["sha256"]
    assert temps(out) == []


def test_gc_removes_restore_temps_beside_each_engine_output(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    with_store(seed_ws, copy_store(seeded, tmp_path))
    out = seed_ws / "build" / "demo.engine"
    kill_mid_restore(seed_ws, tmp_path)
    large = seed_ws / "build" / "large.engine.trtls-tmp-large-20261201-101500-ab12cd"  # a dead build's, planted
    large.write_bytes(b"half an engine")
    mine = seed_ws / "build" / "notes.txt"  # not a name trtls makes: never touched
    mine.write_text("keep")
    assert len(temps(out)) == 1
    dry = subprocess.run([sys.executable, "-m", "trtls", "gc", str(seed_ws), "--dry-run", "--json"],
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert dry.returncode == 0, dry.stderr
    assert len(json.loads(dry.stdout)["engineTemps"]["removed"]) == 2 and len(temps(out)) == 1 and large.exists()
    gc = subprocess.run([sys.executable, "-m", "trtls", "gc", str(seed_ws)], capture_output=True, text=True,
                        timeout=120)  # fmt: skip
    assert gc.returncode == 0, gc.stderr
    assert temps(out) == [] and not large.exists() and mine.read_text() == "keep"
    assert "left by a killed restore or build" in gc.stdout
