"""`trtls build --matrix --json` on a cluster keeps stdout for its JSON lines (issue 23's benchmark met this: a
16-cell run printed `(raylet) WARNING: 8 PYTHON worker processes have been started …` into the stream, and the
reader failed on it). Ray's driver prints its raylet's warnings to `sys.stdout` from a thread of its own, whatever
`log_to_driver` says; the CLI lends `sys.stdout` to stderr for a farm run. Here a thread in the real CLI process
prints to `sys.stdout` throughout the run, as Ray's does (a sitecustomize on PYTHONPATH), on the real test cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.farm.conftest import LABEL, engine_table, farm_recipe

CHATTY = """
import os, sys, threading, time
if os.environ.get("TRTLS_TEST_CHATTY") and "trtls.cli.main" in getattr(sys, "orig_argv", []):
    def _chatter():  # like Ray's driver: while it is connected to a cluster
        while True:
            ray = sys.modules.get("ray")
            if ray is not None and getattr(ray, "is_initialized", lambda: False)():
                print("(raylet) WARNING: 8 PYTHON worker processes have been started on node …", file=sys.stdout,
                      flush=True)
            time.sleep(0.05)
    threading.Thread(target=_chatter, daemon=True).start()
"""


def test_a_library_printing_to_stdout_never_enters_the_json_stream(ray_cluster, tmp_path: Path) -> None:
    path = farm_recipe(tmp_path / "ws", ray_cluster.address, engine_table("demo", "demo", f'{{ "{LABEL}" = "SM89" }}'))
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(CHATTY)
    env = {**os.environ, "TRTLS_TEST_CHATTY": "1", "TRTLS_STORE": "off",
           "PYTHONPATH": os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "trtls.cli.main", "build", str(path), "--json"],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    records = [json.loads(line) for line in lines]  # every line is JSON: none of the chatter
    assert any(r.get("type") == "summary" for r in records) and any(r.get("type") == "phase_start" for r in records)
    assert "(raylet) WARNING" in done.stderr, "the chatter went to stderr, not nowhere"
