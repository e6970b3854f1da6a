"""One runtime child process, parent side: started in its own process group, waited for with a deadline,
cut (SIGKILL to the group) when the deadline passes, reaped, and its exit classified.

Separate from `runtime_calls` because this is the part that must never leak a process or hang, whatever
the runtime does; it knows nothing about models, modes or `.npz` files.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from trtls.fs import Kind, open_regular
from trtls.fs.capture import new_file
from trtls.fs.kill import signal_child
from trtls.runtimes.contract import STDERR_TAIL, RunStatus, RuntimeSpec


class _Child:
    """One child process in its own process group; stdout/stderr go to files (no pipe can fill and block)."""

    def __init__(self, argv: list[str], workdir: Path, env: dict[str, str], tag: str, cwd: str):
        self.out_path = workdir / f"{tag}.stdout"
        self.err_path = workdir / f"{tag}.stderr"
        self.started = time.perf_counter()
        self.ended: float | None = None
        self.status: int | None = None  # raw wait status
        self.rss: int | None = None
        self.timed_out = False
        self.spawn_error: str | None = None
        try:
            with (
                new_file(self.out_path, kind=Kind.scratch, within=workdir) as out,
                new_file(self.err_path, kind=Kind.scratch, within=workdir) as err,
            ):
                self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                    argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=cwd, env=env, start_new_session=True
                )
        except OSError as exc:
            self.proc = None
            self.spawn_error = f"cannot start {argv[0]!r}: {exc.strerror or exc}"
            self.ended = time.perf_counter()

    @property
    def done(self) -> bool:
        return self.ended is not None

    def poll(self) -> bool:
        if self.done:
            return True
        assert self.proc is not None
        # WNOWAIT: the exited child stays a zombie, so its pid (= process-group id) cannot be reused
        # before we kill what it left behind in its group and reap it.
        if os.waitid(os.P_PID, self.proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            return False
        self._kill_group()  # grandchildren left behind by the runtime go too
        self._reap()
        return True

    def _reap(self) -> None:
        assert self.proc is not None
        _, status, usage = os.wait4(self.proc.pid, 0)
        self.ended = time.perf_counter()
        self.status = status
        self.rss = int(usage.ru_maxrss) * (1 if sys.platform == "darwin" else 1024)
        self.proc.returncode = os.waitstatus_to_exitcode(status)  # so Popen never waits on a reaped pid

    def _kill_group(self) -> None:
        assert self.proc is not None
        # our child, not reaped yet (WNOWAIT above): its pid and group id are still its own
        signal_child(self.proc, signal.SIGKILL, group=True)

    def cut(self) -> None:
        """Timeout: kill the whole process group, then reap."""
        if self.done or self.proc is None:
            return
        self.timed_out = True
        self._kill_group()
        self._reap()

    @property
    def elapsed(self) -> float:
        return (self.ended or time.perf_counter()) - self.started

    @property
    def returncode(self) -> int | None:
        return None if self.proc is None else self.proc.returncode

    def stderr_tail(self) -> str:
        try:
            with open_regular(self.err_path, limit=None, follow=False) as f:
                f.seek(max(0, os.fstat(f.fileno()).st_size - STDERR_TAIL))
                data = f.read(STDERR_TAIL)
        except OSError:
            return ""
        return data.decode("utf-8", "replace").strip()


def _wait_all(children: Sequence[_Child], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    delay = 0.002
    try:
        while True:
            pending = [c for c in children if not c.poll()]
            if not pending:
                return
            if time.monotonic() >= deadline:
                for c in pending:
                    c.cut()
                return
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 0.05)
    except BaseException:  # KeyboardInterrupt or a bug: never leave a runtime running behind us
        for c in children:
            c.cut()
        raise


def _child_env(spec: RuntimeSpec) -> dict[str, str]:
    env = dict(os.environ)
    pkg_root = str(Path(__file__).resolve().parents[2])  # the folder holding `trtls/`
    env["PYTHONPATH"] = pkg_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["TRTLS_MAX_INPUT_BYTES"] = str(spec.max_input_bytes)
    env.update(spec.env)
    return env


def _cwd(spec: RuntimeSpec) -> str:
    return str(Path(spec.cwd).resolve()) if spec.cwd else os.getcwd()


def _classify_exit(child: _Child, timeout_s: float) -> tuple[RunStatus, str] | None:
    """timeout / crash / spawn failure, or None when the child exited by itself."""
    if child.spawn_error:
        return "unavailable", child.spawn_error
    if child.timed_out:
        return "timeout", f"timed out after {timeout_s:g} s; the runtime's process group was killed"
    rc = child.returncode
    if rc is not None and rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        return "crash", f"the runtime process died from {name}" + (
            f": {child.stderr_tail()[-300:]}" if child.stderr_tail() else ""
        )
    return None
