"""Two `trtls farm up` at the same time (two terminals, a script run twice) each started a head and each said
"started … stop it with: trtls farm down", while the state file named only one: `farm down` stopped that one and the
other head — with its Ray processes — ran on, which no trtls command could stop. `farm up` now holds a lock from its
look at the state to the new head's state written: one head, and the second command says it is already running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.farm.conftest import require_ray

HEAD_MODULE = "trtls.builds.farm.warm_head"


def heads_of(state: Path) -> list[int]:
    """The warm heads started for this test's state file (found by their own environment)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if HEAD_MODULE.encode() in cmdline and f"TRTLS_FARM_STATE={state}".encode() in environ:
            pids.append(int(entry.name))
    return pids


def test_two_farm_ups_at_once_start_one_head(tmp_path: Path) -> None:
    require_ray()
    state = tmp_path / "farm" / "farm.json"
    env = {**os.environ, "TRTLS_FARM_STATE": str(state)}
    cmd = [sys.executable, "-m", "trtls.cli.main", "farm", "up", "--num-cpus", "1", "--workers", "0"]
    try:
        ups = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in "ab"]
        outs = [p.communicate(timeout=300) for p in ups]
        assert [p.returncode for p in ups] == [0, 0], outs
        said = sorted(out.split(":", 1)[0] for out, _ in outs)
        assert said == ["already running", "started"], outs
        assert len(heads_of(state)) == 1
        down_cmd = [sys.executable, "-m", "trtls.cli.main", "farm", "down"]
        down = subprocess.run(down_cmd, env=env, capture_output=True, text=True, timeout=120)
        assert down.returncode == 0, down.stdout + down.stderr
        assert heads_of(state) == []  # farm down stopped every head there was
    finally:
        for pid in heads_of(state):  # a head the old code left behind: stopped by its own pid, never by name
            os.kill(pid, signal.SIGTERM)
