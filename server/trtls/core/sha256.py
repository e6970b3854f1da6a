"""The sha256 of a file or of bytes, as hex: the one implementation every layer uses (engines, bundles, converted
models, golden outputs). Read in 1 MiB blocks so a large engine or model is never held in memory whole."""

from __future__ import annotations

import hashlib
import os

BLOCK = 1 << 20


def sha256_bytes(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(
    path: str | os.PathLike[str],
    block: int = BLOCK,
    *,
    follow: bool = True,
    expected: int | None = None,
    within: str | os.PathLike[str] | None = None,
) -> str:
    """Streamed through the door (`fs.open_regular`): a FIFO or a device is refused before a byte is read (a FIFO
    would hang the hash, `/dev/zero` never ends). `follow=False` for records and store entries (a final symlink is
    refused); `expected`: the size a record promised, checked before hashing; `within`: the real path must stay inside
    it (a file a record names)."""
    from trtls.fs import open_regular

    h = hashlib.sha256()
    with open_regular(path, limit=None, follow=follow, expected=expected, within=within) as fh:
        while chunk := fh.read(block):
            h.update(chunk)
    return h.hexdigest()
