"""A farm cell its node served from the remote engine store, kept on this machine exactly as a local reuse is (the
store's end of the cell, `lookup.after_build`): the engine the driver brought back (builds/farm/node_reuse.py) goes
into this machine's store, the table's known-good record and the store's statistics. Store glue, so it lives with the
lookup, not with the farm that only transports the engine."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trtls.store.use import StoreUse


def keep_node_served(use: StoreUse, build: Any) -> None:
    """A cell its node served from the remote store, kept on this machine exactly as a local reuse is: the engine at
    the output (its sha256 checked against the entry's record when it arrived, engine_transfer.py) published into
    this machine's store under the cell's key with the producing build's record, hashed again as it is copied in
    (`Store.publish`; not sent back to the remote, it came from there); the table's known-good record
    (`remember_reused`, as builds/avoidance/restore.py records a local hit); and one hit in the store's statistics
    (`record_hit`, `how` = node), never a miss. An engine this store could not keep (a full disk, another
    account's folder) is TRT333 in the cell's store warnings and a known-good record with `stored: false`; the
    cell stays `reused`. Never raises for the store's own failures."""
    from pathlib import Path

    from trtls.builds.avoidance.restore import remember
    from trtls.builds.avoidance.reuse import remember_reused
    from trtls.store.entry_record import Entry
    from trtls.store.stats import record_hit

    hit = getattr(build.worker, "reused", None)
    if use.store is None or use.key is None or not isinstance(hit, dict):
        return
    key, sha, size = use.key.hex, hit.get("sha256"), hit.get("size")
    if hit.get("key") != key or not isinstance(sha, str) or type(size) is not int:  # not this cell's entry
        use.warnings.append(f"TRT333 the engine at {build.output} was served by a node for another key: not stored")
        return
    src = hit.get("build")
    producer: dict[str, Any] = dict(src) if isinstance(src, dict) else {}
    try:
        entry = use.store.publish(key, use.key.parts, Path(build.output), producer, sha, push=False)
        stored = True
    except OSError as exc:
        use.warnings.append(f"TRT333 the engine is at {build.output} but was not stored: {exc.strerror or exc}")
        record = {"engine": {"sha256": sha, "size": size}, "build": producer, "parts": use.key.parts}
        entry, stored = Entry(key, Path(build.output).parent, record), False
    remember_reused(use.state_dir, use.history, entry, build.id, use.changes, use.warnings, stored=stored)
    if stored:
        remember(use, build.recipe_path)
    record_hit(use.store, entry, use.engine, "node")
