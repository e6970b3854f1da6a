"""A changed recipe's own checked job goes to the worker started early as soon as the recipe is checked (app/request.py,
cli/store_lookup.py `check_ahead`): before the command line's modules, asyncio and the store's lookup are imported, and
before the store is looked up; it writes nothing until the supervisor's commit, sent once the store missed. A wait for
another process's build of the same key ends that worker at once: its engine would never be committed.

Real `trtls build` processes and TensorRT-RTX builds: a driver with a profile hook notes the modules loaded when a
job is first written to the worker (`speculation._send`), and a probe (tests/store/helpers.py) the workers started."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.builds.cli_procs import pause_env, wait_for_file
from tests.store.helpers import build_cmd, entries, probe_env, probes, summaries, with_store
from trtls.builds.supervisor.speculation import CHECKED_NOTE, NOTE

DRIVER = """
import json, sys
report = {"at_send": None}
def profile(frame, event, arg):
    code = frame.f_code
    if event == "call" and report["at_send"] is None and code.co_name == "_send" and code.co_filename.endswith(
        "speculation.py"
    ):
        report["at_send"] = sorted(sys.modules)
sys.setprofile(profile)
from trtls.cli.entry import main
code = main(sys.argv[2:])
with open(sys.argv[1], "w") as fh:
    json.dump({**report, "code": code}, fh)
sys.exit(code)
"""
# What the job no longer waits for: the command line's modules and its event loop, the store's lookup and key
NOT_YET = ("trtls.cli.main", "asyncio", "trtls.builds.avoidance.lookup", "trtls.store.key", "trtls.app.build")


def _build(tmp_path: Path, workspace: Path, env: dict[str, str]) -> dict:
    out = tmp_path / f"report-{len(list(tmp_path.glob('report-*')))}.json"
    argv = [sys.executable, "-c", DRIVER, str(out), "build", str(workspace), "--engine", "demo"]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())


def test_an_edit_to_the_engines_table_sends_the_checked_job_before_asyncio_and_the_lookup(
    workspace: Path, tmp_path: Path
) -> None:
    """The engine's own table edited (its output: the memo no longer holds, the job differs, the key is the same) and
    the store emptied: the worker started ahead gets this build's checked job while the CLI has imported neither
    `cli.main`, asyncio nor the store's lookup; the build is committed after the store missed, and published."""
    store = tmp_path / "store"
    env = {**os.environ, "TRTLS_STORE": str(store)}
    assert _build(tmp_path, workspace, env)["code"] == 0  # the memo
    recipe = workspace / "trtls.toml"
    recipe.write_text(recipe.read_text().replace('"build/demo.engine"', '"build/demo-1.engine"'))
    shutil.rmtree(store)
    report = _build(tmp_path, workspace, env)
    assert report["at_send"] is not None, "no job went to the worker before the supervisor"
    assert "trtls.core.recipe" in report["at_send"]  # the checked job, not the last build's
    early = [m for m in NOT_YET if m in report["at_send"]]
    assert early == [], f"imported before the checked job went ahead: {early}"
    last = summaries(workspace)[-1]
    assert CHECKED_NOTE in last["notes"] and NOTE not in last["notes"], last["notes"]
    assert last["outcome"] == "built"
    (entry,) = entries(store)
    assert json.loads((entry / "entry.json").read_text())["engine"]["sha256"] == last["engineArtifact"]["sha256"]


def _runs_under(pid: int, parent: int) -> bool:
    """`pid` is a live (not yet ended) child of `parent`: its /proc stat's state and parent."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    state, ppid = stat.rsplit(")", 1)[1].split()[:2]
    return int(ppid) == parent and state not in ("Z", "X")


def test_a_wait_for_another_process_build_of_the_key_ends_the_worker_its_job_went_ahead_to(
    workspace: Path, tmp_path: Path
) -> None:
    """One process holds the key (its worker paused before the builder); a second, `--rebuild` (a build for certain:
    its worker starts first and gets the checked job), finds the key locked and waits: its worker, building an
    engine it could only discard, ends as the wait begins — not when the wait ends. The holder is stopped (Ctrl-C),
    the waiter takes the key and builds with a worker of its own, and is the one that publishes."""
    store = tmp_path / "store"
    other = tmp_path / "other"
    shutil.copytree(workspace, other)
    with_store(workspace, store)
    with_store(other, store)
    probe, pause = tmp_path / "probe", tmp_path / "pause"
    paused = probe_env(probe, **pause_env(pause, "before_build"))
    holder = subprocess.Popen(build_cmd(workspace), env=paused, stderr=subprocess.PIPE, text=True)
    waiter: subprocess.Popen[str] | None = None
    try:
        wait_for_file(pause, ".before_build")  # the holder's worker is about to build: it holds the key
        (held,) = [int(p.split("-")[1]) for p in probes(probe, "worker")]
        rebuild = build_cmd(other, "--rebuild")
        waiter = subprocess.Popen(rebuild, env=probe_env(probe), stderr=subprocess.PIPE, text=True)
        assert waiter.stderr is not None
        seen = []
        for line in waiter.stderr:  # until it says it waits (or it ends)
            seen.append(line)
            if "waiting for build" in line:
                break
        assert "waiting for build" in seen[-1], "".join(seen)
        (early,) = [int(p.split("-")[1]) for p in probes(probe, "worker") if int(p.split("-")[1]) != held]
        deadline = time.monotonic() + 120  # a bound for a loaded machine, not a timing: the worker ends at the wait
        while _runs_under(early, waiter.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _runs_under(early, waiter.pid), "the waiter's worker kept building through the wait"
        assert waiter.poll() is None  # still waiting for the holder
        holder.send_signal(signal.SIGINT)
        holder.communicate(timeout=300)
        assert holder.returncode == 130
        _, err = waiter.communicate(timeout=900)
        assert waiter.returncode == 0, err
    finally:
        for p in (holder, waiter):
            if p is not None and p.poll() is None:
                p.kill()
                p.wait()
    (built,) = summaries(other)
    assert built["outcome"] == "built" and CHECKED_NOTE not in built["notes"]  # a worker of its own, sent its job
    assert len(probes(probe, "worker")) == 3  # the holder's, the waiter's ended at the wait, the waiter's own
    (entry,) = entries(store)
    assert json.loads((entry / "entry.json").read_text())["build"]["buildId"] == built["buildId"]
