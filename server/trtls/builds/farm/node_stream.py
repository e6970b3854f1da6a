"""A node's stream of a cell's lines, as the driver reads it (`remote_process`): each item is a Ray object of a batch of
the worker's lines; they are read on a thread of the stream's own and handed to the driver's event loop.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

_END = object()


async def read_on_thread(gen: Any, get: Callable[[Any], Any]) -> AsyncIterator[dict[str, Any]]:
    """The items of a node's stream (an ObjectRefGenerator), read on a thread of their own and handed to this loop.
    Why: each item is a Ray object, and `async for` over the generator (`await ref` per item) cost the driver
    0.76-0.82 ms of CPU per item, a blocking read on a thread 0.41-0.46 ms (measured on this 2-core host, 2,000
    items; docs/farm.md "The driver's CPU per event") — a 16-cell run reads ~10,000. An error (the actor or its node
    died) is raised here, as awaiting the item raised it before. `get`: an object's value (`ray.get`, blocking)."""
    loop = asyncio.get_running_loop()
    items: asyncio.Queue[tuple[Any, BaseException | None]] = asyncio.Queue()

    def hand(item: Any, exc: BaseException | None = None) -> bool:
        try:
            loop.call_soon_threadsafe(items.put_nowait, (item, exc))
            return True
        except RuntimeError:  # the loop is closed: nobody reads this stream any more
            return False

    def pump() -> None:
        try:
            for ref in gen:
                if not hand(get(ref)):
                    return
        except BaseException as exc:  # handed to the reader, which raises it where it awaited the item
            hand(None, exc)
            return
        hand(_END)

    threading.Thread(target=pump, name="trtls-cell-stream", daemon=True).start()
    while True:
        item, exc = await items.get()
        if exc is not None:
            raise exc
        if item is _END:
            return
        yield item
