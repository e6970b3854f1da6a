"""Evidence, history and known-good records are written only inside the recipe's real folder, checked at the
moment of the write (issue 27, items 10 and 19): a `.trtls` or `.trtls/runs` swapped for a symlink during a build
is refused, never written through; a full `.trtls/runs` or a record that is a symlink is a located message (TRT413,
or the known-good record's own warning), never a traceback, and nothing is written through the link. Real `trtls
build` processes, real TensorRT-RTX builds of `demo`, real symlinks swapped mid-run and a real full tmpfs."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
from pathlib import Path

from tests.builds.test_door_writes_restore import tmpfs
from tests.store import conftest as store_fixtures
from tests.store.conftest import copy_store
from tests.store.helpers import build_cmd, run_build, with_store
from trtls.store.lock import KeyLock

from .cli_procs import CliBuild, pause_env, wait_for_bound, wait_for_file

seeded = store_fixtures.seeded  # the store tests' seeded store (one real build of demo, copied per test)
seed_ws = store_fixtures.seed_ws


def _stderr_until(proc: subprocess.Popen[str], needle: str) -> str:
    assert proc.stderr is not None
    seen = ""
    for line in proc.stderr:
        seen += line
        if needle in line:
            return seen
    raise AssertionError(f"never said {needle!r}: {seen}")


def _everything(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_a_reuse_never_writes_its_evidence_through_a_runs_folder_swapped_while_it_waited(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    store = copy_store(seeded, tmp_path)
    key = seeded[1]["engineKey"]
    aside = tmp_path / "aside"
    (store / "entries" / key).rename(aside)
    with_store(seed_ws, store)
    holder = KeyLock(store, key)
    assert holder.try_acquire("test-holder")
    proc = subprocess.Popen(build_cmd(seed_ws), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        said = _stderr_until(proc, "waiting for build")
        elsewhere = tmp_path / "other-project-runs"
        elsewhere.mkdir()
        runs = seed_ws / ".trtls" / "runs"
        if runs.exists():
            runs.rename(seed_ws / ".trtls" / "runs-was")
        runs.symlink_to(elsewhere)  # while the build waits: its evidence folder now leads out
        aside.rename(store / "entries" / key)
        holder.release()
        out, err = proc.communicate(timeout=900)
    finally:
        holder.release()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = out + said + err
    assert _everything(elsewhere) == [], "the reuse's evidence was written through the swapped folder"
    assert proc.returncode == 1 and "Traceback" not in text, text
    assert "TRT413" in text and "summary.json was not written" in text, text
    assert (seed_ws / "build" / "demo.engine").stat().st_size == seeded[1]["engineArtifact"]["size"]


def test_history_is_never_written_through_a_state_folder_swapped_during_the_build(
    workspace: Path, tmp_path: Path
) -> None:
    pause = tmp_path / "pause"
    cli = CliBuild(workspace, "demo", env=pause_env(pause, "before_build"))
    marker = wait_for_file(pause, ".before_build")
    # a job may reach the worker before its build is the supervisor's
    wait_for_bound(workspace, "demo", marker.name.removesuffix(".before_build"))
    elsewhere = tmp_path / "other-project-state"
    shutil.copytree(workspace / ".trtls", elsewhere)  # what the swapped-in folder holds: another project's records
    before = _everything(elsewhere)
    (workspace / ".trtls").rename(workspace / ".trtls-was")
    (workspace / ".trtls").symlink_to(elsewhere)  # during the build, after the recipe's check
    (pause / f"{marker.name.removesuffix('.before_build')}.go").touch()
    cli.finish()
    assert not (elsewhere / "history.json").exists(), "the history was written through the swapped .trtls"
    assert _everything(elsewhere) == before, "a record was written through the swapped .trtls"
    assert "Traceback" not in cli.stderr_text(), cli.stderr_text()


def test_a_full_runs_folder_is_a_located_trt413_and_the_restored_engine_stays(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    with_store(seed_ws, copy_store(seeded, tmp_path))
    runs = seed_ws / ".trtls" / "runs"
    with tmpfs(runs, "64k"):
        fd = os.open(runs / "filler.bin", os.O_WRONLY | os.O_CREAT, 0o644)  # fill the folder to its last byte
        try:
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
        finally:
            os.close(fd)
        done = run_build(seed_ws)
        left = sorted(p.name for p in runs.iterdir())
    text = done.stdout + done.stderr
    assert "Traceback" not in text, text
    assert "TRT413" in text and "No space left on device" in text, text
    assert left == ["filler.bin"], f"partial evidence left: {left}"
    assert (seed_ws / "build" / "demo.engine").stat().st_size == seeded[1]["engineArtifact"]["size"]


def test_a_symlinked_known_good_record_is_never_written_through(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    with_store(seed_ws, copy_store(seeded, tmp_path))
    precious = tmp_path / "precious.json"
    precious.write_text('{"someone": "else"}\n')
    (seed_ws / ".trtls" / "engines").mkdir(parents=True)
    (seed_ws / ".trtls" / "engines" / "demo.json").symlink_to(precious)  # a checkout that carries a symlinked record
    done = run_build(seed_ws)
    text = done.stdout + done.stderr
    assert "Traceback" not in text and done.returncode == 0, text
    assert precious.read_text() == '{"someone": "else"}\n'
    assert ".trtls/engines/demo.json" in text and "known-good" in text, text


def test_a_symlinked_history_is_never_written_through_and_the_build_still_ends_built(
    workspace: Path, tmp_path: Path
) -> None:
    precious = tmp_path / "precious.json"
    precious.write_text("{}\n")
    (workspace / ".trtls").mkdir()
    (workspace / ".trtls" / "history.json").symlink_to(precious)
    done = subprocess.run(build_cmd(workspace, "--json"), capture_output=True, text=True, timeout=900)
    assert "Traceback" not in done.stderr, done.stderr
    assert precious.read_text() == "{}\n"
    found = [json.loads(ln)["summary"] for ln in done.stdout.splitlines() if '"type": "summary"' in ln]
    assert done.returncode == 0 and len(found) == 1, done.stderr[-2000:]
    assert found[0]["outcome"] == "built", found[0].get("error")
