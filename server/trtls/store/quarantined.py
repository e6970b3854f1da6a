"""Was a key's entry quarantined since a table last used it? A build that misses a key its table built before reads
the newest `<store>/quarantine/<key>-*/WHY`: whichever process quarantined the entry (the fast path of this build,
another checkout, the editor), the build that rebuilds it says why (TRT332, `rebuiltBecause`) instead of "not in the
store". Read-only: a folder listing and one bounded read of a regular file, never through a link."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from trtls.core.terminal_text import terminal_safe
from trtls.fs import read_text
from trtls.store.key import is_key

WHY_LIMIT = 4096  # a WHY: one line


def quarantined_since(store_root: Path, key: str, since: float | None) -> tuple[float, str] | None:
    """(when, why) of the newest quarantine of `key` made after `since` (a time; None: any), or None."""
    if not is_key(key):
        return None
    folder = Path(store_root) / "quarantine"
    try:
        names = os.listdir(folder)
    except OSError:
        return None
    newest: tuple[float, Path] | None = None
    for name in names:
        if not name.startswith(f"{key}-"):
            continue
        try:
            if not stat.S_ISDIR(os.lstat(folder / name).st_mode):
                continue
            st = os.lstat(folder / name / "WHY")
        except OSError:
            continue
        if not stat.S_ISREG(st.st_mode) or (since is not None and st.st_mtime <= since):
            continue
        if newest is None or st.st_mtime > newest[0]:
            newest = (st.st_mtime, folder / name / "WHY")
    if newest is None:
        return None
    try:
        text = read_text(newest[1], limit=WHY_LIMIT, follow=False, within=store_root, errors="replace")
    except OSError:
        return None
    why = (text.strip().splitlines() or ["no reason recorded"])[0][:300]
    return newest[0], terminal_safe(why)
