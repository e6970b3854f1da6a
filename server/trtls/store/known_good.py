"""Every successful build of an engine table, newest last (`<recipe>/.trtls/engines/<name>.json`): build id, date,
key, size, sha256 and what differed from the build before. The engines themselves are store entries; this file is
the table's own memory of which ones it built, for `trtls engines`, `trtls rollback` and "why rebuilt"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from trtls.core.atomic import atomic_write_text

FORMAT = "trtls.known-good/1"
MAX_RECORDS = 200


class KnownGood:
    def __init__(self, state_dir: Path, engine: str):
        self.path = Path(state_dir) / "engines" / f"{engine}.json"

    def records(self) -> list[dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return []
        if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("builds"), list):
            return []
        return [r for r in data["builds"] if isinstance(r, dict) and isinstance(r.get("key"), str)]

    def last(self) -> dict[str, Any] | None:
        recs = self.records()
        return recs[-1] if recs else None

    def find(self, build_id: str) -> dict[str, Any] | None:
        return next((r for r in reversed(self.records()) if r.get("buildId") == build_id), None)

    def append(self, record: dict[str, Any]) -> None:
        recs = [*self.records(), record][-MAX_RECORDS:]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.path, json.dumps({"format": FORMAT, "builds": recs}, indent=1) + "\n")
