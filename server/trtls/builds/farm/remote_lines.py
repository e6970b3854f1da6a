"""The protocol lines a remote cell's transport writes into the supervisor's stream, and how it reads the node's.

A local build's every line comes from its worker; a remote cell's stream also carries lines the driver writes
itself — `queued`, `placed`, its logs, a cancel or timeout in the queue, the engine's `artifact` once it arrived —
and the transport peeks at the node's lines to hold or rewrite a few. `remote_process` (the relay) and
`engine_transfer` (the engine's way back) both write them, so they share these encoders.
"""

from __future__ import annotations

import json
import time
from typing import Any

from trtls.core.events import PROTOCOL_VERSION


def line(event_type: str, **fields: Any) -> bytes:
    """A new event of this transport's own, stamped now."""
    rec = {"v": PROTOCOL_VERSION, "type": event_type, "t_ns": time.monotonic_ns(), **fields}
    return (json.dumps(rec, default=str) + "\n").encode()


def encode(ev: dict[str, Any]) -> bytes:
    """A node's event (as parsed, possibly rewritten) back on the wire, its own stamp kept."""
    return (json.dumps(ev, default=str) + "\n").encode()


def peek(text: str) -> dict[str, Any]:
    """A node's line as an event, or {} when it is not a JSON object."""
    try:
        ev = json.loads(text)
        return ev if isinstance(ev, dict) else {}
    except (ValueError, RecursionError):  # nested deeper than the parser reads: not an event either
        return {}


def in_place(text: str, where: dict[str, Any]) -> bytes:
    """The node's `build_finished` (built) with a note: its worker wrote the engine at the output on this machine."""
    ev = peek(text)
    host = where.get("hostname", "this machine")
    note = f"engine written in place at the output by the worker on node {host} (this machine: no transfer)"
    return encode({**ev, "notes": list(ev.get("notes") or []) + [note]})
