"""Restoring a hit from the engine store: the output's one-writer lock around the restore, the restore itself into
the write root the output had when the recipe was loaded (never recomputed here: an output folder swapped for a
symlink while this build waited for another process's build of its key is refused at the write, TRT118), and the
reuse's evidence and fast-path memo.

An output that already holds the entry's bytes is not rewritten (the store compares its digest first). One that
cannot be written (an immutable file or folder, a read-only mount, a full disk: TRT412/TRT405) restores nothing:
the caller builds instead, and the build's own probe ends it located, with its evidence (`.trtls/runs/<id>`)."""

from __future__ import annotations

import asyncio
import errno
import time
from pathlib import Path
from typing import Any

from trtls.builds.avoidance.memo import write_memo
from trtls.builds.avoidance.reuse import OutputHeld, remember_reused, reuse_evidence
from trtls.builds.roots import loaded_write_root
from trtls.core.paths import UnsafeWrite
from trtls.store.entries import Entry, NotTrusted, Refused, RestoreFailed
from trtls.store.stats import record_hit
from trtls.store.use import NO_STORE, StoreUse

WAIT_POLL_S = 0.1  # a waiter retries the key's lock this often (flock has no asyncio-friendly blocking form)
FOLLOW_HELD_S = 30.0  # how long a following matrix cell waits for another build to release its output


async def restore_hit(
    use: StoreUse, recipe: Path, entry: Entry, build_id: str, waited: bool, pinned: dict[str, Any] | None = None
) -> dict[str, Any] | None:
    """Restore a hit once the output is free (another build writing it, or ending: after it, never during); the
    reuse's summary, or None (a warning in `use.warnings` says why): the caller builds instead. `pinned`: the
    rollback's pin this restore serves (not the recipe's engine: no known-good record is added)."""
    t0 = time.time()
    held = OutputHeld(use.state_dir, use.output, build_id, use.engine, within=output_root(use, recipe))
    try:
        while not held.take():
            await asyncio.sleep(WAIT_POLL_S)
    except OSError as exc:  # the output's lock cannot be opened (a symlinked .trtls): the build says it, located
        use.warnings.append(f"TRT411 {exc.strerror or exc}; nothing was restored")
        return None
    return _restore_held(use, recipe, entry, build_id, waited, held, t0, pinned)


def output_root(use: StoreUse, recipe: Path) -> Path | None:
    """The output's write root as the recipe was loaded with it (stale temps beside the output are removed in it)."""
    try:
        return Path(loaded_write_root(recipe.parent, use.write_root))
    except (OSError, ValueError):
        return None


def restore_now(use: StoreUse, recipe: Path, entry: Entry, build_id: str) -> dict[str, Any] | None:
    """`restore_hit` from a synchronous listener (a matrix cell that follows another cell of its key)."""
    t0 = time.time()
    held = OutputHeld(use.state_dir, use.output, build_id, use.engine, within=output_root(use, recipe))
    deadline = time.monotonic() + FOLLOW_HELD_S
    try:
        while not held.take():
            if time.monotonic() > deadline:
                use.warnings.append(f"{use.output} is being written by another build: nothing was restored")
                return None
            time.sleep(WAIT_POLL_S)
    except OSError as exc:
        use.warnings.append(f"TRT411 {exc.strerror or exc}; nothing was restored")
        return None
    return _restore_held(use, recipe, entry, build_id, True, held, t0)


def _restore_held(
    use: StoreUse,
    recipe: Path,
    entry: Entry,
    build_id: str,
    waited: bool,
    held: OutputHeld,
    t0: float,
    pinned: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    assert use.store is not None and use.key is not None
    output = use.output  # placed when the recipe was loaded: its write root is that one, never recomputed here
    try:
        root = loaded_write_root(recipe.parent, use.write_root)
        restored = use.store.restore(entry, output, build_id, root, use.state_dir)
    except NotTrusted as exc:
        use.warnings.append(f"TRT340 {exc}")
        return None
    except Refused as exc:
        use.damaged = str(exc)
        use.warnings.append(f"TRT332 {exc}; the engine is rebuilt")
        return None
    except UnsafeWrite as exc:  # the output's folder became a symlink leading out, or a file of the user's is there
        code = "TRT123" if exc.errno == errno.EEXIST else "TRT118"
        use.warnings.append(f"{code} {exc.filename}: {exc.strerror}; nothing was restored")
        return None
    except RestoreFailed as exc:  # immutable, read-only, full: the build's own probe says it, with its evidence
        use.warnings.append(f"{exc.code} {exc.filename}: {exc.strerror}; nothing was restored, the output is as it was")
        return None
    except OSError as exc:  # the store's engine could not be read: the build goes on without it
        use.warnings.append(f"TRT405 {exc.filename or output}: {exc.strerror or exc}; nothing was restored")
        return None
    finally:
        held.release()
    use.reused_from = entry.build
    if pinned is None:  # a pin serves a rollback's engine: the table's known-good history is the recipe's own
        remember_reused(use.state_dir, use.history, entry, build_id, use.changes, use.warnings)
    remember(use, recipe)
    record_hit(use.store, entry, use.engine, "restored" if restored else "kept")
    record = {**use.record(), "outputAlreadyCurrent": not restored}
    return reuse_evidence(build_id, use.engine, recipe, entry, output, t0, record, waited, pinned=pinned)


def remember(use: StoreUse, recipe: Path) -> None:
    """The fast path's memo for the next unchanged run (builds/avoidance/reuse.py); only for a table's own build. A
    --no-store build's memo keeps its job only (`<engine>.job.json`): its next unchanged run sends it ahead."""
    if use.key is None or use.history != use.engine or use.overridden:
        return
    if use.store is not None or use.not_used == NO_STORE:
        write_memo(recipe, use.history, use.key.hex, use.key.parts, use.output, use.store, use.device, use.job)
