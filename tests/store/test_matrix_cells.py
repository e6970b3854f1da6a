"""`trtls build --matrix` keys every cell before anything starts (trtls.builds.avoidance.avoid_cells, shared with the
editor's Build Matrix): built twice unchanged, the second run restores both cells and starts no worker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.store.helpers import probe_env, probes, summaries, with_store

DEMO_MATRIX = """
[engines.demo.matrix]
output = "build/demo-{optimization_level}.engine"
optimization_level = [0, 1]
"""


def test_matrix_built_twice_restores_every_cell_without_a_worker(workspace: Path, tmp_path: Path) -> None:
    recipe = workspace / "trtls.toml"
    recipe.write_text(recipe.read_text() + DEMO_MATRIX)
    with_store(workspace, tmp_path / "store")
    env = probe_env(tmp_path / "probe")
    cmd = [sys.executable, "-m", "trtls", "build", str(workspace), "--engine", "demo", "--matrix"]
    first = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    assert first.returncode == 0, first.stderr
    workers = probes(tmp_path / "probe", "worker")
    assert len(list((tmp_path / "store" / "entries").glob("*/engine"))) == 2 and workers
    second = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    assert second.returncode == 0, second.stderr
    said = [line for line in second.stdout.splitlines() if ": up to date — engine from build " in line]
    assert len(said) == 2 and all(line.startswith("demo/") for line in said), second.stdout
    assert probes(tmp_path / "probe", "worker") == workers, "no worker for cells the store holds"
    reused = [s for s in summaries(workspace) if s["outcome"] == "reused"]
    assert len(reused) == 2 and all(s["workerPid"] is None for s in reused)
