"""Single flight's hand-over, with real `trtls build` processes: the build holding a key's lock is cancelled
(Ctrl-C) while another process of the same key waits for it; the waiter then builds the engine itself and is the
one that publishes it."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
from pathlib import Path

from tests.builds.cli_procs import pause_env, wait_for_file
from tests.store.helpers import build_cmd, entries, probe_env, probes, summaries, with_store


def _stderr_until(proc: subprocess.Popen[str], needle: str) -> list[str]:
    """Read the process's stderr line by line until one contains `needle` (or it ends)."""
    assert proc.stderr is not None
    seen: list[str] = []
    for line in proc.stderr:
        seen.append(line)
        if needle in line:
            return seen
    raise AssertionError(f"never said {needle!r}: {''.join(seen)}")


def test_cancelled_holder_hands_the_key_to_the_waiter_which_builds_it(tmp_path: Path, workspace: Path) -> None:
    store = tmp_path / "store"
    other = tmp_path / "other"
    shutil.copytree(workspace, other)
    with_store(workspace, store)
    with_store(other, store)
    probe = tmp_path / "probe"
    pause = tmp_path / "pause"
    holder = subprocess.Popen(
        build_cmd(workspace),
        env=probe_env(probe, **pause_env(pause, "before_build")),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    waiter: subprocess.Popen[str] | None = None
    try:
        marker = wait_for_file(pause, ".before_build")  # the holder's worker is about to build: it holds the key
        held_by = marker.name.removesuffix(".before_build")
        waiter = subprocess.Popen(
            build_cmd(other), env=probe_env(probe), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        said = _stderr_until(waiter, "waiting for build")
        assert held_by in said[-1], said
        assert waiter.poll() is None
        holder.send_signal(signal.SIGINT)  # Ctrl-C: the holder's build is cancelled, it publishes nothing
        holder.communicate(timeout=300)
        assert holder.returncode == 130
        out, err = waiter.communicate(timeout=900)
        assert waiter.returncode == 0, out + err
    finally:
        for p in (holder, waiter):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    (cancelled,) = summaries(workspace)
    assert cancelled["outcome"] == "cancelled" and cancelled["buildId"] == held_by
    assert not (workspace / "build" / "demo.engine").exists()
    (built,) = summaries(other)
    assert built["outcome"] == "built" and built["workerPid"] is not None  # it built itself, no reuse
    assert built["store"]["waitedFor"].split()[-1] == held_by
    assert len(probes(probe, "worker")) == 2  # the cancelled one and the waiter's own
    (entry,) = entries(store)  # exactly one engine published: the waiter's
    record = json.loads((entry / "entry.json").read_text())
    assert record["key"] == built["engineKey"] and record["build"]["buildId"] == built["buildId"]
    assert record["engine"]["sha256"] == built["engineArtifact"]["sha256"]
