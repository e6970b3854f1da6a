"""A run's id — `<engine>-<YYYYmmdd-HHMMSS>-<6 hex>` — for a build, a reuse and a job sent ahead of the check: its
evidence folder's name under `.trtls/runs`, sortable by time. Standard library only."""

from __future__ import annotations

import secrets
import time


def new_run_id(engine: str) -> str:
    return f"{engine}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
