"""A hostile farm state file (`trtls farm status|down`, `$TRTLS_FARM_STATE`) whose pid is a JSON number no process
can have — Infinity, 1e300, a 20-digit integer — is a stale state, said as such; it once ended in a traceback
(OverflowError from int(inf), or from os.kill on a pid larger than a C long)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

PIDS = ["Infinity", "-Infinity", "1e300", "99999999999999999999", "-99999999999999999999"]


def farm(state: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRTLS_FARM_STATE": str(state)}
    return subprocess.run(
        [sys.executable, "-m", "trtls.cli.main", "farm", *args], capture_output=True, text=True, env=env, timeout=120
    )


@pytest.mark.parametrize("pid", PIDS)
def test_a_pid_no_process_can_have_is_a_stale_state(tmp_path: Path, pid: str) -> None:
    state = tmp_path / "farm" / "farm.json"
    state.parent.mkdir()
    state.write_text(f'{{"address": "127.0.0.1:1", "pid": {pid}, "num_cpus": {pid}}}')
    for args, code in ((("status",), 1), (("status", "--json"), 1), (("down",), 0)):
        r = farm(state, *args)
        assert "Traceback" not in r.stderr, r.stderr
        assert r.returncode == code, (args, r.stdout, r.stderr)
        assert "no warm local farm" in r.stdout or '"running": false' in r.stdout, (args, r.stdout)
    assert not state.exists() or pid.lstrip("-") == "Infinity"  # a state that names no pid at all is left alone
