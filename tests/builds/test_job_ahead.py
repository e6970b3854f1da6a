"""The job before the check (builds/supervisor/speculation.py, issue 31): an unchanged recipe whose engine the store
lacks sends the last build's job to the early worker at once; the worker builds but writes nothing until the
supervisor's `commit`, which comes only when the job built from the checked recipe is the same job.

Real TensorRT-RTX builds and real processes: `trtls build` as a child process (fresh store each time, so the fast
path's memo holds and the store misses), and the built-in worker driven by hand over its stdin."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.store.helpers import run_build, summaries, with_store

NOTE_START = "TensorRT started from the last build's job while the recipe was checked"


def _fresh_store_build(ws: Path, store: Path) -> subprocess.CompletedProcess[str]:
    shutil.rmtree(store, ignore_errors=True)  # the key is missing: a known miss once the memo holds
    return run_build(ws)


def _ahead(summary: dict[str, Any]) -> bool:
    return any(str(n).startswith(NOTE_START) for n in summary.get("notes") or [])


def _memo(ws: Path) -> dict[str, Any]:
    return json.loads((ws / ".trtls" / "engines" / "demo.hit.json").read_text())


def test_an_unchanged_build_sends_its_job_ahead_and_commits_after_the_check(workspace: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    with_store(workspace, store)
    first = _fresh_store_build(workspace, store)
    assert first.returncode == 0, first.stderr
    assert not _ahead(summaries(workspace)[-1])  # no memo yet: the job is built after the check
    remembered = _memo(workspace)["job"]
    assert remembered["engine"] == "demo" and "build_id" not in remembered and "hold_commit" not in remembered

    second = _fresh_store_build(workspace, store)
    assert second.returncode == 0, second.stderr
    s = summaries(workspace)[-1]
    assert s["outcome"] == "built" and _ahead(s)
    engine = workspace / "build" / "demo.engine"
    assert s["engineArtifact"]["sha256"] and engine.is_file()
    assert not list(engine.parent.glob("demo.engine.trtls-tmp-*"))
    # the build's clock starts when its job was sent: no phase starts before the build did
    assert all(p["startS"] >= 0 for p in s["phaseTree"])
    assert s["durationS"] >= max(p["startS"] + p["elapsedS"] for p in s["phaseTree"]) - 0.05
    assert len(list(store.glob("entries/*"))) == 1  # published as any build is


def test_an_unchanged_no_store_build_sends_its_job_ahead_from_its_own_memo(workspace: Path, tmp_path: Path) -> None:
    """`--no-store` is certain to build: its last build's job (kept in `<engine>.job.json`, never in the store's
    memo) goes ahead of the check when nothing the key reads changed, or the recipe changed only outside the engine's
    view (a comment); an edit to the engine's own table sends nothing ahead."""
    store = tmp_path / "store"
    with_store(workspace, store)
    engines = workspace / ".trtls" / "engines"
    first = run_build(workspace, "--no-store")
    assert first.returncode == 0, first.stderr
    assert not _ahead(summaries(workspace)[-1])
    assert (engines / "demo.job.json").is_file() and not (engines / "demo.hit.json").exists()
    assert json.loads((engines / "demo.job.json").read_text())["store"] is None

    second = run_build(workspace, "--no-store")
    assert second.returncode == 0, second.stderr
    s = summaries(workspace)[-1]
    assert s["outcome"] == "built" and _ahead(s) and s["store"]["used"] is False
    assert s["engineArtifact"]["sha256"] and (workspace / "build" / "demo.engine").is_file()
    assert not store.exists() or not list(store.glob("entries/*"))  # --no-store: nothing published

    recipe = workspace / "trtls.toml"
    recipe.write_text(recipe.read_text() + "\n# edited\n")  # the recipe's bytes changed, the engine's view did not
    third = run_build(workspace, "--no-store")
    assert third.returncode == 0, third.stderr
    assert _ahead(summaries(workspace)[-1])
    recipe.write_text(recipe.read_text().replace("optimization_level = 3", "optimization_level = 2"))  # demo's own
    fourth = run_build(workspace, "--no-store")
    assert fourth.returncode == 0, fourth.stderr
    s = summaries(workspace)[-1]
    assert not _ahead(s) and s["effectiveSettings"]["optimization_level"] == 2


def test_a_rebuild_of_an_unchanged_recipe_sends_its_job_ahead_and_still_replaces_the_entry(
    workspace: Path, tmp_path: Path
) -> None:
    """`--rebuild` builds even on a hit: certain, so the store's memo's job goes ahead; the engine built goes to the
    store as a rebuild's always does (the same bytes here: the entry is kept, not replaced)."""
    store = tmp_path / "store"
    with_store(workspace, store)
    assert run_build(workspace).returncode == 0
    first = summaries(workspace)[-1]
    rebuilt = run_build(workspace, "--rebuild")
    assert rebuilt.returncode == 0, rebuilt.stderr
    s = summaries(workspace)[-1]
    assert s["outcome"] == "built" and _ahead(s) and s["buildId"] != first["buildId"]
    (entry,) = store.glob("entries/*")
    assert json.loads((entry / "entry.json").read_text())["engine"]["sha256"] == s["engineArtifact"]["sha256"]
    assert s["rebuiltBecause"] == ["--rebuild"], s["rebuiltBecause"]


