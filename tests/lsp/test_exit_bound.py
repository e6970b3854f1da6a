"""`exit` ends the server's process, always (trtls.lsp.wire_guard's doc): the real server over stdio answers
`exit` after `shutdown` with 0 and without it with 1, and a process whose normal unwinding is blocked (a
non-daemon thread that never returns, as a read of a stdin the client keeps open would be) still ends, with
`exit`'s code, once the bound has passed. Without the bound, the blocked child below never ends and its wait fails."""

from __future__ import annotations

import subprocess
import sys
import textwrap

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
