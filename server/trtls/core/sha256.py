"""The sha256 of a file or of bytes, as hex: the one implementation every layer uses (engines, bundles, converted
models, golden outputs). Read in 1 MiB blocks so a large engine or model is never held in memory whole."""

from __future__ import annotations

import hashlib
import os

BLOCK = 1 << 20


def sha256_bytes(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | os.PathLike[str], block: int = BLOCK) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(block):
            h.update(chunk)
    return h.hexdigest()
