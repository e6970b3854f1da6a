"""The constants of `trtls.events/1` that a worker needs, with no import beyond the standard library.

The build worker imports this, never `core.events`: pydantic and the event models cost the worker about
0.2–0.6 s of start-up before TensorRT is even imported, paid on every build (issue 14's fixed cost).
`core.events` (the validating side, in the supervisor) builds its types from these same names.
"""

from __future__ import annotations

import json
from typing import Any

from trtls.core.vocabulary import CANCEL_SOURCES  # stdlib only, as this module

PROTOCOL = "trtls.events/1"
PROTOCOL_VERSION = 1
# A worker started with this flag waits for START_LINE before it loads its builder (builds/worker/parked.py). The line
# is `core.events.StartControl` as its model writes it (tests/builds/test_worker_parked.py holds them equal): the CLI
# sends it before pydantic is imported, which would delay the very start it releases.
PARKED_FLAG = "--parked"
START_LINE = (json.dumps({"type": "start", "v": PROTOCOL_VERSION}, separators=(",", ":")) + "\n").encode()
__all__ = ["CANCEL_SOURCES", "PARKED_FLAG", "PROTOCOL", "PROTOCOL_VERSION", "START_LINE"]


def stable_json(obj: Any) -> str:
    """Canonical JSON (sorted keys, no spaces): the text that build-config and settings digests hash."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
