"""The engine's way back from a node: fetched in chunks, written atomically at the requested output, sha256-checked.

Without a shared output folder a remote cell's engine is on the node. Once the node's worker says `build_finished`
(built), the driver streams the engine from the node's actor into `<output>.trtls-tmp-<build id>` (the one atomic
writer: O_EXCL | O_NOFOLLOW in the real folder, fsync, rename), checks its sha256 against the worker's, and only then
passes on the `artifact` (now naming the local path) and `build_finished` lines. A mismatch or a broken stream fails
the build with TRT233; an output that cannot be written here (a symlink, a folder swapped out of the write root, a
full or read-only disk) with TRT412 — and a previous engine at the output is never touched. Kept apart from the relay
(`remote_process`) because it is the one place a remote build writes a file on the driver. A local farm's node is
this machine: its worker writes the output in place and nothing comes this way (`RemoteSpec.same_machine`).
"""

from __future__ import annotations

import asyncio
import hashlib
import queue
import threading
from pathlib import Path
from typing import Any

from trtls import fs
from trtls.builds.artifacts import engine_temp_path
from trtls.builds.farm.remote_lines import encode, line
from trtls.fs import Kind, parse_json


class _Damaged(ValueError):
    """The received engine's sha256 is not the worker's."""


class _Aborted(Exception):
    """The transfer was stopped: the writer removes its temp file."""


async def bring_engine(
    actor: Any, job: dict[str, Any], where: dict[str, Any], finished: dict[str, Any], held: list[bytes]
) -> list[bytes]:
    """Fetch the node's engine, write it atomically at the requested output, check its sha256 end to end: the
    `artifact` and `build_finished` lines to pass on (or a TRT233 log and a failed `build_finished`).

    The chunks are fetched on the event loop; hashing, writing, the fsync and the rename run on a thread of this
    transfer's own. Why: 16 cells of 138 MB engines ending together held the loop for each cell's hash, write and
    fsync in turn (every other cell's events waited behind them)."""
    node_art = parse_json(held[0]) if held else {}
    output = Path(job["output"])
    tmp = engine_temp_path(output, job["build_id"])
    root = job["write_root"]  # judged when the recipe was loaded: the write must stay in it
    expected = finished.get("engine_sha256")
    digest = hashlib.sha256()
    received = [0]  # bytes, counted by the writer
    # unbounded: a chunk is already in this process's memory when it is queued, and a local write outruns a fetch
    chunks: queue.SimpleQueue[bytes | BaseException | None] = queue.SimpleQueue()
    loop = asyncio.get_running_loop()
    written: asyncio.Future[None] = loop.create_future()

    def settle(exc: BaseException | None) -> None:
        if not written.done():
            written.set_result(None) if exc is None else written.set_exception(exc)

    def write() -> None:
        error: BaseException | None = None
        try:
            fs.ensure_folder(output.parent, within=root)
            # the one atomic writer: temp O_EXCL | O_NOFOLLOW in the real folder, which must still be in write_root
            with fs.atomic_writer(output, kind=Kind.engine_output, within=root, temp_name=tmp.name) as fh:
                while (chunk := chunks.get()) is not None:
                    if isinstance(chunk, BaseException):
                        raise chunk  # the fetch failed: the temp file goes, the output is untouched
                    digest.update(chunk)
                    received[0] += len(chunk)
                    fh.write(chunk)
                if digest.hexdigest() != expected:
                    raise _Damaged(f"sha256 {digest.hexdigest()[:12]} of the received engine ≠ {str(expected)[:12]}")
        except BaseException as exc:  # the fsync and the rename over the output included
            error = exc
        try:
            loop.call_soon_threadsafe(settle, error)
        except RuntimeError:  # the loop is gone (the driver is exiting): nobody waits for this engine
            pass

    threading.Thread(target=write, name="trtls-engine-transfer", daemon=True).start()
    fetch_error: BaseException | None = None
    try:
        async for chunk_ref in actor.engine_chunks.remote(node_art.get("path", "")):
            if written.done():  # the writer failed already (the output cannot be written here): stop fetching
                break
            chunks.put(await chunk_ref)
    except asyncio.CancelledError:
        written.cancel()  # nobody waits for it any more
        chunks.put(_Aborted("the cell was stopped while its engine was on its way"))  # the temp goes, output kept
        raise
    except Exception as exc:
        fetch_error = exc
        chunks.put(exc)
    chunks.put(None)
    try:
        await written
        err = None
    except asyncio.CancelledError:
        raise
    except BaseException as exc:
        if fetch_error is not None or isinstance(exc, _Damaged):
            err = f"TRT233 the engine did not arrive intact from node {where.get('hostname')}: {exc}"
        else:
            err = f"TRT412 the engine from node {where.get('hostname')} cannot be written at {output}: {exc}"
    if err is not None:
        finished = {**finished, "outcome": "failed", "error": err, "engine_sha256": None, "engine_bytes": None}
        return [line("log", severity="ERROR", msg=err), encode(finished)]
    size = received[0]
    art = {k: v for k, v in node_art.items() if k not in ("v", "type", "t_ns")}
    art.update(path=str(output), size=size, sha256=digest.hexdigest(), node_path=node_art.get("path"))
    notes = list(finished.get("notes") or []) + [
        f"engine sent back from node {where.get('hostname')} ({where.get('node_id', '')[:12]}): "
        f"{size} bytes, sha256 {digest.hexdigest()[:12]} checked end to end"
    ]
    return [line("artifact", **art), encode({**finished, "notes": notes})]
