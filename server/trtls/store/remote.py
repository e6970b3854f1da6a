"""A remote engine store over plain HTTP (GET/PUT), the layout bazel-remote and ccache's HTTP backend use:
`<url>/ac/<key>` an entry's record, `<url>/cas/<sha256>` its engine bytes. (Being written: see the issue.)"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from trtls.store.entries import Entry, Store


def fetch_entry(store: Store, key: str) -> bool:
    """Bring `key` from the remote into the local store as a whole entry; False when the remote does not hold it
    (or cannot be reached: said in `store.notes`). Never raises."""
    return False


def push_entry(store: Store, entry: Entry) -> None:
    """Send a local entry to the remote (its engine first, then its record); a failure is a note. Never raises."""
    return None
