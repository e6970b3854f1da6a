"""`exit` ends the server's process, always (trtls.lsp.wire_guard's doc): the real server over stdio answers
`exit` after `shutdown` with 0 and without it with 1, and a process whose normal unwinding is blocked (a
non-daemon thread that never returns, as a read of a stdin the client keeps open would be) still ends, with
`exit`'s code, once the bound has passed. Without the bound, the blocked child below never ends and its wait fails."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

from trtls.builds.farm import proc_tree

from .raw_stdio import RawServer

BLOCKED = textwrap.dedent(
    """
    import threading, sys
    from trtls.lsp import wire_guard
    threading.Thread(target=threading.Event().wait).start()  # non-daemon, never returns: blocks the normal exit
    wire_guard.exit_no_later_than(int(sys.argv[1]), seconds=0.5)
    sys.exit(int(sys.argv[1]))
    """
)


@contextlib.contextmanager
def ended_by_exit(workspace: Path) -> Iterator[RawServer]:
    """A real server over stdio, initialized on `workspace`; after the body, `exit` (the body sent `shutdown`) ends it
    with 0, and its stderr holds no traceback."""
    s = RawServer(cwd=workspace)
    try:
        s.initialize(workspace)
        yield s
        s.notify("exit")
        assert s.wait() == 0
    finally:
        if s.proc.poll() is None:
            s.proc.kill()
    assert b"Traceback" not in s.stderr, s.stderr.decode(errors="replace")[-3000:]


def test_a_blocked_unwinding_still_ends_with_exits_code() -> None:
    for code in (0, 1):
        child = subprocess.run([sys.executable, "-c", BLOCKED, str(code)], timeout=60, capture_output=True, text=True)
        assert child.returncode == code, child.stderr
        assert "still running 0 s after exit; ending the process" in child.stderr


def test_the_server_ends_on_exit_with_0_after_shutdown_and_1_without() -> None:
    for shut_down_first, code in ((True, 0), (False, 1)):
        s = RawServer()
        try:
            assert "result" in s.request("initialize", {"capabilities": {}, "processId": None})
            s.notify("initialized", {})
            if shut_down_first:
                assert "result" in s.request("shutdown")
            s.notify("exit")
            assert s.proc.wait(timeout=60) == code
        finally:
            if s.proc.poll() is None:
                s.proc.kill()


def test_a_shutdown_while_capability_is_asked_ends_its_child_and_prints_no_traceback(workspace: Path) -> None:
    """A recipe opened, its capability question out (a TensorRT child of the server's, `trtls.builds.worker
    .capability`), then `shutdown` and `exit`: the question is cancelled and its child killed and reaped before the
    shutdown's reply (`TrtlsServer.stop_own_work`). Left to the loop's end, a child still being started printed
    asyncio's "Event loop is closed" traceback (a CI run, 2026-12-05), and one running outlived the shutdown. Waits on
    processes seen, not on time."""
    with ended_by_exit(workspace) as s:
        recipe = workspace / "trtls.toml"
        s.notify("textDocument/didOpen", {"textDocument": {"uri": recipe.as_uri(), "languageId": "toml", "version": 1,
                                                            "text": recipe.read_text()}})  # fmt: skip
        deadline, child = time.monotonic() + 120, None
        while child is None:
            assert time.monotonic() < deadline, "no capability child was started"
            child = next((p for p in proc_tree.descendants(s.proc.pid).values() if "worker.capability" in p.name), None)
            time.sleep(0.02)
        assert "result" in s.request("shutdown")
        # ended before the reply: left to the process's end, it was still running here
        again = proc_tree.read(child.pid)
        assert again is None or again.start != child.start, "the capability child outlived the shutdown"


def test_a_check_a_keystroke_left_due_is_dropped_at_shutdown_and_nothing_is_published_after_it(
    workspace: Path,
) -> None:
    """Keystrokes right after a check leave a trailing check due (`validate_later`, 0.15 s later); a `shutdown`
    before it fires drops it (`TrtlsServer.stop_checks`): no diagnostics after the shutdown's reply, and none of the
    check's work while `exit` unwinds the loop — where, after asyncio had shut its thread pool down, it logged
    "Executor shutdown has been called" with a traceback (a CI run under a CPU burner, 2026-12-07). The wait after the
    reply is 10 debounce periods: a server that still checks publishes within it unless the machine stalls longer,
    which can hide the fault but never fail a correct server."""
    with ended_by_exit(workspace) as s:
        recipe = workspace / "trtls.toml"
        uri, text = recipe.as_uri(), recipe.read_text()
        s.notify(
            "textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "toml", "version": 1, "text": text}}
        )
        s.wait_for(lambda m: m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri)
        for version in (2, 3):  # the second within the debounce of the first's check: a trailing check is due
            s.notify(
                "textDocument/didChange",
                {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text + "\n" * version}]},
            )
        reply = s.request("shutdown")
        assert "result" in reply
        time.sleep(1.5)
        after = s.messages[s.messages.index(reply) + 1 :]
        assert [m for m in after if m.get("method") == "textDocument/publishDiagnostics"] == []
