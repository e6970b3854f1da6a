"""A store entry's record (`entries/<key>/entry.json`) and the entry as the store hands it out: shared by the store's
reading side (entries.py), its publishing side (publishing.py) and the remote store (remote.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENTRY_FORMAT = "trtls.store-entry/1"
RECORD_LIMIT = 16 * 1024 * 1024  # an entry.json: the key's parts and the build record (a few KiB in practice)


@dataclass(frozen=True)
class Entry:
    key: str
    folder: Path
    record: dict[str, Any]

    @property
    def engine(self) -> Path:
        return self.folder / "engine"

    @property
    def sha256(self) -> str:
        return str(self.record["engine"]["sha256"])

    @property
    def size(self) -> int:
        return int(self.record["engine"]["size"])

    @property
    def build(self) -> dict[str, Any]:
        return self.record.get("build") or {}


def engine_fields(record: dict[str, Any]) -> bool:
    engine = record.get("engine")
    if not isinstance(engine, dict):
        return False
    size = engine.get("size")
    return isinstance(engine.get("sha256"), str) and type(size) is int and size >= 0
