"""The record of the report files trtls wrote (`-o`, a run's report page): the one proof that an existing file at a
report's path is trtls's own, so it may be replaced.

A file's format proves nothing: plain text is plain text, a JSON object is any JSON object, so "replace only a file of
its own format" let `trtls check -o LICENSE`, `-o requirements.txt`, `trtls schema -o package.json` and `trtls report
-o index.html` replace a person's files. Each report trtls writes is now recorded here — its real path, device,
inode, size, mtime and sha256 — in the per-user cache folder (`reports.json`, under a lock: concurrent commands each
keep their entry), and an existing file is replaced only when it is empty or is the very file recorded (same inode,
size and mtime, and the same bytes: a report a person edited since is theirs now). A record that cannot be read or
written costs a refusal next time, never a replaced file.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any

from trtls.core.paths import real, user_cache_dir
from trtls.fs.folder import ensure_folder
from trtls.fs.kinds import Kind
from trtls.fs.lock import held_lock
from trtls.fs.read import open_regular, parse_json, read_bytes
from trtls.fs.write import atomic_write_bytes, atomic_write_text

LEDGER_NAME = "reports.json"
LEDGER_FORMAT = "trtls.reports/1"
MAX_ENTRIES = 4096  # the oldest go first: a report not replaced for that long is refused, never lost
MAX_LEDGER_BYTES = 8 << 20
MAX_REPORT_BYTES = 256 << 20  # a report larger than this is never proved (its bytes are not hashed again)


def ledger_path() -> Path:
    return user_cache_dir() / LEDGER_NAME


def _entries() -> dict[str, Any]:
    try:
        data = parse_json(read_bytes(ledger_path(), limit=MAX_LEDGER_BYTES, follow=False))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict) or data.get("format") != LEDGER_FORMAT or not isinstance(data.get("files"), dict):
        return {}
    return data["files"]


def _identity(st: os.stat_result) -> list[int]:
    return [st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns]


def wrote(path: str | os.PathLike[str]) -> bool:
    """Whether the regular file at `path` is a report trtls wrote and no one changed since."""
    entry = _entries().get(str(real(path)))
    if not isinstance(entry, dict):
        return False
    try:
        with open_regular(path, limit=MAX_REPORT_BYTES, follow=False) as fh:
            st = os.fstat(fh.fileno())
            if _identity(st) != entry.get("stat"):
                return False
            digest = hashlib.sha256()
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
    except OSError:
        return False
    return digest.hexdigest() == entry.get("sha256")


def record(path: str | os.PathLike[str], data: bytes) -> None:
    """Remember the report just written at `path` (its bytes `data`). An account with no cache folder to make it in
    (HOME unset or not a folder) or a disk that refuses: nothing recorded, so that file is refused next time."""
    target = real(path)
    try:
        folder = user_cache_dir()
        # made only under a folder that exists (`~/.cache`, or `$XDG_CACHE_HOME`'s own folder), never a tree of them
        within = next((f for f in (folder, folder.parent, folder.parent.parent) if f.is_dir()), None)
        if within is None:
            return
        st = os.stat(target, follow_symlinks=False)
        if not stat.S_ISREG(st.st_mode):
            return
        ensure_folder(folder, within=within)
        with held_lock(folder / f"{LEDGER_NAME}.lock", kind=Kind.cache, within=folder):
            files = {k: v for k, v in _entries().items() if k != str(target)}
            files[str(target)] = {"stat": _identity(st), "sha256": hashlib.sha256(data).hexdigest()}
            kept = dict(list(files.items())[-MAX_ENTRIES:])
            text = json.dumps({"format": LEDGER_FORMAT, "files": kept}, indent=0)
            atomic_write_text(folder / LEDGER_NAME, text, kind=Kind.cache, within=folder)
    except (OSError, RuntimeError):  # RuntimeError: no home folder to put the cache in
        return


def write_report(path: str | os.PathLike[str], data: bytes | str, *, within: str | os.PathLike[str]) -> None:
    """A report file (`-o`, a run's report page): written atomically; an existing file is replaced only when it is
    empty or is a report trtls wrote and no one changed since (the record above), never because its format matches
    (`-o LICENSE`, `-o package.json`). The written file is recorded there."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    atomic_write_bytes(
        path,
        payload,
        kind=Kind.report,
        within=within,
        may_replace=lambda head: not head.strip() or wrote(path),
    )
    record(path, payload)
