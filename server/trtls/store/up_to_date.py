"""Is the engine at an output already the one a store entry holds? Asked before a restore, so that an unchanged build
copies nothing (`make` leaves an up-to-date target alone): a 512 MiB engine is read at most once — its sha256 then
kept in the recipe's stat-keyed digest cache (trtls.checkpoint.hashing) — and never copied and fsynced again."""

from __future__ import annotations

import os
import stat as stat_mod
from pathlib import Path
from typing import TYPE_CHECKING

from trtls.checkpoint.hashing import DigestCache, sha256_file

if TYPE_CHECKING:
    from trtls.store.entries import Entry  # a restore asks this module too: no import cycle at run time


def output_holds(output: Path, entry: Entry, state: Path | None) -> bool:
    """Whether `output` is a regular file (not a symlink) that already holds the entry's bytes — its sha256 from the
    stat-keyed digest cache, or read once and cached: an unchanged build then copies nothing (as `make` leaves an
    up-to-date target alone; a 512 MiB engine is read at most once, never copied and fsynced again). Without
    `state` (the recipe's `.trtls`) the output is hashed without the cache: still cheaper than a copy and fsync."""
    try:
        st = os.lstat(output)
    except OSError:
        return False
    if not stat_mod.S_ISREG(st.st_mode) or st.st_size != entry.size:
        return False
    cache = DigestCache(state / "digests.json" if state is not None else None)
    sha = cache.get(output.absolute(), st)
    if sha is None:
        try:
            sha, st_read = sha256_file(output)
        except OSError:
            return False
        if DigestCache.stat_key(st_read) != DigestCache.stat_key(st):
            return False  # changed while it was read
        cache.put(output.absolute(), st, sha)
        try:
            cache.save()
        except OSError:
            pass  # only a cache: the answer stands
    return sha == entry.sha256
