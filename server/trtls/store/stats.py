"""The store's statistics (ccache -s): every hit and miss recorded in the store itself. (Being written.)"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trtls.store.entries import Entry, Store


def record_hit(store: Store, entry: Entry, engine: str, how: str) -> None:
    """A build served from the store: `how` is restored | kept | fast (the fast path, restored or kept). Never
    raises; a read-only store records nothing."""


def record_miss(store: Store, key: str, engine: str, reasons: list[str]) -> None:
    """A build that runs (the key was not in the store, or --rebuild): `reasons` as the evidence's rebuiltBecause.
    Never raises; a read-only store records nothing."""


def stats(store: Store) -> dict[str, Any]:
    return {}
