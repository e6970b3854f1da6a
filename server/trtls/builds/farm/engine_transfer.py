"""The engine's way back from a node: fetched in chunks, written atomically at the requested output, sha256-checked.

Without a shared output folder a remote cell's engine is on the node. Once the node's worker says `build_finished`
(built), the driver streams the engine from the node's actor into `<output>.trtls-tmp-<build id>` (the one atomic
writer: O_EXCL | O_NOFOLLOW in the real folder, fsync, rename), checks its sha256 against the worker's, and only then
passes on the `artifact` (now naming the local path) and `build_finished` lines. A mismatch or a broken stream fails
the build with TRT233; an output that cannot be written here (a symlink, a folder swapped out of the write root, a
full or read-only disk) with TRT412 — and a previous engine at the output is never touched. Kept apart from the relay
(`remote_process`) because it is the one place a remote build writes a file on the driver.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from pathlib import Path
from typing import Any

from trtls import fs
from trtls.builds.artifacts import engine_temp_path
from trtls.builds.farm.remote_lines import encode, line
from trtls.fs import Kind


async def bring_engine(
    actor: Any, job: dict[str, Any], where: dict[str, Any], finished: dict[str, Any], held: list[bytes]
) -> list[bytes]:
    """Fetch the node's engine, write it atomically at the requested output, check its sha256 end to end: the
    `artifact` and `build_finished` lines to pass on (or a TRT233 log and a failed `build_finished`)."""
    node_art = json.loads(held[0]) if held else {}
    output = Path(job["output"])
    tmp = engine_temp_path(output, job["build_id"])
    root = job["write_root"]  # judged when the recipe was loaded: the write must stay in it
    digest = hashlib.sha256()
    size = 0
    stage = "write"  # an error while the output is written is this machine's (TRT412); while fetching, the node's
    try:
        fs.ensure_folder(output.parent, within=root)
        # the one atomic writer: temp O_EXCL | O_NOFOLLOW in the real folder, which must still be in write_root
        with fs.atomic_writer(output, kind=Kind.engine_output, within=root, temp_name=tmp.name) as fh:
            stage = "fetch"
            async for chunk_ref in actor.engine_chunks.remote(node_art.get("path", "")):
                chunk = await chunk_ref
                digest.update(chunk)
                size += len(chunk)
                stage = "write"
                fh.write(chunk)
                stage = "fetch"
            expected = finished.get("engine_sha256")
            if digest.hexdigest() != expected:
                raise ValueError(f"sha256 {digest.hexdigest()[:12]} of the received engine ≠ {str(expected)[:12]}")
            stage = "write"  # the fsync and the rename over the output
    except BaseException as exc:
        if isinstance(exc, asyncio.CancelledError):
            raise
        err = (
            f"TRT412 the engine from node {where.get('hostname')} cannot be written at {output}: {exc}"
            if stage == "write"
            else f"TRT233 the engine did not arrive intact from node {where.get('hostname')}: {exc}"
        )
        finished = {**finished, "outcome": "failed", "error": err, "engine_sha256": None, "engine_bytes": None}
        return [line("log", severity="ERROR", msg=err), encode(finished)]
    art = {k: v for k, v in node_art.items() if k not in ("v", "type", "t_ns")}
    art.update(path=str(output), size=size, sha256=digest.hexdigest(), node_path=node_art.get("path"))
    notes = list(finished.get("notes") or []) + [
        f"engine sent back from node {where.get('hostname')} ({where.get('node_id', '')[:12]}): "
        f"{size} bytes, sha256 {digest.hexdigest()[:12]} checked end to end"
    ]
    return [line("artifact", **art), encode({**finished, "notes": notes})]
