"""Processes the door saw under one of ours, signalled later by who they are.

`fs.kill.signal_descendant` proves descent at the moment of the signal: the parent chain must reach our process
*now*. That cannot end what an embedded Ray instance leaves behind: when its raylet exits, its agents and workers
are re-parented to init, so their chain no longer reaches us — and those orphans are exactly what must be ended.

So descent is proved when the door *sees* it (`witness`: the process's parent chain reaches a process of ours at
that moment), and the process is named for ever by its start id (boot id + start time: a reused pid is another
process). `signal_witnessed` signals only a process this module witnessed and whose start id is still the same.
A witness made elsewhere (a forged `Witnessed`) is refused: only what `witness` returned is in the registry.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from trtls.fs.kill import process_alive, process_start_id


@dataclass(frozen=True)
class Witnessed:
    pid: int
    start_id: str


_seen: set[Witnessed] = set()
_lock = threading.Lock()


def _parents() -> dict[int, int]:
    out: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                out[int(entry)] = int(fh.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return out


def _ours(pid: int, parents: dict[int, int]) -> bool:
    """`pid` is this process or one whose parent chain reaches it."""
    me = os.getpid()
    cursor: int | None = pid
    for _ in range(256):
        if cursor == me:
            return True
        cursor = parents.get(cursor) if cursor else None
        if cursor is None or cursor <= 1:
            return False
    return False


def witness(roots: list[int]) -> list[Witnessed]:
    """Every live process under `roots` (the roots included), each root being this process or one under it; what is
    returned can later be signalled with `signal_witnessed`. A root that is not ours is skipped, with its tree."""
    parents = _parents()
    children: dict[int, list[int]] = {}
    for child, parent in parents.items():
        children.setdefault(parent, []).append(child)
    found: list[Witnessed] = []
    visited: set[int] = set()
    frontier = [r for r in roots if _ours(r, parents)]
    me = os.getpid()
    while frontier:
        pid = frontier.pop()
        if pid in visited:
            continue
        visited.add(pid)
        frontier.extend(children.get(pid, []))
        if pid == me:
            continue  # never this very process
        start = process_start_id(pid)
        if start is not None:
            found.append(Witnessed(pid, start))
    with _lock:
        _seen.difference_update({w for w in _seen if process_start_id(w.pid) != w.start_id})  # gone: forget them
        _seen.update(found)
    return found


def still_running(procs: list[Witnessed]) -> list[Witnessed]:
    """Those of `procs` that still run as the same process (a zombie has ended)."""
    return [w for w in procs if process_alive(w.pid) and process_start_id(w.pid) == w.start_id]


def signal_witnessed(proc: Witnessed, sig: int) -> bool:
    """Signal a process `witness` saw under ours, if it is still that process. False when it is not (or is gone)."""
    with _lock:
        if proc not in _seen:
            return False
    if process_start_id(proc.pid) != proc.start_id:
        return False
    try:
        os.kill(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    return True
