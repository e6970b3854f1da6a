"""A cold farm run's start (issue 31): what the driver does while `ray.init` waits for the node it starts.

The cell path's modules are imported on `driver_preload`'s thread, started once Ray is imported and before `ray.init`
— not on the thread that places the first cell after it. Checked in a real child process running the real CLI on a
real embedded instance, with a finder that records which thread first asked for each module. An order, not a time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.farm.test_local_farm_tail import embedded_recipe

# what a farm run's driver imports between `connected` and its first cell's host, in builds/farm/driver_preload.py
CELL_PATH = (
    "trtls.builds.farm.host_slot",
    "trtls.builds.farm.remote_process",
    "trtls.builds.farm.farm_actors",
    "pydantic.v1",
)

WHO_IMPORTED = """
import json, sys, threading
watched, first = set(json.loads(sys.argv[2])), {}
class Who:
    def find_spec(self, name, path=None, target=None):
        if name in watched and name not in first:
            first[name] = threading.current_thread().name
        return None
sys.meta_path.insert(0, Who())
from trtls.cli.main import main
code = main(["build", sys.argv[1], "--matrix"])
print("FIRST", json.dumps(first))
sys.exit(code)
"""


@pytest.mark.usefixtures("needs_ray")
def test_the_cell_paths_modules_are_imported_while_ray_init_waits(tmp_path: Path) -> None:
    recipe = embedded_recipe(tmp_path / "ws", cells=2, num_cpus=2)
    env = {**os.environ, "TRTLS_FARM_STATE": str(tmp_path / "farm.json"), "TRTLS_STORE": "off"}
    r = subprocess.run(
        [sys.executable, "-c", WHO_IMPORTED, str(recipe), json.dumps(CELL_PATH)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    first = json.loads(next(line for line in r.stdout.splitlines() if line.startswith("FIRST "))[6:])
    assert set(first) == set(CELL_PATH), first  # every one was needed by the run
    assert set(first.values()) == {"trtls-farm-preload"}, first
