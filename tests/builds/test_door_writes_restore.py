"""A restore from the engine store writes only where the recipe's check said it may, and never crashes (issue 27,
items 9 and 16): a build that waited for another process's build of its key restores into the write root its
output had when the recipe was loaded, so an output folder swapped for a symlink while it waited is refused, not
followed; an output that cannot be written (an immutable file or folder, a read-only mount, a full disk) ends
located, with its evidence, never a traceback; and an output that already holds the entry's bytes is not rewritten.
Real `trtls build` processes, a real store seeded by a real TensorRT-RTX build, real chattr and real tmpfs mounts."""

from __future__ import annotations

import contextlib
import hashlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.store import conftest as store_fixtures
from tests.store.conftest import copy_store
from tests.store.helpers import build_cmd, run_build, summaries, with_store
from trtls.store.lock import KeyLock

seeded = store_fixtures.seeded  # the store tests' seeded store (one real build of demo, copied per test)
seed_ws = store_fixtures.seed_ws


@contextlib.contextmanager
def immutable(path: Path) -> Iterator[None]:
    """`chattr +i path` for the block (skipped where the filesystem or the account cannot set it)."""
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"chattr +i is not possible here: {done.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


@contextlib.contextmanager
def tmpfs(folder: Path, size: str, *, read_only: bool = False) -> Iterator[None]:
    """A real tmpfs of `size` mounted on `folder` for the block (skipped where mounting is not allowed)."""
    folder.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        if read_only:
            subprocess.run(["mount", "-o", "remount,ro", str(folder)], check=True)
        yield
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def _stderr_until(proc: subprocess.Popen[str], needle: str) -> list[str]:
    assert proc.stderr is not None
    seen: list[str] = []
    for line in proc.stderr:
        seen.append(line)
        if needle in line:
            return seen
    raise AssertionError(f"never said {needle!r}: {''.join(seen)}")


def _located_failure(done: subprocess.CompletedProcess[str], ws: Path, code: str) -> dict:
    """A build that could not put the engine there: exit 1, no traceback, the code said, its evidence written."""
    text = done.stdout + done.stderr
    assert "Traceback" not in text, text
    assert done.returncode == 1, text
    assert code in text, text
    (failed,) = [s for s in summaries(ws) if s.get("outcome") == "failed"]
    assert str(failed.get("error", "")).startswith(code), failed.get("error")
    return failed


def test_a_waiting_build_never_restores_through_an_output_folder_swapped_while_it_waited(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    store = copy_store(seeded, tmp_path)
    key = seeded[1]["engineKey"]
    aside = tmp_path / "aside"
    (store / "entries" / key).rename(aside)  # not published yet: another process is building the key
    with_store(seed_ws, store)
    holder = KeyLock(store, key)
    assert holder.try_acquire("test-holder")
    proc = subprocess.Popen(build_cmd(seed_ws), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        said = _stderr_until(proc, "waiting for build")  # checked, keyed, and now waiting for the key's holder
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        (seed_ws / "build").symlink_to(elsewhere)  # the output's folder now leads out of the recipe folder
        aside.rename(store / "entries" / key)  # the holder publishes the engine and lets go of the key
        holder.release()
        out, err = proc.communicate(timeout=900)
    finally:
        holder.release()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = "".join(said) + err
    assert list(elsewhere.iterdir()) == [], "the engine was restored through the swapped folder"
    assert "TRT118" in err and "nothing was restored" in err, err
    assert "Traceback" not in err and proc.returncode != 0, (proc.returncode, err)


def test_a_restore_over_an_immutable_engine_is_a_located_trt412_with_evidence(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    with_store(seed_ws, copy_store(seeded, tmp_path))
    out = seed_ws / "build" / "demo.engine"
    out.parent.mkdir()
    out.write_bytes(b"vtrt the engine the user keeps")
    with immutable(out):
        done = run_build(seed_ws)
    _located_failure(done, seed_ws, "TRT412")
    assert out.read_bytes() == b"vtrt the engine the user keeps"


def test_a_restore_into_an_immutable_folder_is_a_located_trt405_with_evidence(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    with_store(seed_ws, copy_store(seeded, tmp_path))
    folder = seed_ws / "build"
    folder.mkdir()
    with immutable(folder):
        done = run_build(seed_ws)
    _located_failure(done, seed_ws, "TRT405")
    assert list(folder.iterdir()) == []


def test_a_restore_onto_a_read_only_mount_is_a_located_trt405_with_evidence(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    with_store(seed_ws, copy_store(seeded, tmp_path))
    with tmpfs(seed_ws / "build", "8m", read_only=True):
        done = run_build(seed_ws)
        assert list((seed_ws / "build").iterdir()) == []
    failed = _located_failure(done, seed_ws, "TRT405")
    assert "Read-only file system" in failed["error"]


def test_a_restore_onto_a_full_disk_ends_located_with_evidence_and_leaves_nothing(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    with_store(seed_ws, copy_store(seeded, tmp_path))
    size = seeded[1]["engineArtifact"]["size"]
    with tmpfs(seed_ws / "build", str(max(size // 2, 16384))):  # room for a probe file, not for the engine
        done = run_build(seed_ws)
        left = list((seed_ws / "build").iterdir())
    text = done.stdout + done.stderr
    assert "Traceback" not in text and done.returncode == 1, text
    assert "No space left on device" in text, text
    (failed,) = [s for s in summaries(seed_ws) if s.get("outcome") == "failed"]
    assert "No space left on device" in str(failed.get("error")), failed.get("error")
    assert left == [], f"partial files left on the full disk: {left}"


def test_the_first_reuse_in_a_fresh_checkout_never_rewrites_an_output_that_already_holds_the_engine(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    store = copy_store(seeded, tmp_path)
    with_store(seed_ws, store)
    key = seeded[1]["engineKey"]
    out = seed_ws / "build" / "demo.engine"
    out.parent.mkdir()
    out.write_bytes((store / "entries" / key / "engine").read_bytes())  # a fresh checkout's engine: the same bytes
    before = out.stat()
    with immutable(out):  # any rewrite (even of the same bytes) fails: the digest is compared first
        done = run_build(seed_ws)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    (reused,) = summaries(seed_ws)
    assert reused["outcome"] == "reused" and reused["engineArtifact"]["action"] == "kept", reused["engineArtifact"]
    after = out.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert (
        hashlib.sha256(out.read_bytes()).hexdigest()
        == json.loads((store / "entries" / key / "entry.json").read_text())["engine"]["sha256"]
    )


def test_a_rollback_onto_an_immutable_engine_is_a_located_trt412_with_evidence(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    with_store(seed_ws, copy_store(seeded, tmp_path))
    assert run_build(seed_ws).returncode == 0  # a reuse: the table now remembers the seeded build as known-good
    out = seed_ws / "build" / "demo.engine"
    out.write_bytes(b"vtrt an engine built since")
    with immutable(out):
        done = subprocess.run(
            [sys.executable, "-m", "trtls", "rollback", "demo", str(seed_ws), "--to", seeded[1]["buildId"]],
            capture_output=True,
            text=True,
            timeout=300,
        )
    text = done.stdout + done.stderr
    assert "Traceback" not in text and done.returncode == 1, text
    assert "TRT412" in text and "evidence:" in text, text
    (failed,) = [s for s in summaries(seed_ws) if s.get("outcome") == "failed"]
    assert failed["error"].startswith("TRT412") and failed["rolledBackTo"]["buildId"] == seeded[1]["buildId"]
    assert out.read_bytes() == b"vtrt an engine built since"
