"""The warm local farm and the stop of a matrix, with the real CLI on real local Ray instances.

- `trtls farm up/status/down`: a persistent head that an `address = "local"` run reuses (the run's evidence says
  so, the head outlives the run), and `down` ends every Ray process of that head and nothing else;
- a Ctrl-C (SIGINT) to a running `trtls build --matrix` on an embedded instance: every cell ends `cancelled` (the
  running one cooperatively, the waiting ones in the queue), exit 130, and no process the command started is left
  (worker, actor, raylet, GCS). States, not durations: the stop's timing is in benchmarks/bench_farm_overhead.py.

Each test makes its own instance (no session cluster), and its own state file (TRTLS_FARM_STATE), so the user's
warm farm is never touched. Those that need Ray ask for it with the `needs_ray` fixture (tests/farm/conftest.py): with
TRTLS_REQUIRE_FARM=1 (CI) a missing Ray fails them instead of skipping them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.farm.conftest import farm_recipe, kill_driver_mid_build
from tests.quickstart import quickstart_profiles

TRTLS = [sys.executable, "-m", "trtls.cli.main"]
CMDLINES: dict[int, bytes] = {}


def local_recipe(ws: Path, model: str, cells: int, num_cpus: int, label: str) -> Path:
    """`address = "local"` with one engine whose matrix has `cells` cells (they differ in avg_timing_iterations)."""
    path = farm_recipe(ws, "local", "")
    head = path.read_text().replace("keep_warm_s = 0\n", f"keep_warm_s = 0\nnum_cpus = {num_cpus}\n")
    head += f'labels = {{ "trtls/pool" = "{label}" }}\n\n'
    body = f'[engines.m]\nonnx = "models/{model}.onnx"\noutput = "build/m.engine"\ncancel_grace_s = 30\n'
    body += quickstart_profiles(model) + "\n"
    body += f'\n[engines.m.run_on]\nlabels = {{ "trtls/pool" = "{label}" }}\nnum_cpus = 1\n'
    its = ", ".join(str(i + 1) for i in range(cells))
    body += (
        f'\n[engines.m.matrix]\noutput = "build/m-{{avg_timing_iterations}}.engine"\navg_timing_iterations = [{its}]\n'
    )
    path.write_text(head + body)
    return path


def env_with_state(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "TRTLS_FARM_STATE": str(tmp_path / "farm.json")}


def descendants(root: int) -> dict[int, str]:
    """pid → start time of every live process under `root` (start time: a recycled pid is not the same process);
    their command lines go to CMDLINES."""
    parent: dict[int, int] = {}
    start: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        parent[int(entry)], start[int(entry)] = int(fields[1]), fields[19]
    out: dict[int, str] = {}
    frontier = [root]
    while frontier:
        pid = frontier.pop()
        for child, ppid in parent.items():
            if ppid == pid and child not in out:
                out[child] = start[child]
                frontier.append(child)
                try:
                    CMDLINES[child] = Path(f"/proc/{child}/cmdline").read_bytes()
                except OSError:
                    pass
    return out


def still_running(procs: dict[int, str]) -> list[int]:
    left = []
    for pid, started in procs.items():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[19] == started and fields[0] != "Z":
            left.append(pid)
    return left


@pytest.mark.usefixtures("needs_ray")
def test_farm_up_is_reused_by_a_matrix_run_and_down_ends_its_processes(tmp_path: Path) -> None:
    env = env_with_state(tmp_path)
    run = lambda *a, **kw: subprocess.run(TRTLS + list(a), env=env, capture_output=True, text=True, timeout=600, **kw)  # noqa: E731
    assert run("farm", "status").returncode == 1  # nothing runs yet
    up = run("farm", "up", "--num-cpus", "1", "--label", "trtls/pool=warm")
    assert up.returncode == 0, up.stderr
    status = json.loads(run("farm", "status", "--json").stdout)
    try:
        assert status["running"] is True and status["labels"] == {"trtls/pool": "warm"} and status["num_cpus"] == 1
        head_procs = {status["pid"]: "", **descendants(status["pid"])}
        assert len(head_procs) > 2  # the head, its GCS and raylet at least
        assert unread_monitors(head_procs) == []
        recipe = local_recipe(tmp_path / "ws", "demo", 1, 1, "warm")
        built = run("build", str(recipe), "--matrix", "--json")
        assert built.returncode == 0, built.stderr[-2000:]
        summary = json.loads(built.stdout.splitlines()[-1])["summary"]
        assert summary["outcome"] == "built" and summary["cluster"]["warm"] is True
        assert f"pid {status['pid']}" in summary["cluster"]["how"]
        assert run("farm", "status").returncode == 0  # the farm outlived the run
    finally:
        down = run("farm", "down")
    assert down.returncode == 0, down.stderr
    assert not Path(status["state"]).exists()
    assert still_running({p: s for p, s in head_procs.items() if s}) == []  # raylet, GCS, workers of that head
    assert run("farm", "status").returncode == 1


def test_a_recipe_whose_labels_the_warm_farm_lacks_falls_back_to_an_embedded_instance() -> None:
    """Pure discovery (no Ray): no state file, or labels the head lacks, means an embedded instance."""
    from trtls.builds.farm import warm_farm

    head, why = warm_farm.find({"trtls/pool": "x"})
    assert head is None and "embedded" in why


@pytest.mark.usefixtures("needs_ray")
def test_ctrl_c_of_a_matrix_cancels_every_cell_and_leaves_nothing_running(tmp_path: Path) -> None:
    recipe = local_recipe(tmp_path / "ws", "large", 3, 1, "stop")  # one slot: one cell builds, two wait
    stderr = tmp_path / "stderr.txt"
    cli = subprocess.Popen(
        TRTLS + ["build", str(recipe), "--matrix", "--json"],
        env=env_with_state(tmp_path),  # no warm farm: an embedded instance this command starts and must end
        stdout=subprocess.PIPE,
        stderr=stderr.open("w"),
    )
    assert cli.stdout is not None
    started: dict[int, str] = {}
    try:
        for raw in cli.stdout:
            if json.loads(raw).get("type") == "phase_start":  # a cell's builder is mid-build on the node
                break
        started = descendants(cli.pid)
        cli.send_signal(signal.SIGINT)
        records = [json.loads(raw) for raw in cli.stdout]
        code = cli.wait(timeout=300)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert code == 130
    cells = [r["summary"] for r in records if r.get("type") == "cell_summary"]
    assert len(cells) == 3 and [c["outcome"] for c in cells] == ["cancelled"] * 3, [c["error"] for c in cells]
    assert all(c["cancelSource"] == "ctrl_c" and c["forced"] is False for c in cells)
    assert sum(1 for c in cells if c["node"].get("nodeId")) >= 1  # at least one was building on the node
    parent = records[-1]["summary"]
    assert parent["outcome"] == "cancelled" and {c["outcome"] for c in parent["cells"]} == {"cancelled"}
    names = {pid: Path(f"/proc/{pid}/cmdline").read_bytes() for pid in still_running(started)}
    assert names == {}, names  # no worker, actor, raylet or GCS of that command outlived it
    assert any(b"raylet" in CMDLINES.get(p, b"") for p in started), "the command started no Ray instance?"
    assert unread_monitors(started) == []  # cluster.lean_node: no process that costs CPU every second for nobody
    assert not list((tmp_path / "ws" / "build").glob("m-*.engine"))
    # The exit is bounded by a state, not a duration: ray.shutdown() returned within cluster.SHUTDOWN_BUDGET_S, or
    # the command says it did not and that it ended the embedded instance's processes (then checked above: none left)
    err = stderr.read_text()
    over = [line for line in err.splitlines() if "Ray's shutdown did not end within" in line]
    assert not over or "processes of the embedded instance" in over[0], err[-2000:]
    assert "Traceback" not in err, err[-2000:]


def unread_monitors(procs: dict[int, str]) -> list[bytes]:
    """Ray's log monitor and autoscaler monitor among `procs`: an instance trtls starts runs neither (no driver reads
    the logs they forward, a local instance has a fixed size; docs/farm.md "Measured here")."""
    needles = (b"ray/_private/log_monitor.py", b"autoscaler/_private/monitor.py")
    return [CMDLINES.get(p, b"") for p in procs if any(n in CMDLINES.get(p, b"") for n in needles)]


def farm_descendants(head_pid: int, needle: bytes) -> list[int]:
    """Live processes under the warm head whose command line contains `needle`."""
    return [pid for pid in descendants(head_pid) if needle in CMDLINES.get(pid, b"")]


@pytest.mark.usefixtures("needs_ray")
def test_a_run_on_a_warm_farm_claims_a_warm_actor_whose_worker_imported_tensorrt_before_the_run(
    tmp_path: Path,
) -> None:
    """`trtls farm up` keeps one node host (a named actor) with workers that have TensorRT imported; a matrix run's cell
    runs on it (its evidence says warmWorker and 'warm local farm's node host …'), the worker that builds had imported
    TensorRT before the run started (a probe records every process that imports it), a second run uses the same actor,
    a preloaded worker that died while idle is never used, and `down` ends every process of the farm."""
    from tests.store.helpers import probe_env

    probe_dir = tmp_path / "probe"
    env = {**probe_env(probe_dir), "TRTLS_FARM_STATE": str(tmp_path / "farm.json"), "TRTLS_STORE": "off"}
    run = lambda *a: subprocess.run(TRTLS + list(a), env=env, capture_output=True, text=True, timeout=900)  # noqa: E731
    up = run("farm", "up", "--num-cpus", "1", "--label", "trtls/pool=reuse")
    assert up.returncode == 0, up.stderr
    status = json.loads(run("farm", "status", "--json").stdout)
    assert status["workers"] == 1
    recipe = local_recipe(tmp_path / "ws", "demo", 1, 1, "reuse")
    head_procs: dict[int, str] = {}
    used: set[str] = set()

    def idle_preloaded() -> set[str]:
        """Pids that imported TensorRT, are alive and built nothing yet: the farm's idle preloaded worker."""
        pids = {p.name.split("-", 1)[1] for p in probe_dir.glob("tensorrt-*")} - used
        return {pid for pid in pids if pid.isdigit() and Path(f"/proc/{pid}").exists()}

    try:
        runs = []
        for _ in range(2):
            # what the farm guarantees is a worker that imported TensorRT once it has had the time to: after `up`
            # and after each build it preloads one (a state to wait for — under load the import takes seconds),
            # and a run that starts then claims that one, not a fresh process
            deadline = time.monotonic() + 300
            while not idle_preloaded() and time.monotonic() < deadline:
                time.sleep(0.2)
            assert idle_preloaded(), "the farm never preloaded a worker"
            imported_before = {p.name.split("-", 1)[1] for p in probe_dir.glob("tensorrt-*")}
            built = run("build", str(recipe), "--matrix", "--json")
            assert built.returncode == 0, built.stderr[-2000:]
            records = [json.loads(line) for line in built.stdout.splitlines()]
            parent = records[-1]["summary"]
            cell = next(r["summary"] for r in records if r.get("type") == "cell_summary")
            note = next(iter(parent["cluster"]["cells"].values()))
            used.add(str(note["workerPid"]))
            runs.append((parent, cell, note, imported_before, records))
        for parent, cell, note, imported_before, records in runs:
            assert parent["outcome"] == "built" and parent["cluster"]["warm"] is True
            assert cell["node"]["warmWorker"] is True
            assert note["warm"] is True and note["actor"].startswith("trtls-host-")  # the farm's node host
            # the worker that built had TensorRT imported before this run started, and before its job came
            assert str(note["workerPid"]) in imported_before, (note, imported_before)
            assert note["workerPreloadedAtClaim"] is True and note["workerPreloadedBeforeJob"] is True
            assert any("warm local farm's node host" in (r.get("msg") or "") for r in records if r.get("type") == "log")
            stages = parent["cluster"]["fixedCost"]
            assert stages["workerPreloaded"] < stages["runStart"] < stages["connected"] <= stages["placed"]
            # the cell's bundle reserved on the node, then the farm's host (answered once while it was reserved) claimed
            assert stages["placed"] <= stages["reserved"] <= stages["actorReady"] <= stages["onnxOnNode"]
            assert stages["onnxOnNode"] <= stages["firstPhaseStart"]
        (_, _, first, _, _), (_, _, second, _, _) = runs
        assert second["actor"] == first["actor"] and second["claims"] == first["claims"] + 1  # the same actor, again
        assert second["workerPid"] != first["workerPid"]  # a new worker per build, preloaded between the runs

        # its idle preloaded worker dies: that worker is never used (the host replaces it)
        idle = farm_descendants(status["pid"], b"trtls.builds.farm.preloaded_worker")
        assert len(idle) == 1, idle
        os.kill(idle[0], signal.SIGKILL)
        built = run("build", str(recipe), "--matrix", "--json")
        assert built.returncode == 0, built.stderr[-2000:]
        parent = json.loads(built.stdout.splitlines()[-1])["summary"]
        note = next(iter(parent["cluster"]["cells"].values()))
        assert parent["outcome"] == "built" and note["workerPid"] != idle[0] and note["actor"] == first["actor"], note
        head_procs = {status["pid"]: "", **descendants(status["pid"])}
    finally:
        down = run("farm", "down")
    assert down.returncode == 0, down.stderr
    assert still_running({p: s for p, s in head_procs.items() if s}) == []  # actors, their workers, raylet, GCS


@pytest.mark.usefixtures("needs_ray")
def test_a_driver_killed_on_the_warm_farm_leaves_no_build_running_and_the_host_serves_the_next_run(
    tmp_path: Path,
) -> None:
    """The farm's node host outlives the drivers that send it cells, so it watches each cell's driver: a `kill -9` of
    the CLI mid-build makes the cell's worker cancel itself (its stdin closes) or be killed, the host closes the cell
    and starts its next preloaded worker, and the next run builds on the same host."""
    env = {**env_with_state(tmp_path), "TRTLS_STORE": "off"}
    run = lambda *a: subprocess.run(TRTLS + list(a), env=env, capture_output=True, text=True, timeout=900)  # noqa: E731
    up = run("farm", "up", "--num-cpus", "1", "--label", "trtls/pool=orphan")
    assert up.returncode == 0, up.stderr
    status = json.loads(run("farm", "status", "--json").stdout)
    head_procs: dict[int, str] = {}
    try:

        def on_the_farm(pid: int) -> None:  # the cell builds in one of the farm's preloaded workers
            assert pid in farm_descendants(status["pid"], b"preloaded_worker")

        big = local_recipe(tmp_path / "big", "large", 1, 1, "orphan")
        worker_pid = kill_driver_mid_build(["build", str(big), "--matrix"], env, before=on_the_farm)
        deadline = time.monotonic() + 120  # a bound for what must happen (the host checks every 0.5 s), not a speed
        while worker_pid in farm_descendants(status["pid"], b"preloaded_worker"):
            assert time.monotonic() < deadline, "the killed driver's build is still running on the farm"
            time.sleep(0.5)
        built = run("build", str(local_recipe(tmp_path / "next", "demo", 1, 1, "orphan")), "--matrix", "--json")
        assert built.returncode == 0, built.stderr[-2000:]
        parent = json.loads(built.stdout.splitlines()[-1])["summary"]
        note = next(iter(parent["cluster"]["cells"].values()))
        assert parent["outcome"] == "built" and note["actor"].startswith("trtls-host-") and note["warm"] is True
        assert not (tmp_path / "big" / "build" / "m-1.engine").exists()
        head_procs = {status["pid"]: "", **descendants(status["pid"])}
    finally:
        down = run("farm", "down")
    assert down.returncode == 0, down.stderr
    assert still_running({p: s for p, s in head_procs.items() if s}) == []
