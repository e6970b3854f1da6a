"""A node trtls started takes its scratch folder with it when it ends (builds/farm/node_scratch.py): an embedded
instance's node when the run that started it disconnects, a warm farm's when `trtls farm down` stops its head.

Before, every run of an embedded instance (a new Ray node each time) left that node's copy of the ONNX and its job
folders under /tmp/trtls-farm — a disk that fills by one model per run. Real CLI runs on a real embedded instance and a
real warm farm, the system temp folder pointed at the test's own (Ray's sessions stay in the usual one: its socket
paths must stay short)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.farm.test_local_farm_tail import embedded_recipe
from tests.farm.test_warm_farm import local_recipe
from trtls.fs import OWNED_MARK

TRTLS = [sys.executable, "-m", "trtls.cli.main"]


def temp_env(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """The environment of a trtls run whose system temp folder is the test's; and where its nodes' scratch lies."""
    temp = tmp_path / "temp"
    temp.mkdir()
    env = {
        **os.environ,
        "TMPDIR": str(temp),
        "RAY_TMPDIR": os.environ.get("RAY_TMPDIR") or tempfile.gettempdir(),
        "TRTLS_FARM_STATE": str(tmp_path / "farm.json"),
        "TRTLS_STORE": "off",
    }
    return env, temp / "trtls-farm"


def node_folders(farm: Path) -> list[str]:
    return sorted(p.name for p in farm.iterdir() if p.name != OWNED_MARK) if farm.is_dir() else []


@pytest.mark.usefixtures("needs_ray")
def test_an_embedded_instances_node_scratch_is_removed_when_its_run_ends(tmp_path: Path) -> None:
    env, farm = temp_env(tmp_path)
    recipe = embedded_recipe(tmp_path / "ws", cells=2, num_cpus=2)
    r = subprocess.run(
        [*TRTLS, "build", str(recipe), "--matrix", "--json"], env=env, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    summary = json.loads(r.stdout.splitlines()[-1])["summary"]
    assert summary["outcome"] == "built" and summary["cluster"]["warm"] is False
    assert (farm / OWNED_MARK).is_file()  # the run's node made its scratch here (the ONNX it was sent) …
    assert node_folders(farm) == []  # … and it went with the node


@pytest.mark.usefixtures("needs_ray")
def test_a_warm_farms_node_scratch_stays_while_it_runs_and_goes_with_farm_down(tmp_path: Path) -> None:
    env, farm = temp_env(tmp_path)
    run = lambda *a: subprocess.run([*TRTLS, *a], env=env, capture_output=True, text=True, timeout=600)  # noqa: E731
    up = run("farm", "up", "--num-cpus", "1", "--label", "trtls/pool=warm")
    assert up.returncode == 0, up.stdout + up.stderr
    try:
        built = run("build", str(local_recipe(tmp_path / "ws", "demo", 1, 1, "warm")), "--matrix", "--json")
        assert built.returncode == 0, built.stderr[-2000:]
        assert json.loads(built.stdout.splitlines()[-1])["summary"]["cluster"]["warm"] is True
        during = node_folders(farm)
        assert len(during) == 1  # the farm's node keeps the ONNX it was sent for its next run …
        assert list((farm / during[0] / "onnx").glob("*.onnx"))
    finally:
        down = run("farm", "down")
    assert down.returncode == 0, down.stdout + down.stderr
    assert node_folders(farm) == []  # … and its scratch goes when the farm stops


@pytest.mark.usefixtures("needs_ray")
def test_a_nodes_scratch_folder_planted_as_a_link_fails_the_cell_with_the_nodes_refusal(tmp_path: Path) -> None:
    """The node refuses to make its scratch through a link (another account's, on a shared /tmp). Its refusal is
    the cell's verdict, at once and in words: `failed` with the refusal and both paths — not `killed: the worker
    died (… RayTaskError(UnsafeWrite))` after 30 s of waiting for a node that never died (node_loss.py). Nothing is
    written where the link points, and the link is left."""
    env, farm = temp_env(tmp_path)
    victim = tmp_path / "someone-elses"
    victim.mkdir()
    (victim / "keep.txt").write_text("precious")
    farm.symlink_to(victim)
    recipe = embedded_recipe(tmp_path / "ws", cells=1, num_cpus=1)
    r = subprocess.run(
        [*TRTLS, "build", str(recipe), "--matrix", "--json"], env=env, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    summary = json.loads(r.stdout.splitlines()[-1])["summary"]
    (cell,) = summary["cells"]
    assert summary["outcome"] == cell["outcome"] == "failed"
    evidence = json.loads(Path(cell["evidence"]).read_text())
    assert "UnsafeWrite" in evidence["error"] and str(victim) in evidence["error"], evidence["error"]
    assert evidence["error"].startswith("the cell failed on ")
    assert farm.is_symlink() and sorted(p.name for p in victim.iterdir()) == ["keep.txt"]
