"""How one build uses the engine store (builds/avoidance/lookup.py decides; this is its state): the key, the store, the
key's lock it holds, what changed since the last build, and — for a matrix — the cells of the same key it serves.
Store types only (no builds import): the store layer."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from trtls.store.config import StoreConfig
from trtls.store.entries import Store
from trtls.store.key import EngineKey
from trtls.store.lock import KeyLock
from trtls.store.publishing import Staged

T = TypeVar("T")

NO_STORE = "--no-store"  # StoreUse.not_used of a build asked not to use the store (its job is still remembered)


@dataclass
class StoreUse:
    """How one build uses the store: its key, the store, the lock it holds, what changed since the last build."""

    engine: str
    state_dir: Path
    config: StoreConfig | None
    output: Path
    history: str  # the known-good history's name: the engine, or `engine.cell` for a matrix cell
    store: Store | None = None
    key: EngineKey | None = None
    not_used: str | None = None  # why this build does not use the store (evidence: store.used = false)
    last: dict[str, Any] | None = None  # the table's last successful build (known-good record)
    changes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    lock: KeyLock | None = None
    rebuild: bool = False
    reused_from: dict[str, Any] | None = None
    waited_for: str | None = None  # the lock holder (`pid build-id`) this build waited for, if it waited
    device: dict[str, Any] = field(default_factory=dict)  # the CUDA driver's device record the key used
    # the output's write root as judged when the recipe was loaded (the job's `write_root`): a restore stays in it
    write_root: Path | None = None
    job: dict[str, Any] | None = None  # the worker job the key was computed from (the fast path's memo keeps it)
    overridden: bool = False  # CLI overrides (a level, cold): not the table as written, so no fast-path memo
    # matrix cells of the same key as this one, in the same run (cell key, their use): restored from this cell's
    # entry when it has published (avoid_cells/attach_cells), never built a second time
    followers: list[tuple[str, StoreUse]] = field(default_factory=list)
    # why the store's entry of this key was not used: it was damaged and quarantined (here, or by another process
    # since the table's last build): TRT332 in the warnings, first in `rebuiltBecause`
    damaged: str | None = None
    pin: dict[str, Any] | None = None  # a rollback's pin this build serves (store.known_good.Pin)
    pin_damaged: str | None = None  # why the pin file there is not a pin: nothing is built over it (PinUnavailable)
    # the pin this build lifted (the recipe's key changed) or removed (--unpin): {"pin", "why"} in the evidence
    unpinned: dict[str, Any] | None = None
    # the built engine's copy into the store, started as the worker said it was written (`stage_engine`)
    staging: Future[Staged | None] | None = None

    def release(self) -> None:
        self.unstage()
        if self.lock is not None:
            self.lock.release()

    def stage_engine(self, engine: Path, sha: str | None) -> None:
        """Start copying the built `engine` into the store (`Store.stage`) on a thread of its own, while the build's
        end writes its evidence: the publish then finds its copy made (`take_staged`). Nothing when the store is not
        written or a copy is under way already."""
        store, key = self.store, self.key
        if store is None or key is None or store.mode != "read_write" or self.staging is not None:
            return
        staging: Future[Staged | None] = Future()

        def copy() -> None:
            try:
                staging.set_result(store.stage(key.hex, engine, sha))
            except BaseException as exc:  # a failure is publish's to meet again and say
                staging.set_exception(exc)

        self.staging = staging
        threading.Thread(target=copy, name="trtls-store-stage").start()

    def take_staged(self) -> Staged | None:
        """The copy `stage_engine` made (awaited), now the caller's to publish or unstage; None when none was made."""
        staging, self.staging = self.staging, None
        if staging is None:
            return None
        try:
            return staging.result()
        except Exception:
            return None

    def unstage(self) -> None:
        """A copy `stage_engine` made that no publish took: removed (its thread awaited)."""
        staged = self.take_staged()
        if staged is not None and self.store is not None:
            self.store.unstage(staged)

    async def looked_up(self, lookup: Callable[[], T]) -> T:
        """`lookup` (the store's `get`: a local miss may ask the remote store, which can take its timeouts) on a
        thread, off the event loop. A stop of the request meanwhile — the terminal's Ctrl-C, the editor's Stop: the
        awaiting task cancelled, its message the source — sets the store's cancel state (`Store.stop`), which cuts
        the remote request in flight at once, as its deadline would (store/remote_http.py `_Deadline`): the thread
        no longer reads an engine on for its whole bound after the person stopped the build (the command could not
        end until then, and an engine that came meanwhile was kept)."""
        import asyncio  # here: the fast path's restore reads this module and starts no loop

        from trtls.core.protocol import CANCEL_SOURCES

        try:
            return await asyncio.to_thread(lookup)
        except asyncio.CancelledError as exc:
            stop = self.store.stop if self.store is not None else None
            if stop is not None:
                said = exc.args[0] if exc.args else None
                stop.request(said if said in CANCEL_SOURCES else "event_loop")
            raise

    def record(self) -> dict[str, Any]:
        """The `store` object of the evidence."""
        return {
            "used": self.not_used is None,
            "why": self.not_used,
            "path": str(self.config.path) if self.config else None,
            "mode": self.config.mode if self.config else None,
            "source": self.config.source if self.config else None,
            "trust": self.config.trust if self.config else None,  # who may have written what served this engine
            "signingKey": str(self.store.signing_key_file) if self.store and self.store.signing_key_file else None,
            "warnings": self.all_warnings(),
            "key": self.key.hex if self.key else None,
            "waitedFor": self.waited_for,
            "replaced": self.store.replaced if self.store is not None else None,  # the entry a --rebuild replaced
            "pinned": self.pin,
            "unpinned": self.unpinned,
            # how the engine's upload to the remote store ended (store/upload_state.py), or why none was sent
            "upload": self.store.upload.now().record() if self.store is not None else None,
        }

    def all_warnings(self) -> list[str]:
        """This build's warnings, the key's notes and the store's own (a remote store's miss, a read-only store)."""
        notes = list(getattr(self.store, "notes", None) or []) if self.store is not None else []
        return [*self.warnings, *(self.key.notes if self.key else []), *(n for n in notes if n not in self.warnings)]

    def rebuilt_because(self) -> list[str]:
        """Why this build runs, for the evidence (`rebuiltBecause`)."""
        if self.rebuild:
            return ["--rebuild", *self.changes]
        if self.damaged is not None:
            return [f"the store's entry of this key was damaged ({self.damaged}): quarantined", *self.changes]
        if self.last is None:
            return ["first build of this engine table"]
        return self.changes or ["same key as the last build (not in the store)"]


@dataclass
class CellsLookup:
    """A matrix's lookup: the cells still to build (each one's store use, holding its key's lock, by cell key), the
    cells the store served (the planned cell and its reuse's summary) and what the store warned about."""

    left: list[Any]
    uses: dict[str, StoreUse] = field(default_factory=dict)
    reused: list[tuple[Any, dict[str, Any]]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # cells whose key an earlier cell of this run builds (the planned cell, that cell's key): not in `left`; each
    # is restored from that cell's entry when it has published (attach_cells)
    same_key: list[tuple[Any, str]] = field(default_factory=list)

    def release(self) -> None:
        """Drop every key lock still held: the matrix did not start (refused, invalid) or a cell never ran."""
        release_uses(self.uses)


def release_uses(uses: dict[str, StoreUse]) -> None:
    for use in uses.values():
        use.release()
    uses.clear()
