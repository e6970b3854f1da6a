"""`trtls farm down` tells a stop from a stale state file (issue 27 item 8's kill surface, tried again with a forged
farm state): a state file naming a live process that is not a farm head (its start id recorded, a nonce it never
carried) left that process alone — right — but said "stopped the warm local farm (pid N)". Now it says no farm was
running, the stale state was removed and nothing was signalled. A real process, a real state file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from trtls.fs.kill import process_start_id


def test_farm_down_on_a_state_naming_another_program_says_nothing_was_stopped(tmp_path: Path) -> None:
    state = tmp_path / "state" / "farm.json"
    state.parent.mkdir()
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        state.write_text(
            json.dumps({
                "address": "127.0.0.1:1", "pid": stranger.pid, "num_cpus": 1, "labels": {}, "started_at": 0,
                "auth_mode": "token", "token_path": str(state.with_suffix(".token")),
                "start_id": process_start_id(stranger.pid), "nonce": "b" * 32,
            })
        )  # fmt: skip
        env = {**os.environ, "TRTLS_FARM_STATE": str(state)}
        down = subprocess.run(
            [sys.executable, "-m", "trtls", "farm", "down"], env=env, capture_output=True, text=True, timeout=120
        )
        assert down.returncode == 0, down.stdout + down.stderr
        assert "stopped" not in down.stdout, down.stdout
        assert "no warm local farm was running" in down.stdout and "nothing was signalled" in down.stdout
        assert stranger.poll() is None  # never signalled
        assert not state.exists()  # the stale state is gone
    finally:
        stranger.kill()
        stranger.wait()
