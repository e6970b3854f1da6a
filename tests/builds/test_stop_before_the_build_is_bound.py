"""A Ctrl-C that lands while a job has already gone to a worker but the terminal's build is not yet made.

A changed recipe's own checked job goes to the early worker as soon as the recipe is checked (app/request.py,
`speculation.send_checked`), and an unchanged recipe's last job even before the check (`send_ahead`). The CI of
2026-12-05 caught the window: a Ctrl-C there was taken by asyncio's default handler, which tore the event loop down —
exit 130 with no evidence, and a worker inside TensorRT's builder (SIGSTOPped there, as a long builder call is) left
running. Now the stop keys are in place before the request (cli/common.StopKeys), on the loop: a press lands either
while the request still looks up or waits (the request ends, its worker with it, nothing built) or once the build is
bound (its cooperative stop, with evidence).

Real processes: `trtls` run by a small driver that sends its own process the signal at the exact point (a wrapped
function of the build path), real TensorRT-RTX workers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from trtls.fs.kill import process_alive

AFTER_THE_JOB_WENT = """
import json, os, signal, sys
from trtls.app import build as app_build
started = app_build._start
seen = {}
def start_then_ctrl_c(supervisor, loaded, engine, job, overrides, worker, *rest):
    seen["worker"], seen["build_id"] = worker.pid, job["build_id"]
    for _ in range(int(sys.argv[2])):
        os.kill(os.getpid(), signal.SIGINT)  # the person's Ctrl-C (once, or twice: force), before the view exists
    if sys.argv[3] == "stopped":
        os.kill(worker.pid, signal.SIGSTOP)  # inside the builder: no callback sees the cancel for a while
    return started(supervisor, loaded, engine, job, overrides, worker, *rest)
app_build._start = start_then_ctrl_c
from trtls.cli.entry import main
code = main(["build", sys.argv[1], "--engine", "demo", "--json"])
open(os.environ["TRTLS_TEST_RESULT"], "w").write(json.dumps({"code": code, **seen}))
"""


def _drive(script: str, *args: str) -> tuple[dict, subprocess.CompletedProcess[str]]:
    """The driver's own process, its answer (exit code, the worker's pid, …) written to a file it is told of."""
    result = Path(args[0]).parent / "result.json"
    result.unlink(missing_ok=True)
    proc = subprocess.run(
        [sys.executable, "-c", script, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TRTLS_TEST_RESULT": str(result)},
    )
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return json.loads(result.read_text()), proc


def test_a_ctrl_c_after_the_job_went_and_before_the_view_stops_the_build_with_its_evidence(workspace: Path) -> None:
    got, proc = _drive(AFTER_THE_JOB_WENT, str(workspace), "1", "running")
    assert got["code"] == 130, proc.stderr[-3000:]
    summary = json.loads((workspace / ".trtls" / "runs" / got["build_id"] / "summary.json").read_text())
    assert summary["outcome"] == "cancelled" and summary["cancelSource"] == "ctrl_c", summary
    assert not (workspace / "build" / "demo.engine").exists(), "a stopped build leaves no engine"
    assert not process_alive(got["worker"])


def test_two_presses_before_the_view_with_the_worker_inside_the_builder_force_it_and_nothing_is_left_running(
    workspace: Path,
) -> None:
    got, proc = _drive(AFTER_THE_JOB_WENT, str(workspace), "2", "stopped")
    assert got["code"] == 130, proc.stderr[-3000:]  # the person's forced stop, not the builder's fault (137)
    assert not process_alive(got["worker"]), "the forced stop left the worker running"
    summary = json.loads((workspace / ".trtls" / "runs" / got["build_id"] / "summary.json").read_text())
    assert summary["outcome"] in ("cancelled", "forced"), summary
    assert not (workspace / "build" / "demo.engine").exists()


WHILE_THE_STORE_IS_ASKED = """
import json, os, signal, sys, threading
from trtls.builds.avoidance import lookup
from trtls.cli.common import StopKeys
prepare, on_sigint, handled = lookup.prepare, StopKeys.on_sigint, threading.Event()
seen = {}
def press_handled(self):
    on_sigint(self)
    handled.set()
StopKeys.on_sigint = press_handled
def ctrl_c_then_prepare(*args, **kw):  # in the request's thread: the loop waits for it
    os.kill(os.getpid(), signal.SIGINT)  # while the request looks the store up: no build exists, no job went
    assert handled.wait(120)  # the press handled while the request still waits here
    return prepare(*args, **kw)
lookup.prepare = ctrl_c_then_prepare
from trtls.builds.supervisor import spawn
spawn_worker = spawn.spawn_worker
async def record(*a, **kw):
    w = await spawn_worker(*a, **kw)
    seen["worker"] = w.pid
    return w
