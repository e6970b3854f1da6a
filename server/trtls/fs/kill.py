"""Signals go only to processes that are provably ours.

* `signal_child`: a child we started and still hold a handle to (a `subprocess.Popen` or an asyncio process) and
  have not reaped (a reaped pid may already belong to someone else). `group=True` signals its process group, and
  only when the child leads one (it was started with `start_new_session=True`). `end_child` (a Popen) and
  `end_child_async` (an asyncio process) are the one rule for a child that owes nothing: SIGKILL to the group it
  leads, then a reap bounded at `REAP_WITHIN_S`.
* `signal_proven`: a process named by a record on disk (orphan recovery's `running.json`, the warm farm's pid
  file). A record can be planted, so its pid proves nothing: the process must have the recorded start id (not a
  reused pid) **and** carry in its environment the per-run nonce the supervisor passed only to it
  (`NONCE_ENV`). When either cannot be shown, nothing is signalled and the reason is returned.
* `signal_descendant`: a process found by walking the tree under one of our children (its parent chain reaches it).
* `signal_self`: this process (a synchronous command re-raising a signal through its own handler).

Probing a pid with signal 0 (`process_alive`) sends nothing and lives here too, beside the start id that names a
process for ever.
"""

from __future__ import annotations

import contextlib
import os
import signal as _signal
import subprocess
from typing import Any, NamedTuple

from trtls.fs.nonce import NONCE_ENV as NONCE_ENV
from trtls.fs.nonce import new_nonce as new_nonce


def process_alive(pid: int | None) -> bool:
    """True for a live process (a zombie is not alive for our purposes)."""
    if not pid or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, OverflowError):  # OverflowError: a record's pid larger than any pid (not a process)
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[-1].split()[0] != b"Z"
    except (OSError, IndexError):
        return True


def process_start_id(pid: int | None) -> str | None:
    """Who a PID is, not only that it exists: `<boot id>:<start time in clock ticks since boot>` (a pid is reused
    after its process dies; the kernel's start time with the boot names one process for ever). None when /proc
    cannot say."""
    if not pid or pid <= 0:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        with open("/proc/sys/kernel/random/boot_id") as fh:
            boot = fh.read().strip()
    except (OSError, IndexError):
        return None
    return f"{boot}:{fields[19].decode()}"


def _environ_has(pid: int, entry: str) -> bool | None:
    """Whether the process's environment holds `entry` (None when it cannot be read: another account's process)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as fh:
            data = fh.read(1 << 20)
    except OSError:
        return None
    return entry.encode() in data.split(b"\0")


class ProcessProof(NamedTuple):
    """What a record must carry for trtls to signal the process it names. Immutable (a NamedTuple, not a frozen
    dataclass: a CLI build imports this module before it starts its worker, and `dataclasses` brings `inspect`)."""

    pid: int
    start_id: str | None
    nonce: str | None


def prove(proof: ProcessProof) -> str | None:
    """None when the process is provably the one the record names; else why it is not (nothing is signalled)."""
    if not isinstance(proof.pid, int) or proof.pid <= 1 or proof.pid == os.getpid():
        return f"pid {proof.pid!r} is not a process trtls could have started"
    if not process_alive(proof.pid):
        return f"pid {proof.pid} is not running"
    if not proof.start_id or process_start_id(proof.pid) != proof.start_id:
        return f"pid {proof.pid} is alive but its start time is not the recorded one (another process)"
    if not proof.nonce:
        return f"pid {proof.pid}: the record carries no run nonce, so it cannot be proved to be trtls's"
    has = _environ_has(proof.pid, f"{NONCE_ENV}={proof.nonce}")
    if has is None:
        return f"pid {proof.pid} belongs to an account whose environment trtls cannot read; left alone"
    if not has:
        return f"pid {proof.pid} does not carry this run's nonce: it is not the process the record names"
    return None


def signal_proven(proof: ProcessProof, sig: int, *, group: bool = False) -> str | None:
    """Signal the process a record names (its group with `group`, when it leads one) only if `prove` passes.
    Returns None when signalled, else why not."""
    why = prove(proof)
    if why is not None:
        return why
    try:
        if group and os.getpgid(proof.pid) == proof.pid:
            os.killpg(proof.pid, sig)
        else:
            os.kill(proof.pid, sig)
    except (ProcessLookupError, PermissionError) as exc:
        return f"pid {proof.pid}: {exc.strerror}"
    return None


def signal_child(proc: Any, sig: int = _signal.SIGKILL, *, group: bool = False) -> bool:
    """Signal a child we hold (Popen or asyncio process) that has not been reaped; `group`: its process group when
    the child leads one. False when it is already gone."""
    if getattr(proc, "returncode", None) is not None:
        return False
    pid = proc.pid
    try:
        if group:
            try:
                leads = os.getpgid(pid) == pid
            except ProcessLookupError:
                return False
            if leads:
                os.killpg(pid, sig)
                return True
        os.kill(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


REAP_WITHIN_S = 5.0  # a reap never holds a command's end for longer: a child stuck in the kernel is the OS's to reap


def end_child(proc: subprocess.Popen[Any], *, within: float = REAP_WITHIN_S) -> bool:
    """End a child we hold that owes nothing (a worker never committed, a preloaded worker nobody took): our end of its
    input closed, SIGKILL to the session's group it leads (its own children with it), then reaped within `within` s.
    False when it had already ended, or did not end in time (killed, left to the OS: a task in uninterruptible
    sleep)."""
    _close_input(proc)
    if not signal_child(proc, _signal.SIGKILL, group=True):
        proc.poll()
        return False
    try:
        proc.wait(within)
    except subprocess.TimeoutExpired:
        return False
    return True


async def end_child_async(proc: Any, *, within: float = REAP_WITHIN_S) -> bool:
    """`end_child` for an asyncio process."""
    import asyncio

    _close_input(proc)
    if not signal_child(proc, _signal.SIGKILL, group=True):
        return False
    try:
        await asyncio.wait_for(proc.wait(), within)
    except TimeoutError:
        return False
    return True


def _close_input(proc: Any) -> None:
    """Nothing more goes to a child being ended, and no pipe of ours to it stays open (a child that had already ended
    included). A pipe whose reader is gone may refuse its last flush: nothing was owed to it."""
    stdin = getattr(proc, "stdin", None)
    if stdin is not None:
        with contextlib.suppress(OSError):
            stdin.close()


def _parent(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return int(fh.read().rsplit(b")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def signal_descendant(pid: int, sig: int, ancestor: int) -> bool:
    """Signal `pid` only when its parent chain reaches `ancestor` (a child of ours or one of its own)."""
    cursor: int | None = pid
    for _ in range(64):
        cursor = _parent(cursor) if cursor else None
        if cursor is None or cursor <= 1:
            return False
        if cursor == ancestor:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                return False
            return True
    return False


def signal_self(sig: int) -> None:
    """Deliver `sig` to this very process (a synchronous command re-entering its own signal handler)."""
    os.kill(os.getpid(), sig)


def kill_ray_actor(ray: Any, actor: Any, *, no_restart: bool = True) -> None:
    """End a Ray actor this driver or farm created (Ray owns the process; its handle is the proof)."""
    ray.kill(actor, no_restart=no_restart)