def test_a_job_that_differs_from_the_one_sent_ahead_is_discarded_and_built_from_the_check(
    workspace: Path, tmp_path: Path
) -> None:
    """The memo's job edited (the memo still holds: only what the key reads is compared): the worker that got it is
    discarded before it writes anything, and the engine is built from the checked recipe's own job."""
    store = tmp_path / "store"
    with_store(workspace, store)
    assert _fresh_store_build(workspace, store).returncode == 0
    memo_path = workspace / ".trtls" / "engines" / "demo.hit.json"
    memo = _memo(workspace)
    memo["job"]["settings"]["optimization_level"] = 0  # the recipe says 3
    memo_path.write_text(json.dumps(memo))

    done = _fresh_store_build(workspace, store)
    assert done.returncode == 0, done.stderr
    s = summaries(workspace)[-1]
    assert s["outcome"] == "built" and not _ahead(s)
    assert s["effectiveSettings"]["optimization_level"] == 3
    runs = sorted(p.name for p in (workspace / ".trtls" / "runs").iterdir())
    assert len(runs) == 2  # the discarded worker's build left no record of its own


def test_an_output_folder_swapped_for_a_link_since_the_last_build_gets_nothing_from_the_job_sent_ahead(
    workspace: Path, tmp_path: Path
) -> None:
    """What the memo does not look at (the output's folder) changed into a symlink to a folder outside: the job went
    ahead, the check refuses the link, and nothing is written through it — not the engine, not a temp."""
    store = tmp_path / "store"
    with_store(workspace, store)
    assert _fresh_store_build(workspace, store).returncode == 0
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("mine")
    shutil.rmtree(workspace / "build")
    (workspace / "build").symlink_to(outside, target_is_directory=True)

    refused = _fresh_store_build(workspace, store)
    assert refused.returncode != 0
    assert "Traceback" not in refused.stderr
    assert sorted(p.name for p in outside.iterdir()) == ["precious.txt"]
    assert (outside / "precious.txt").read_text() == "mine"


# -- the worker's side, driven by hand ----------------------------------------------------------------------------


def _job(ws: Path, build_id: str) -> dict[str, Any]:
    from trtls.builds.supervisor.job import worker_job
    from trtls.core.recipe import load_recipe

    return {**worker_job(load_recipe(ws / "trtls.toml"), "demo", build_id), "hold_commit": True}


def _worker() -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "trtls.builds.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )


def _events_until(proc: subprocess.Popen[str], kind: str) -> list[dict[str, Any]]:
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(json.loads(line))
        if seen[-1]["type"] == kind:
            return seen
    raise AssertionError(f"the worker ended before {kind}: {[e['type'] for e in seen]}")


def _held_until_the_builder_returned(ws: Path, build_id: str) -> tuple[subprocess.Popen[str], Path]:
    """A worker sent a job that holds its commit, once its builder returned an engine; and the job's output."""
    job = _job(ws, build_id)
    proc = _worker()
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(job) + "\n")
    proc.stdin.flush()
    assert _events_until(proc, "builder_returned")[-1]["ok"] is True
    return proc, Path(job["output"])


def test_a_worker_holding_its_commit_writes_nothing_until_the_commit_line(workspace: Path) -> None:
    proc, output = _held_until_the_builder_returned(workspace, "demo-held-1")
    assert proc.stdin is not None
    # the builder is done and waits: nothing beside the output yet, however long it is held
    assert not output.exists() and not list(output.parent.glob("*.trtls-tmp-*"))
    proc.stdin.write(json.dumps({"v": 1, "type": "commit"}) + "\n")
    proc.stdin.flush()
    finished = _events_until(proc, "build_finished")[-1]
    assert proc.wait(60) == 0
    assert finished["outcome"] == "built" and output.is_file()


def test_a_worker_holding_its_commit_discards_the_build_when_its_input_closes(workspace: Path) -> None:
    proc, output = _held_until_the_builder_returned(workspace, "demo-held-2")
    assert proc.stdin is not None
    proc.stdin.close()  # the supervisor refused, found a store hit or died: no commit will come
    finished = _events_until(proc, "build_finished")[-1]
    proc.wait(60)
    assert finished["outcome"] == "cancelled"
    assert not output.exists() and not list(output.parent.glob("*.trtls-tmp-*"))


def test_ctrl_c_of_a_build_sent_ahead_stops_its_adopted_worker_and_leaves_the_engine_as_it_was(
    workspace: Path, tmp_path: Path
) -> None:
    """A known miss: the worker the fast path started (before asyncio) is adopted by the supervisor, so a Ctrl-C
    reaches it as any build's: cancelled, 130, the output untouched, no worker left."""
    import signal
    import time

    from tests.builds.cli_procs import pause_env, sha256_of, wait_for_file
    from tests.store.helpers import build_cmd

    store = tmp_path / "store"
    with_store(workspace, store)
    assert _fresh_store_build(workspace, store).returncode == 0
    engine = workspace / "build" / "demo.engine"
    before = sha256_of(engine)
    shutil.rmtree(store)
    pauses = tmp_path / "pauses"
    proc = subprocess.Popen(
        build_cmd(workspace), env={**os.environ, **pause_env(pauses, "before_build")}, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    marker = wait_for_file(pauses, ".before_build")  # the worker holds before TensorRT builds
    deadline = time.monotonic() + 60
    while not (workspace / ".trtls" / "runs" / marker.stem / "events.jsonl").exists():
        assert time.monotonic() < deadline, "the supervisor never adopted the worker"
        time.sleep(0.02)
    running = json.loads((workspace / ".trtls" / "runs" / marker.stem / "running.json").read_text())
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err
    s = json.loads((workspace / ".trtls" / "runs" / marker.stem / "summary.json").read_text())
    assert s["outcome"] == "cancelled" and _ahead(s)
    assert sha256_of(engine) == before
    assert not list(engine.parent.glob("demo.engine.trtls-tmp-*"))
    pid = running["workerPid"]
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
