"""`trtls build --matrix` keys every cell before anything starts (trtls.builds.avoidance.cells.avoid_cells, shared
with the
editor's Build Matrix): built twice unchanged, the second run restores both cells and starts no worker; cells of one
key build once; a 4-cell matrix with one cell changed runs one TensorRT build (workers counted by the probe)."""

from __future__ import annotations

import json
import shutil
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


SAME_KEY_MATRIX = """
[engines.demo.matrix]
output = "build/demo-{precision}.engine"
precision = { a = "models/demo.onnx", b = "models/demo-copy.onnx" }
"""


def test_cells_of_one_key_build_once_and_the_other_is_restored_from_it(workspace: Path, tmp_path: Path) -> None:
    """Two variants naming the same model (a copy: paths are not in the key) with the same settings: one key."""
    shutil.copyfile(workspace / "models" / "demo.onnx", workspace / "models" / "demo-copy.onnx")
    recipe = workspace / "trtls.toml"
    recipe.write_text(recipe.read_text() + SAME_KEY_MATRIX)
    store = tmp_path / "store"
    with_store(workspace, store)
    probe = tmp_path / "probe"
    cmd = [sys.executable, "-m", "trtls", "build", str(workspace), "--engine", "demo", "--matrix"]
    done = subprocess.run(cmd, capture_output=True, text=True, env=probe_env(probe), timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(probes(probe, "worker")) == 1, "one TensorRT build for the two cells of one key"
    (entry,) = (store / "entries").glob("*")
    by_outcome = {s["outcome"]: s for s in summaries(workspace) if s.get("engine") == "demo" and "cells" not in s}
    built, reused = by_outcome["built"], by_outcome["reused"]
    assert built["engineKey"] == reused["engineKey"] == entry.name and reused["workerPid"] is None
    assert reused["reusedFrom"]["buildId"] == built["buildId"] and reused["reusedFrom"]["waitedForIt"] is True
    assert reused["store"]["waitedFor"] == f"cell demo/a of this matrix (build {built['buildId']})"
    a, b = workspace / "build" / "demo-a.engine", workspace / "build" / "demo-b.engine"
    assert a.read_bytes() == b.read_bytes() and reused["engineArtifact"]["path"] == str(b)
    assert json.loads((workspace / ".trtls" / "engines" / "demo.b.json").read_text())  # b's own known-good history


FOUR_CELLS = """
[engines.demo.matrix]
output = "build/demo-{optimization_level}.engine"
optimization_level = [0, 1, 2, 3]
"""


def test_four_cell_matrix_with_one_cell_changed_runs_one_tensorrt_build(workspace: Path, tmp_path: Path) -> None:
    recipe = workspace / "trtls.toml"
    recipe.write_text(recipe.read_text() + FOUR_CELLS)
    with_store(workspace, tmp_path / "store")
    cmd = [sys.executable, "-m", "trtls", "build", str(workspace), "--engine", "demo", "--matrix"]
    first_probe = tmp_path / "probe-first"
    first = subprocess.run(cmd, capture_output=True, text=True, env=probe_env(first_probe), timeout=1800)
    assert first.returncode == 0, first.stdout + first.stderr
    assert len(probes(first_probe, "worker")) == 4
    recipe.write_text(
        recipe.read_text().replace("optimization_level = [0, 1, 2, 3]", "optimization_level = [0, 1, 2, 4]")
    )
    probe = tmp_path / "probe-changed"
    again = subprocess.run(cmd, capture_output=True, text=True, env=probe_env(probe), timeout=900)
    assert again.returncode == 0, again.stdout + again.stderr
    assert len(probes(probe, "worker")) == 1 and len(probes(probe, "tensorrt")) == 1, "only the changed cell builds"
    said = [line for line in again.stdout.splitlines() if ": up to date — engine from build " in line]
    assert sorted(line.split(":")[0] for line in said) == ["demo/o0", "demo/o1", "demo/o2"], again.stdout
    assert [p.name for p in (workspace / "build").glob("demo-*4.engine")] == ["demo-o4.engine"]
    assert len(list((tmp_path / "store" / "entries").glob("*/engine"))) == 5


def test_a_cell_of_a_key_the_store_could_not_keep_is_named_and_the_matrix_is_not_ok(
    workspace: Path, tmp_path: Path
) -> None:
    """The store's disk is full (TRTLS_STORE_FAULT=enospc): cell a builds but its engine is not stored, so cell b of
    the same key has nothing to be restored from. Before, the matrix printed nothing for b and exited 0 with
    build/demo-b.engine missing; now it says so and exits 1."""
    import os

    shutil.copyfile(workspace / "models" / "demo.onnx", workspace / "models" / "demo-copy.onnx")
    recipe = workspace / "trtls.toml"
    recipe.write_text(recipe.read_text() + SAME_KEY_MATRIX)
    with_store(workspace, tmp_path / "store")
    cmd = [sys.executable, "-m", "trtls", "build", str(workspace), "--engine", "demo", "--matrix"]
    env = {**os.environ, "TRTLS_STORE_FAULT": "enospc"}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    assert (workspace / "build" / "demo-a.engine").is_file()
    assert not (workspace / "build" / "demo-b.engine").exists()
    assert done.returncode == 1, done.stdout + done.stderr
    assert "demo/b: " in done.stderr and "TRT332 not built: demo/b" in done.stderr, done.stderr
