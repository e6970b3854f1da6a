"""The engine store's writes go through the same path policy as a build (issue 22 after issue 19): the fast path of
an unchanged build, a reuse and a rollback restore through the atomic writer, never through a symlink and never
into a folder that a symlink swapped in since the recipe was checked; and the fast path never skips the orphan
recovery of a build whose supervisor was killed. Real `trtls build` processes, a real store."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.store.conftest import copy_store
from tests.store.helpers import run_build, summaries, with_store
from trtls.core.paths import UnsafeWrite
from trtls.store.entries import Store


def _hit_once(seeded: tuple[Path, dict], ws: Path, tmp_path: Path) -> Path:
    """A reuse through the full path: the store serves it and the fast path's memo is written."""
    with_store(ws, copy_store(seeded, tmp_path))
    first = run_build(ws)
    assert first.returncode == 0, first.stderr
    assert (ws / ".trtls" / "engines" / "demo.hit.json").is_file(), "the reuse left no fast-path memo"
    return ws / "build" / "demo.engine"


def test_the_fast_path_never_restores_into_a_folder_swapped_for_a_symlink(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    out = _hit_once(seeded, seed_ws, tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for f in out.parent.iterdir():
        f.unlink()
    out.parent.rmdir()
    out.parent.symlink_to(elsewhere)  # build/ now leads out of the recipe folder
    done = run_build(seed_ws)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "TRT118" in done.stdout + done.stderr
    assert list(elsewhere.iterdir()) == [], "an engine was written outside the recipe folder"


def test_a_restore_never_writes_through_a_planted_temp_symlink(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    store = Store(copy_store(seeded, tmp_path), "read_write", None)
    (entry,) = store.entries()
    precious = tmp_path / "precious.bin"
    precious.write_bytes(b"someone's data")
    out = seed_ws / "build" / "demo.engine"
    out.parent.mkdir(parents=True)
    (out.parent / f"{out.name}.trtls-tmp-reuse-1").symlink_to(precious)  # where a restore's temp file would go
    with pytest.raises(OSError):
        store.restore(entry, out, "reuse-1", within=seed_ws)
    assert precious.read_bytes() == b"someone's data" and not out.exists()
    out.parent.joinpath(f"{out.name}.trtls-tmp-reuse-1").unlink()
    swapped = tmp_path / "out"
    swapped.mkdir()
    inner = seed_ws / "inner"
    inner.symlink_to(swapped)
    with pytest.raises(UnsafeWrite):
        store.restore(entry, inner / "demo.engine", "reuse-2", within=seed_ws)
    assert list(swapped.iterdir()) == []
    store.restore(entry, out, "reuse-3", within=seed_ws)  # the same restore into the real folder works
    assert out.stat().st_size == entry.size


def test_the_fast_path_leaves_an_orphan_to_the_full_path_which_recovers_it(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    out = _hit_once(seeded, seed_ws, tmp_path)
    dead = subprocess.Popen(["true"])
    dead.wait()
    orphan = seed_ws / ".trtls" / "runs" / "demo-20261202-000000-dead01"
    orphan.mkdir(parents=True)
    record = {"buildId": orphan.name, "engine": "demo", "output": str(out), "supervisorPid": dead.pid,
              "supervisorStart": "gone", "owner": {"kind": "CLI", "pid": dead.pid}}  # fmt: skip
    (orphan / "running.json").write_text(json.dumps(record))
    done = run_build(seed_ws)
    assert done.returncode == 0, done.stderr
    assert not (orphan / "running.json").exists(), "the fast path skipped the orphan recovery"
    recovered = json.loads((orphan / "summary.json").read_text())
    assert recovered["buildId"] == orphan.name and recovered["outcome"] != "built"
    assert any(s.get("store", {}).get("used") for s in summaries(seed_ws) if s.get("buildId") != orphan.name)
    assert os.path.getsize(out) > 0
