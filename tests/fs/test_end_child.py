"""`fs.kill.end_child` / `end_child_async`: the one rule for a child that owes nothing — its whole session's group
killed (its own children with it), the child reaped, within a bound. Real processes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

from trtls.fs.kill import end_child, end_child_async, process_alive

# A child in a session of its own that starts a grandchild (same group) and prints its pid, then waits for ever.
_PARENT = (
    "import subprocess, sys, time\n"
    "g = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
    "print(g.pid, flush=True)\n"
    "time.sleep(600)\n"
)


def _gone(pid: int) -> bool:
    """The grandchild (reparented to init, which reaps it) is gone within a few seconds."""
    end = time.monotonic() + 10
    while time.monotonic() < end:
        if not process_alive(pid):
            return True
        time.sleep(0.02)
    return False


def test_end_child_kills_the_group_and_reaps_the_child() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", _PARENT], stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
    )
    assert proc.stdout is not None and proc.stdin is not None
    grandchild = int(proc.stdout.readline())
    assert process_alive(grandchild)

    assert end_child(proc) is True
    assert proc.returncode == -9  # reaped by end_child: SIGKILL
    assert proc.stdin.closed  # our end of its input: no pipe left open
    assert _gone(grandchild), "the child's own child outlived it"
    assert end_child(proc) is False  # already ended: nothing signalled (its pid may be someone else's by now)


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(")", 1)[1].split()[0]


def test_end_child_of_a_child_that_exited_unreaped_reaps_it_with_its_own_status() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    while _state(proc.pid) != "Z":
        time.sleep(0.01)  # a zombie: exited, not reaped; its pid is still ours, so the kill lands on nothing alive
    assert end_child(proc) is True
    assert proc.returncode == 0  # the exit it made, not the kill


def test_end_child_async_kills_the_group_and_reaps_the_child() -> None:
    async def run() -> tuple[int, int | None]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _PARENT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
        )
        assert proc.stdout is not None and proc.stdin is not None
        grandchild = int(await proc.stdout.readline())
        assert await end_child_async(proc) is True
        assert proc.stdin.is_closing()  # our end of its input: no pipe left open
        return grandchild, proc.returncode

    grandchild, returncode = asyncio.run(run())
    assert returncode == -9
    assert _gone(grandchild)
