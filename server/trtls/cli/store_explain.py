"""`trtls store stats` (hits, misses by reason, time saved) and `trtls store why A B` (what differs between two
builds' or keys' engine keys). (Being written.)"""

from __future__ import annotations

from typing import Any


def register_actions(actions: Any) -> None:
    """Add `stats` and `why` to `trtls store`'s actions."""
