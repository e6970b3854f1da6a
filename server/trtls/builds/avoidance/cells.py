"""Build avoidance for a matrix: every cell keyed before anything starts (the terminal's --matrix/--all and the
editor's Build Matrix), the ones in the store restored, cells of one key built once and the others restored from its
entry when it has published (docs/store.md). One engine's lookup is builds/avoidance/lookup.py, which this uses."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from typing import Any

from trtls.builds.avoidance.lookup import after_build, attach, find_entry, prepare, reuse_or_lock
from trtls.builds.avoidance.restore import restore_now
from trtls.builds.supervisor.job import new_build_id
from trtls.store.entries import StoreUnusable
from trtls.store.use import CellsLookup, StoreUse, release_uses


async def avoid_cells(loaded: Any, planned: list[Any], *, no_store: bool = False, rebuild: bool = False) -> CellsLookup:
    """Key every planned cell (trtls.builds.supervisor.matrix.PlannedCell) and restore the ones whose key is in the
    store (on a
    cluster they cost no node). Cells of this run that share a key build once: the first is built, the others leave
    `left` (`same_key`) and are restored from its entry when it has published (`attach_cells`). A cell whose key
    another process is building is built here too: a matrix does not wait cell by cell. A store that cannot be
    used: every cell is built without it (one warning)."""
    if no_store:
        return CellsLookup(list(planned))
    found = CellsLookup([])
    leaders: dict[str, tuple[str, StoreUse]] = {}  # engine key → (the cell of this run that builds it, its use)
    for p in planned:
        history = p.key.replace("/", ".")
        try:
            use = await asyncio.to_thread(prepare, loaded, p.engine, p.overrides, rebuild=rebuild, history=history)
        except StoreUnusable as exc:
            found.release()
            return CellsLookup(list(planned), warnings=[f"{exc.code} {exc}: the matrix builds without the store"])
        follows = leaders.get(use.key.hex) if use.key is not None else None
        if follows is not None:
            follows[1].followers.append((p.key, use))
            found.same_key.append((p, follows[0]))
            continue
        # the miss is counted when the cell ends (after_build): its node may yet serve it from the remote store
        reused = await reuse_or_lock(use, loaded, wait=False, count_miss=False)
        found.warnings += use.warnings
        if reused is None:
            found.left.append(p)
            found.uses[p.key] = use
            if use.key is not None and use.store is not None and use.store.writable:
                leaders[use.key.hex] = (p.key, use)  # a read-only store never holds its engine: both build
        else:
            found.reused.append((p, reused))
    return found


def node_store_plan(use: StoreUse | None) -> dict[str, Any] | None:
    """What a farm node needs to publish a cell's engine to the remote store itself (builds/farm/node_store.py),
    or None: no remote, a store this run does not write (`mode = "read"`), a signed store (the signing key stays on
    this machine: it publishes), or a cell the store does not key."""
    store = use.store if use is not None else None
    if use is None or store is None or use.key is None or use.not_used is not None or not store.remote_url:
        return None
    if store.mode != "read_write" or store.signing_key_file is not None:
        return None
    return {"url": store.remote_url.strip(), "key": use.key.hex, "parts": use.key.parts, "engine": use.engine}


def with_node_store(remote_for: Callable[[Any], Any] | None, uses: dict[str, StoreUse]) -> Callable[[Any], Any] | None:
    """`remote_for` (a cell → its RemoteSpec) with each cell's `node_store_plan` in its spec. A local farm's node is
    this machine: the engine is already here, and this process sends it on as it publishes it."""
    if remote_for is None:
        return None
    place = remote_for

    def spec(p: Any) -> Any:
        s = place(p)
        return s if s.same_machine else dataclasses.replace(s, store=node_store_plan(uses.get(p.key)))

    return spec


FollowerDone = Callable[[str, "dict[str, Any] | None", str], None]


def attach_cells(
    mb: Any,
    uses: dict[str, StoreUse],
    on_follower: FollowerDone | None = None,
    on_warning: Callable[[str, str], None] | None = None,
) -> None:
    """Publish each cell that builds when it ends (before any view reads its summary), then restore the cells of
    the same key from its entry (`on_follower(cell key, the reuse's summary or None, what happened)`); when the
    matrix ends, release the locks of cells that never started (it was stopped first). `on_warning(cell key, line)`:
    the store's warnings that come with a cell's end (its upload stopped), as `lookup.attach` says a build's.

    A cell is published as a single build is (`lookup.attach`, from its first event): on a thread its end awaits,
    and a stop of the matrix — it stops every cell: the terminal's Ctrl-C, the editor's Stop — cuts the engine's
    upload to the remote store at once (the cell's `Build.stop_end_with`). On the loop, inside the matrix's listener,
    the upload held the loop: the stop waited for the upload's whole bound, cell after cell."""
    attached: set[str] = set()  # the cells' build ids whose end the store's listener does (attach)

    def settle(key: str, build: Any) -> None:
        use = uses.pop(key, None)  # published: the cells of its key are restored from it
        if use is not None:
            follow(use, build, key, on_follower)

    def on_cell(m: Any, build: Any, ev: Any) -> None:
        if build is None:  # the matrix is over: the cells still here never ran
            if ev is None:
                for cell in (c for u in uses.values() for c, _ in u.followers):
                    if on_follower is not None:
                        on_follower(cell, None, "not built: the cell of the same engine key never ran")
                release_uses(uses)
            return
        key = f"{build.engine}/{build.cell}" if build.cell else build.engine
        use = uses.get(key)
        if use is None or build.id in attached:
            return
        if ev is not None:  # its first event: the store's end goes before this listener's (a view's) at its end
            attached.add(build.id)
            said = None if on_warning is None else lambda line: on_warning(key, line)
            attach(use, build, said, count=True, then=lambda b: settle(key, b))
        else:  # over before any event (its worker never started): nothing was built, nothing is sent
            after_build(use, build, count=True)
            settle(key, build)

    mb.listeners.insert(0, on_cell)


def follow(leader: StoreUse, build: Any, leader_cell: str, on_follower: FollowerDone | None) -> None:
    """Restore every cell of `leader`'s key from the entry its build has just published (verified, atomic, evidence
    `reused` with `store.waitedFor` naming the cell): one TensorRT build for all of them."""
    for cell, use in leader.followers:
        entry = None
        if build.outcome == "built" and use.store is not None and use.key is not None:
            entry = find_entry(use, remote=False)  # just published here (on the event loop: never the remote)
        summary = None
        if entry is not None:
            use.waited_for = f"cell {leader_cell} of this matrix (build {build.id})"
            summary = restore_now(use, build.recipe_path, entry, new_build_id(use.engine))
        if summary is not None:
            said = f"{summary['message']} (same engine key as {leader_cell}: built once)"
        elif build.outcome != "built":
            said = f"not built: {leader_cell}, of the same engine key, ended {build.outcome}"
        else:
            said = "; ".join(use.warnings) or f"not built: {leader_cell}'s engine (the same key) was not stored"
        if on_follower is not None:
            on_follower(cell, summary, said)
    leader.followers.clear()
