"""Build avoidance with real builds of the quickstart `demo` and real `trtls build` processes: a hit starts no
worker and imports no TensorRT, restores the output atomically, and never passes an unverified entry on."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.builds.helpers import loaded
from tests.store.conftest import copy_store
from tests.store.helpers import build_cmd, entries, probe_env, probes, run_build, summaries, with_store
from trtls.store.entries import Refused, Store


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tree(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.stat().st_size) for p in folder.rglob("*")}


def test_hit_starts_no_worker_imports_no_tensorrt_and_names_the_producing_build(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    store = copy_store(seeded, tmp_path)
    with_store(seed_ws, store)
    probe = tmp_path / "probe"
    done = run_build(seed_ws, env=probe_env(probe))
    assert done.returncode == 0, done.stderr
    produced_by = seeded[1]["buildId"]
    assert f"demo: up to date — engine from build {produced_by} " in done.stdout
    assert probes(probe, "worker") == [] and probes(probe, "tensorrt") == []
    (s,) = summaries(seed_ws)
    assert s["outcome"] == "reused" and s["workerPid"] is None
    assert s["reusedFrom"]["buildId"] == produced_by and s["engineKey"] == seeded[1]["engineKey"]
    out = seed_ws / "build" / "demo.engine"
    assert sha(out) == seeded[1]["engineArtifact"]["sha256"] == s["engineArtifact"]["sha256"]
    assert os.stat(out).st_ino != os.stat(entries(store)[0] / "engine").st_ino  # a copy, never a hard link
    assert "the key was computed" in s["notes"][0]
    # unchanged since: the fast path restores without importing the recipe models (pydantic) at all
    out.write_bytes(b"vtrt damaged")
    fast_probe = tmp_path / "probe-fast"
    again = run_build(seed_ws, env=probe_env(fast_probe))
    assert again.returncode == 0 and "up to date — engine from build" in again.stdout, again.stderr
    fast = summaries(seed_ws)[-1]
    assert "the recipe was not re-read" in fast["notes"][0] and fast["outcome"] == "reused"
    assert probes(fast_probe, "pydantic") == [] and probes(fast_probe, "worker") == []
    assert sha(out) == seeded[1]["engineArtifact"]["sha256"]
    # a touched model (same bytes, new mtime) is not trusted by the fast path: the key is computed again
    onnx = seed_ws / "models" / "demo.onnx"
    os.utime(onnx, ns=(onnx.stat().st_atime_ns, onnx.stat().st_mtime_ns + 1_000_000_000))
    third = run_build(seed_ws)
    assert third.returncode == 0 and "the key was computed" in summaries(seed_ws)[-1]["notes"][0]


def test_read_only_store_is_used_read_only(seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path) -> None:
    store = copy_store(seeded, tmp_path)
    with_store(seed_ws, store, mode="read")
    before = tree(store)
    done = run_build(seed_ws)
    assert done.returncode == 0, done.stderr
    assert summaries(seed_ws)[-1]["outcome"] == "reused"
    assert tree(store) == before  # not one file written or touched, not even the use time or a lock


def test_entry_whose_recorded_key_does_not_match_its_content_is_refused(
    seeded: tuple[Path, dict], tmp_path: Path
) -> None:
    store = copy_store(seeded, tmp_path)
    (folder,) = entries(store)
    record = json.loads((folder / "entry.json").read_text())
    record["parts"]["settings"]["optimization_level"] = 5  # the content now says another key
    (folder / "entry.json").write_text(json.dumps(record))
    with pytest.raises(Refused, match="recorded key does not match"):
        Store(store).get(folder.name)
    assert entries(store) == [] and len(list((store / "quarantine").iterdir())) == 1


@pytest.mark.parametrize(("what", "code"), [("file", "TRT330"), ("under-a-file", "TRT331")])
def test_unusable_store_path_is_a_located_error(workspace: Path, what: str, code: str) -> None:
    afile = workspace / "not-a-folder"
    afile.write_text("x")
    with_store(workspace, afile if what == "file" else afile / "store")
    done = run_build(workspace)
    assert done.returncode == 2
    line = next(i for i, t in enumerate((workspace / "trtls.toml").read_text().splitlines(), 1) if t.startswith("path"))
    assert f"trtls.toml:{line}:8: {code} error:" in done.stderr, done.stderr
    assert not (workspace / "build" / "demo.engine").exists()


def _wait_for(marker: Path, proc: subprocess.Popen) -> None:
    import time

    while not marker.exists():
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)


def test_sigkill_during_restore_leaves_the_previous_output_whole(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    store = copy_store(seeded, tmp_path)
    with_store(seed_ws, store)
    out = seed_ws / "build" / "demo.engine"
    out.parent.mkdir(parents=True)
    out.write_bytes(b"vtrt the previous engine")
    marker = tmp_path / "paused"
    env = probe_env(tmp_path / "probe", TRTLS_STORE_PAUSE="restore", TRTLS_STORE_PAUSE_FILE=str(marker))
    proc = subprocess.Popen(build_cmd(seed_ws), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _wait_for(marker, proc)  # half the engine is in the temp file beside the output
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert out.read_bytes() == b"vtrt the previous engine"
    temps = [p.name for p in out.parent.iterdir() if p != out]
    assert temps and all(".trtls-tmp-" in t for t in temps)  # the half-copy never had the output's name
    done = run_build(seed_ws)
    assert done.returncode == 0 and sha(out) == seeded[1]["engineArtifact"]["sha256"]


def test_flipped_byte_is_refused_and_rebuilt_and_a_full_disk_leaves_the_engine_unstored(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    """Disk full is simulated with the store's TRTLS_STORE_FAULT=enospc hook (publish's write raises ENOSPC)."""
    store = copy_store(seeded, tmp_path)
    with_store(seed_ws, store)
    (folder,) = entries(store)
    engine = bytearray((folder / "engine").read_bytes())
    engine[len(engine) // 3] ^= 0x10
    (folder / "engine").write_bytes(bytes(engine))
    done = run_build(seed_ws, env={**os.environ, "TRTLS_STORE_FAULT": "enospc"})
    assert done.returncode == 0, done.stderr
    assert "TRT332" in done.stderr and "TRT333" in done.stderr
    (s,) = summaries(seed_ws)
    assert s["outcome"] == "built"
    warnings = " ".join(s["store"]["warnings"])
    assert "TRT332" in warnings and "TRT333" in warnings and "No space left" in warnings
    out = seed_ws / "build" / "demo.engine"
    assert sha(out) == s["engineArtifact"]["sha256"]  # the rebuilt engine, not the flipped one
    assert entries(store) == [] and list((store / "tmp").iterdir()) == []  # quarantined; nothing half-stored
    assert len(list((store / "quarantine").iterdir())) == 1


def test_sigkill_during_publish_leaves_no_partial_entry(workspace: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    with_store(workspace, store)
    marker = tmp_path / "paused"
    env = probe_env(tmp_path / "probe", TRTLS_STORE_PAUSE="publish", TRTLS_STORE_PAUSE_FILE=str(marker))
    proc = subprocess.Popen(build_cmd(workspace), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _wait_for(marker, proc)
    # the copy is held half-way; it began as the worker said the engine was written, beside the build's evidence,
    # which goes on (store/use.py `stage_engine`) until the publish waits for the copy: killed there
    _wait_for(workspace / ".trtls" / "runs", proc)
    while not list((workspace / ".trtls" / "runs").glob("*/summary.json")):
        assert proc.poll() is None
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert entries(store) == []
    assert len(list((store / "tmp").iterdir())) == 1  # the half-written entry, outside entries/
    (s,) = summaries(workspace)  # the build's own evidence was complete before the publish took the copy
    assert sha(workspace / "build" / "demo.engine") == s["engineArtifact"]["sha256"]
    gc = subprocess.run(
        [*build_cmd(workspace)[:3], "store", "gc", str(workspace)], capture_output=True, text=True, check=True
    )
    assert "1 leftovers removed" in gc.stdout and list((store / "tmp").iterdir()) == []
    assert loaded(workspace).recipe is not None


def test_two_simultaneous_builds_of_one_key_run_one_tensorrt_build(tmp_path: Path, workspace: Path) -> None:
    store = tmp_path / "store"
    other = tmp_path / "other"
    shutil.copytree(workspace, other)
    with_store(workspace, store)
    with_store(other, store)
    probe = tmp_path / "probe"
    env = probe_env(probe)
    procs = [
        subprocess.Popen(build_cmd(ws), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for ws in (workspace, other)
    ]
    outs = [p.communicate(timeout=900) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert len(probes(probe, "worker")) == 1 and len(probes(probe, "tensorrt")) == 1
    outcomes = sorted(summaries(ws)[-1]["outcome"] for ws in (workspace, other))
    assert outcomes == ["built", "reused"]
    reused = next(summaries(ws)[-1] for ws in (workspace, other) if summaries(ws)[-1]["outcome"] == "reused")
    assert reused["reusedFrom"]["waitedForIt"] is True
    assert sha(workspace / "build" / "demo.engine") == sha(other / "build" / "demo.engine")
    assert len(entries(store)) == 1


def test_an_unchanged_output_is_kept_and_a_changed_one_is_restored(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    """`make`'s rule on the fast path: an output that already holds the entry's bytes (its sha256 from the digest
    cache, read at most once) is left alone — a 512 MiB engine is not copied and fsynced again on every unchanged
    build; an output whose bytes differ is restored from the store (verified) as before."""
    with_store(seed_ws, copy_store(seeded, tmp_path))
    out = seed_ws / "build" / "demo.engine"
    assert run_build(seed_ws).returncode == 0  # the full path: restored from the seeded store, memo written
    inode = out.stat().st_ino
    kept = run_build(seed_ws)
    assert kept.returncode == 0, kept.stderr
    summary = summaries(seed_ws)[-1]
    assert summary["outcome"] == "reused" and summary["engineArtifact"]["action"] == "kept"
    assert summary["store"]["outputAlreadyCurrent"] is True and out.stat().st_ino == inode, "nothing was copied"
    data = bytearray(out.read_bytes())
    data[100] ^= 0xFF
    out.write_bytes(bytes(data))  # same size, other bytes: the digest cache's stat key no longer matches
    again = run_build(seed_ws)
    assert again.returncode == 0, again.stderr
    summary = summaries(seed_ws)[-1]
    assert summary["engineArtifact"]["action"] == "restored" and summary["store"]["outputAlreadyCurrent"] is False
    assert sha(out) == seeded[1]["engineArtifact"]["sha256"]


def test_a_really_full_store_disk_still_yields_the_engine_and_says_it_was_not_stored(
    workspace: Path, tmp_path: Path
) -> None:
    """The store on a real filesystem too small for the engine (a 1 MiB tmpfs; the demo engine is ~2.5 MB): the
    publish's write fails with the kernel's ENOSPC, the build still ends built with its engine at the output, the
    warning says it was not stored, and nothing half-written is left in the store."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip()}")
    try:
        with_store(workspace, mnt / "store")
        done = run_build(workspace)
        assert done.returncode == 0, done.stderr
        (s,) = summaries(workspace)
        assert s["outcome"] == "built" and s["store"]["warnings"], s["store"]
        assert "TRT333" in " ".join(s["store"]["warnings"]) and "No space left" in " ".join(s["store"]["warnings"])
        assert sha(workspace / "build" / "demo.engine") == s["engineArtifact"]["sha256"]
        assert entries(mnt / "store") == [] and list((mnt / "store" / "tmp").iterdir()) == []
    finally:
        subprocess.run(["umount", str(mnt)], check=False)
