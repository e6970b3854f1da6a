"""One writer per output (issue 22, item 6): real `trtls build` processes of one output, at the same time.

Before the lock, two builds of one output both renamed an engine over it and each recorded the sha it wrote, and a
`large` cancelled while a `demo` of the same output finished printed `previous engine NOT intact` though it never
touched the file. Now the second build waits (and says for which build), and the evidence records what is on disk."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest

from trtls.builds.supervisor.output_lock import OutputLock, lock_path
from trtls.builds.supervisor.output_probe import inode_flags
from trtls.core.display import previous_engine_text
from trtls.core.summary_record import Summary

from .cli_procs import CliBuild, is_waiting_line, pause_env, sha256_of, wait_for_bound, wait_for_file
from .helpers import leftovers


def test_a_second_build_of_one_output_waits_and_the_cancelled_one_is_intact(workspace: Path, tmp_path: Path) -> None:
    first = CliBuild(workspace, "demo")
    assert first.finish() == 0
    good = sha256_of(workspace / "build" / "demo.engine")

    pause = tmp_path / "pause"
    holder = CliBuild(workspace, "demo", env=pause_env(pause, "before_build"))  # holds the output, builder not started
    wait_for_file(pause, ".before_build")
    holder_id = holder.wait_for(lambda ln: ln.get("type") == "build_started")["build_id"]
    second = CliBuild(workspace, "demo")
    waiting = second.wait_for(is_waiting_line)
    assert holder_id in waiting["msg"] and "of the same output" in waiting["msg"]

    holder.interrupt()  # Ctrl-C: a cooperative cancel of the build that holds the output
    s_holder = holder.summary()
    assert holder.finish() == 130 and s_holder["outcome"] == "cancelled"
    # true by construction: the second build could not rename while the first held the output
    assert s_holder["previousEngineIntact"] is True

    s_second = second.summary()
    assert second.finish() == 0 and s_second["outcome"] == "built"
    assert s_second["outputLock"]["waitedFor"] == [holder_id]
    on_disk = sha256_of(workspace / "build" / "demo.engine")
    art = s_second["engineArtifact"]
    assert art["sha256"] == on_disk and art["verified"] is True and art["reportedSha256"] == on_disk
    assert good  # an engine was there before, so "intact" compared real bytes


def test_two_builds_started_together_never_overlap_and_record_what_is_on_disk(workspace: Path) -> None:
    a, b = CliBuild(workspace, "demo"), CliBuild(workspace, "demo")
    sa, sb = a.summary(), b.summary()
    assert a.finish() == 0 and b.finish() == 0
    first, second = sorted((sa, sb), key=lambda s: s["outputLock"]["acquiredAt"])
    run = workspace / ".trtls" / "runs"
    # the second took the output only after the first had written its evidence
    assert (run / first["buildId"] / "summary.json").stat().st_mtime <= second["outputLock"]["acquiredAt"] + 1e-3
    for s in (first, second):
        assert s["engineArtifact"]["verified"] is True
    assert second["engineArtifact"]["sha256"] == sha256_of(workspace / "build" / "demo.engine")


def test_no_wait_refuses_with_trt410_naming_the_holder(workspace: Path, tmp_path: Path) -> None:
    pause = tmp_path / "pause"
    holder = CliBuild(workspace, "demo", env=pause_env(pause, "before_build"))
    wait_for_file(pause, ".before_build")
    started = holder.wait_for(lambda ln: ln.get("type") == "build_started")
    refused = CliBuild(workspace, "demo", "--no-wait")
    s = refused.summary()
    assert refused.finish() == 1
    assert s["outcome"] == "failed" and s["error"].startswith("TRT410") and started["build_id"] in s["error"]
    assert s["workerPid"] is None  # no worker was given a job
    holder.interrupt()
    assert holder.finish() == 130


def test_a_symlink_planted_at_the_lock_is_not_followed(workspace: Path, tmp_path: Path) -> None:
    precious = tmp_path / "precious.txt"
    precious.write_text("mine")
    lock = lock_path(workspace / ".trtls" / "locks", workspace / "build" / "demo.engine")
    lock.parent.mkdir(parents=True)
    os.symlink(precious, lock)
    build = CliBuild(workspace, "demo")
    s = build.summary()
    assert build.finish() == 1 and s["error"].startswith("TRT411") and "symlink" in s["error"]
    assert precious.read_text() == "mine"


def test_the_lock_names_its_holder_and_is_released_by_its_death(tmp_path: Path) -> None:
    """Across processes: a child holds the lock; the parent reads who; the child's SIGKILL frees it."""
    import sys

    out = tmp_path / "build" / "x.engine"
    path = lock_path(tmp_path / "locks", out)
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from trtls.builds.supervisor.output_lock import OutputLock; "
            f"lk = OutputLock(Path({str(path)!r}), Path({str(out)!r})); "
            "assert lk.try_acquire({'buildId': 'x-1', 'pid': 1}); print('held', flush=True); time.sleep(600)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        mine = OutputLock(path, out)
        assert not mine.try_acquire({"buildId": "y-2"})
        assert mine.holder()["buildId"] == "x-1"
        child.kill()
        child.wait()
        assert mine.try_acquire({"buildId": "y-2"})
        assert json.loads(path.read_text())["buildId"] == "y-2"
        mine.release()
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("attr, word", [("+i", "immutable"), ("+a", "append-only")])
def test_an_unreplaceable_engine_fails_the_probe_before_any_builder_time(workspace: Path, attr: str, word: str) -> None:
    """Item 9: `chattr +i` on the engine left the folder writable, so the probe passed and the build failed only at
    the rename, after the whole build. The probe now reads the target's flags (FS_IOC_GETFLAGS) too."""
    first = CliBuild(workspace, "demo")
    assert first.finish() == 0
    engine = workspace / "build" / "demo.engine"
    good = sha256_of(engine)
    done = subprocess.run(["chattr", attr, str(engine)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"this filesystem refuses chattr {attr}: {done.stderr.strip()}")
    try:
        assert inode_flags(engine) is not None
        build = CliBuild(workspace, "demo")
        s = build.summary()
        assert build.finish() == 1
        assert s["outcome"] == "failed" and s["error"].startswith("TRT412") and word in s["error"]
        assert s["outputCheck"]["writable"] is False and s["outputCheck"]["code"] == "TRT412"
        assert not [ln for ln in build.seen if ln.get("type") == "phase_start"], "the builder ran"
        assert sha256_of(engine) == good and not leftovers(workspace)
    finally:
        subprocess.run(["chattr", attr.replace("+", "-"), str(engine)], check=True)


def test_a_fifo_at_the_output_fails_the_probe_before_any_builder_time(workspace: Path) -> None:
    """A FIFO (or a device, a socket) where the engine goes: the commit refused to rename over it, but only after the
    whole build (found by the 20,000-state hostile run). The probe refuses it first, TRT412 naming the path."""
    fifo = workspace / "build" / "demo.engine"
    fifo.parent.mkdir(exist_ok=True)
    os.mkfifo(fifo)
    build = CliBuild(workspace, "demo")
    s = build.summary()
    assert build.finish() == 1
    assert s["outcome"] == "failed" and s["error"].startswith("TRT412")
    assert f"{fifo} is not a regular file" in s["error"]
    assert not [ln for ln in build.seen if ln.get("type") == "phase_start"], "the builder ran"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_build_cancelled_while_it_waits_ends_cancelled_having_built_nothing(workspace: Path, tmp_path: Path) -> None:
    pause = tmp_path / "pause"
    holder = CliBuild(workspace, "demo", env=pause_env(pause, "before_build"))
    wait_for_file(pause, ".before_build")
    wait_for_bound(workspace, "demo")  # a job may reach the worker before its build is the supervisor's
    waiter = CliBuild(workspace, "demo")
    waiter.wait_for(is_waiting_line)
    waiter.interrupt()  # Ctrl-C while it waits for the output
    s = waiter.summary()
    assert waiter.finish() == 130
    assert s["outcome"] == "cancelled" and s["cancelSource"] == "ctrl_c" and s["workerPid"] is None
    assert any("while waiting for another build" in n for n in s["notes"])
    assert not [ln for ln in waiter.seen if ln.get("type") == "phase_start"]
    holder.interrupt()
    assert holder.finish() == 130


@pytest.mark.parametrize("point", ["after_rename", "before_rename"])
def test_a_large_cancelled_while_it_waits_for_a_demo_that_renames_never_says_the_engine_was_damaged(
    workspace: Path, tmp_path: Path, point: str
) -> None:
    """The issue's exact case: a `large` of the same output as a `demo`, waiting for the demo's output, is cancelled
    (Ctrl-C) while the demo renames its new engine over the old one. Before the lock, the large hashed the old engine,
    saw the new one at its end and printed `previous engine NOT intact`, though it never touched the file.

    `after_rename`: the demo has renamed and still holds the output when the large is cancelled (deterministic).
    `before_rename`: the demo is let go and the large is cancelled at the same moment (the race as it was seen)."""
    engine = workspace / "build" / "demo.engine"
    previous = older_engine(workspace)
    pause = tmp_path / "pause"
    holder = CliBuild(workspace, "demo", env=pause_env(pause, point))
    large: CliBuild | None = None
    try:
        marker = wait_for_file(pause, f".{point}")
        held_id = marker.name.removesuffix(f".{point}")
        # the user edits the recipe meanwhile: `large` now writes the output the demo is building (and demo elsewhere;
        # two engines of one output are refused by the check, TRT109)
        recipe = workspace / "trtls.toml"
        text = recipe.read_text().replace('output = "build/demo.engine"', 'output = "build/other.engine"')
        recipe.write_text(text.replace('output = "build/large.engine"', 'output = "build/demo.engine"'))
        large = CliBuild(workspace, "large")
        assert held_id in large.wait_for(is_waiting_line)["msg"]
        if point == "after_rename":
            large.interrupt()
            s_large = large.summary()
            (pause / f"{held_id}.go").write_text("")
        else:
            (pause / f"{held_id}.go").write_text("")
            large.interrupt()
            s_large = large.summary()
        assert large.finish() == 130
        s_holder = holder.summary()
        assert holder.finish() == 0
    finally:
        for m in pause.glob(f"*.{point}"):
            (pause / (m.name.removesuffix(f".{point}") + ".go")).write_text("")
        holder.kill()
        if large is not None:
            large.kill()
    assert s_large["outcome"] == "cancelled" and s_large["engine"] == "large"
    if point == "after_rename":  # cancelled while waiting: no worker, nothing built
        assert s_large["workerPid"] is None and not [ln for ln in large.seen if ln.get("type") == "phase_start"]
        assert any("while waiting for another build" in n for n in s_large["notes"])
    assert s_large["previousEngineIntact"] is not False, s_large["notes"]
    assert "NOT intact" not in previous_engine_text(Summary.written(s_large))
    if point == "after_rename":  # it never held the output, and says so — not "no previous engine" with one there
        assert s_large["previousEngine"] == "not_inspected", s_large.get("previousEngine")
        assert "was not touched by this build" in previous_engine_text(Summary.written(s_large))
    assert s_holder["outcome"] == "built"
    art = s_holder["engineArtifact"]
    on_disk = sha256_of(engine)
    assert art["sha256"] == on_disk and art["reportedSha256"] == on_disk and art["verified"] is True
    assert on_disk != previous  # the file did change under the waiting build
    assert not leftovers(workspace)


def older_engine(ws: Path) -> str:
    """Build a demo engine that differs from the recipe's (max batch 4, not 8) and return its sha: a later demo
    build replaces it with other bytes, so an "intact" that compared the two would be false (builds are
    deterministic: the same recipe twice gives the same bytes, and nothing would be seen)."""
    recipe = ws / "trtls.toml"
    original = recipe.read_text()
    recipe.write_text(original.replace("max = [8, 3, 32, 32]", "max = [4, 3, 32, 32]", 1))
    assert CliBuild(ws, "demo").finish() == 0
    recipe.write_text(original)
    return sha256_of(ws / "build" / "demo.engine")
