"""A run's id — `<engine>-<YYYYmmdd-HHMMSS>-<6 hex>` — for a build, a reuse and a job sent ahead of the check: its
evidence folder's name under `.trtls/runs`, sortable by time. Standard library only."""

from __future__ import annotations

import re
import secrets
import time

_NOT_IN_A_NAME = re.compile(r"[^A-Za-z0-9_.-]")
MAX_PREFIX = 96  # an engine's name at most (TRT108): the id stays a folder name any filesystem takes


def new_run_id(engine: str) -> str:
    """An engine's, a route's or a model file's name leads the id: a recipe's names are already plain (TRT108), a
    file's stem is not — a reference model named with an escape sequence made a run folder whose name held it raw,
    one of 245 characters a folder no filesystem takes (`File name too long`). Anything else is written `_`."""
    prefix = _NOT_IN_A_NAME.sub("_", engine)[:MAX_PREFIX]
    return f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