spawn.spawn_worker = record
from trtls.cli.entry import main
code = main(["build", sys.argv[1], "--engine", "demo"])
open(os.environ["TRTLS_TEST_RESULT"], "w").write(json.dumps({"code": code, **seen}))
"""


def test_a_ctrl_c_while_the_store_is_asked_ends_the_request_and_its_worker_and_builds_nothing(
    workspace: Path,
) -> None:
    # an edited recipe (its memo no longer holds) starts its worker before the lookup; a first build has no memo, so a
    # build here first, then an edit outside the engine's table
    first = subprocess.run(
        [sys.executable, "-m", "trtls", "build", str(workspace), "--engine", "demo"], capture_output=True, text=True
    )
    assert first.returncode == 0, first.stderr[-3000:]
    engine = workspace / "build" / "demo.engine"
    before = engine.read_bytes()
    runs = sorted((workspace / ".trtls" / "runs").iterdir())
    recipe = workspace / "trtls.toml"
    recipe.write_text(recipe.read_text() + "\n# edited\n")
    got, proc = _drive(WHILE_THE_STORE_IS_ASKED, str(workspace))
    assert got["code"] == 130, proc.stderr[-3000:]
    assert proc.stderr.strip().endswith("trtls build: interrupted by Ctrl-C"), proc.stderr[-3000:]
    assert sorted((workspace / ".trtls" / "runs").iterdir()) == runs, "no build was started"
    assert engine.read_bytes() == before, "the engine is as it was"
    if "worker" in got:  # the early worker (started when the memo no longer held) is ended, not left importing
        assert not process_alive(got["worker"])


SENT_AHEAD_THEN_CTRL_C = """
import json, os, signal, sys
from trtls.builds.supervisor import speculation
send_ahead = speculation.send_ahead
seen = {}
def send_then_ctrl_c(worker, *args):
    sent = send_ahead(worker, *args)
    seen["worker"], seen["sent"] = worker.pid, sent is not None
    os.kill(worker.pid, signal.SIGSTOP)  # inside the builder: it would read no EOF for a while
    raise KeyboardInterrupt  # the person's Ctrl-C in the fast path, the last job already sent
speculation.send_ahead = send_then_ctrl_c
from trtls.cli.entry import main
code = main(["build", sys.argv[1], "--engine", "demo", "--no-store"])
seen["alive_at_return"] = os.path.exists(f"/proc/{seen['worker']}") if "worker" in seen else None
open(os.environ["TRTLS_TEST_RESULT"], "w").write(json.dumps({"code": code, **seen}))
"""


def test_a_ctrl_c_after_the_last_job_went_ahead_kills_the_worker_before_the_command_returns(workspace: Path) -> None:
    first = subprocess.run(
        [sys.executable, "-m", "trtls", "build", str(workspace), "--engine", "demo", "--no-store"],
        capture_output=True,
        text=True,
    )
    assert first.returncode == 0, first.stderr[-3000:]
    got, proc = _drive(SENT_AHEAD_THEN_CTRL_C, str(workspace))
    assert got["sent"], "the memo's job went ahead (the case under test)"
    assert got["code"] == 130, proc.stderr[-3000:]
    assert got["alive_at_return"] is False, "the worker sent a job was left (stopped) after the command returned"


CHECKED_AHEAD_THEN_CTRL_C = """
import json, os, signal, sys
from trtls.builds.supervisor import speculation
send_checked = speculation.send_checked
seen = {}
def send_then_stop(worker, job):
    sent = send_checked(worker, job)
    seen["worker"], seen["sent"] = worker.pid, sent is not None
    os.kill(worker.pid, signal.SIGSTOP)  # inside the builder: it would read no EOF for a while
    if sys.argv[2] == "at_send":
        raise KeyboardInterrupt  # the person's Ctrl-C as the checked job goes, before the command line's modules
    return sent
speculation.send_checked = send_then_stop
class CtrlCAtImport:  # the person's Ctrl-C while the command line's modules are imported, the checked job sent
    def find_spec(self, name, path=None, target=None):
        if name == "trtls.cli.main" and sys.argv[2] == "at_import":
            raise KeyboardInterrupt
sys.meta_path.insert(0, CtrlCAtImport())
from trtls.cli.entry import main
code = main(["build", sys.argv[1], "--engine", "demo", "--no-store"])
seen["alive_at_return"] = os.path.exists(f"/proc/{seen['worker']}") if "worker" in seen else None
open(os.environ["TRTLS_TEST_RESULT"], "w").write(json.dumps({"code": code, **seen}))
"""


def test_a_ctrl_c_after_the_checked_job_went_ahead_kills_the_worker_before_the_command_returns(
    workspace: Path,
) -> None:
    """A `--no-store` build with no job remembered (the first here): the fast path checks the recipe and sends its
    job before the command line's modules and their stop keys exist (cli/store_lookup.check_ahead). A Ctrl-C then —
    as the job goes, or while `cli.main` is imported — ends the command as any early Ctrl-C does: exit 130, and the
    worker (held inside the builder here) is gone before the command returns; it held its commit, so the output and
    the evidence folder are as they were."""
    for moment in ("at_send", "at_import"):
        got, proc = _drive(CHECKED_AHEAD_THEN_CTRL_C, str(workspace), moment)
        assert got["sent"], f"{moment}: the checked job went ahead (the case under test)"
        assert got["code"] == 130, proc.stderr[-3000:]
        assert got["alive_at_return"] is False, f"{moment}: the worker sent a job was left after the command returned"
        assert not (workspace / "build" / "demo.engine").exists()
        assert not list((workspace / ".trtls" / "runs").glob("demo-*/summary.json"))
