"""A worker started `--parked`: it waits for its start line before it loads anything heavy.

`trtls build --engine NAME` of a recipe the store may still serve starts its worker first of all, before the fast path
has read the memo and the store (builds/supervisor/worker_launch.py `start_ahead(parked=True)`), and the fast path
either tells it to start (a known miss, an engine whose recipe changed: `core.events.StartControl`, the first stdin
line) or ends it (a hit, a decline). Until then it has run only its interpreter and its lightest modules — no
builder's libraries, no CUDA driver — so a hit wastes next to nothing, and a miss finds the start of its worker
already behind it (issue 31: the spawn waited for the memo's and the store's checks, ~18 ms of a `demo` build here).
"""

from __future__ import annotations

import sys

from trtls.core.protocol import PARKED_FLAG


def wait_for_start(argv: list[str]) -> None:
    """Return once the start line is read, at once when `argv` does not say `--parked`. Its input closing (the fast
    path dropped it, or its parent is gone) ends the process here with 0, having done nothing; a line that is not the
    start line ends it with 2 (the protocol was broken: nothing is guessed)."""
    if PARKED_FLAG not in argv:
        return
    line = sys.stdin.readline()
    if not line:
        sys.exit(0)
    import json

    try:
        said = json.loads(line)
    except ValueError:
        said = None
    if isinstance(said, dict) and said.get("type") == "start":
        return
    print(f"trtls worker: started parked, its first line is not a start line: {line[:80]!r}", file=sys.stderr)
    sys.exit(2)
