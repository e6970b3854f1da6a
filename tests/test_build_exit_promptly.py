"""`trtls build` ends its process without the interpreter's teardown once the build's records are durable (issue 31:
the teardown of pydantic's models and every imported module is time a person waits for after the evidence is
written), and a caller that runs `main([...])` in its own process keeps its process.

A real process: a driver that is the `trtls` command by the rule `cli.reduce.started_as_trtls` reads (`main` in
`__main__` is `trtls.cli.entry.main`), with an object whose finalizer says on stderr that the interpreter was torn down,
and an atexit hook that says it ran (the hooks still run: logging's flush is one)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

TORN = "trtls-test: interpreter torn down"
ATEXIT = "trtls-test: atexit ran"

DRIVER = f"""
import atexit, os, sys
class Torn:
    def __del__(self, write=os.write):
        write(2, b"\\n{TORN}\\n")
keep = Torn()
atexit.register(lambda write=os.write: write(2, b"\\n{ATEXIT}\\n"))
from trtls.cli.entry import main
sys.argv = ["trtls", *sys.argv[1:]]
sys.exit(main())  # as the console script and `python -m trtls` call it
"""


def test_a_build_exits_without_the_interpreters_teardown_after_its_evidence_is_written(workspace: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, "build", str(workspace), "--engine", "demo", "--no-store"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert ATEXIT in proc.stderr, "the atexit hooks did not run"
    assert TORN not in proc.stderr, "the process went through the interpreter's teardown after the build"
    runs = list((workspace / ".trtls" / "runs").glob("demo-*"))
    assert len(runs) == 1
    summary = json.loads((runs[0] / "summary.json").read_text())
    assert summary["outcome"] == "built" and (workspace / summary["engineArtifact"]["path"]).is_file()
    assert not (runs[0] / "running.json").exists()
    assert {p.name for p in runs[0].iterdir()} >= {"summary.json", "tree.json", "environment.json", "events.jsonl"}


def test_a_caller_running_main_in_its_own_process_keeps_its_process(workspace: Path) -> None:
    # `main` in __main__ is trtls's own, but called with its argv: a driver that goes on after the build
    caller = DRIVER.replace('sys.argv = ["trtls", *sys.argv[1:]]\n', "")
    caller = caller.replace("sys.exit(main())", "code = main(sys.argv[1:])\nprint('after', code)")
    assert "sys.argv = " not in caller and "print('after'" in caller
    proc = subprocess.run(
        [sys.executable, "-c", caller, "build", str(workspace), "--engine", "demo", "--no-store"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "after 0" in proc.stdout
    assert TORN in proc.stderr


INTERRUPTED_AT_IMPORT = """
import sys
class CtrlC:  # Ctrl-C while the command line's modules are imported: after the fast path, before any stop of a command
    def find_spec(self, name, path=None, target=None):
        if name == "trtls.cli.main":
            raise KeyboardInterrupt
        return None
sys.meta_path.insert(0, CtrlC())
from trtls.cli.entry import main
sys.argv = ["trtls", *sys.argv[1:]]
sys.exit(main())
"""


def test_ctrl_c_before_the_commands_own_stop_is_one_line_and_130_not_a_traceback(workspace: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_AT_IMPORT, "build", str(workspace), "--engine", "demo", "--no-store"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 130, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip() == "trtls build: interrupted by Ctrl-C"
    assert not (workspace / ".trtls" / "runs").exists()


INTERRUPTED_IN_THE_FAST_PATH = """
import sys
class CtrlC:  # Ctrl-C while the entry's fast path looks the store up (its modules load inside it)
    def find_spec(self, name, path=None, target=None):
        if name == "trtls.app.unchanged":
            raise KeyboardInterrupt
        if name == "trtls.cli.main":
            sys.stderr.write("trtls-test: the full path was entered\\n")
        return None
sys.meta_path.insert(0, CtrlC())
from trtls.cli.entry import main
sys.argv = ["trtls", *sys.argv[1:]]
sys.exit(main())
"""


def test_ctrl_c_in_the_fast_path_stops_and_builds_nothing(workspace: Path) -> None:
    """The entry used to take a Ctrl-C during its fast path (~0.3 s of imports and hashes) for "start over": it went
    on to the full path and built, exit 0 — the user's stop was ignored. Now it stops there: 130, one line."""
    proc = subprocess.run(
        [sys.executable, "-c", INTERRUPTED_IN_THE_FAST_PATH, "build", str(workspace), "--engine", "demo"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 130, proc.stderr[-3000:]
    assert proc.stderr.strip() == "trtls build: interrupted by Ctrl-C"
    assert not (workspace / ".trtls" / "runs").exists() and not (workspace / "build" / "demo.engine").exists()


THREADS = """
import _thread, os, sys, threading, time
from trtls.cli.reduce import exit_promptly
class Torn:
    def __del__(self, write=os.write):
        write(2, b"torn down\\n")
keep = Torn()
kind = sys.argv[1]
if kind == "foreign":  # a library's thread that asked for current_thread once: listed as a _DummyThread ever after
    _thread.start_new_thread(threading.current_thread, ())
    time.sleep(0.2)
    assert any(isinstance(t, threading._DummyThread) for t in threading.enumerate())
elif kind == "finishing":  # a thread ending its last lines (beside a burner) when the command ends
    threading.Thread(target=time.sleep, args=(0.1,)).start()
elif kind == "running":  # one that does not end: the normal exit, which waits for it
    threading.Thread(target=time.sleep, args=(2.0,)).start()
exit_promptly(7)
print("normal exit", flush=True)
sys.exit(7)
"""


def test_the_prompt_exit_waits_briefly_for_threads_and_does_not_count_a_foreign_thread_that_ended() -> None:
    """The rule behind both commands' prompt end (`cli.reduce._threads_ended`): a foreign thread that once asked for
    `threading.current_thread()` stays listed after it ended and kept every later exit normal; a thread finishing
    within half a second is waited for; one still running keeps the normal exit."""
    ends = {}
    for kind in ("foreign", "finishing", "running"):
        proc = subprocess.run([sys.executable, "-c", THREADS, kind], capture_output=True, text=True, timeout=60)
        assert proc.returncode == 7, proc.stderr[-2000:]
        ends[kind] = "normal exit" in proc.stdout, "torn down" in proc.stderr
    assert ends == {"foreign": (False, False), "finishing": (False, False), "running": (True, True)}
