"""A build's task cancelled while its end awaits the store's publish (its loop going away: `asyncio.run`'s end, a
server's exit) still ends the build: the upload is cut as any stop of the build cuts it, the store's record lands in
the evidence, the build's end is answered (`wait()`) and the listeners after the store's are told — then the
cancellation goes on (builds/supervisor/build_end.py `ended_work`). Before, the CancelledError left the build's end at
that await: `wait()` was never answered (a matrix waited for its cell forever), no later listener heard the build was
over, and the publish's thread wrote the store's record after the task had gone.

One real TensorRT-RTX build of the quickstart's `demo` in this process, its store's remote a loopback server
(test_remote_push_ctrl_c.py's `ReadsThePutSlowly`) that reads half the engine's PUT and then, from its own thread,
cancels the build's task at that await."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

from tests.builds.helpers import loaded
from tests.store.helpers import entries, local_entry_whole, with_store
from tests.store.test_remote_push_ctrl_c import ReadsThePutSlowly
from trtls.core.cancel import CancelToken

BOUND_S = 300  # a bound for something that must happen, not a speed


async def test_a_task_cancelled_while_its_end_awaits_the_publish_still_writes_and_answers_the_end(
    workspace: Path, tmp_path: Path
) -> None:
    from trtls.app.build import request_build
    from trtls.app.results import Started
    from trtls.builds.supervisor.supervisor import Supervisor
    from trtls.store import remote

    half_read = CancelToken()  # set by the server's thread once it has read half the engine's PUT
    server = ReadsThePutSlowly(half_read)
    remote.forget_remotes()
    try:
        store = tmp_path / "store"
        with_store(workspace, store, remote=server.url)
        warned: list[str] = []
        started = await request_build(Supervisor(), loaded(workspace), "demo", on_warning=warned.append)
        assert isinstance(started, Started), started
        build = started.build
        (task,) = [t for t in asyncio.all_tasks() if t.get_name() == f"trtls-build-{build.id}"]
        loop = asyncio.get_running_loop()
        assert build.end_stop is not None  # the store's cancel state, which cuts the upload (lookup.attach)
        cut = threading.Event()
        build.end_stop.on_request(lambda _: cut.set())

        def cancel_the_task(_: str) -> None:
            """The build's task cancelled at the end's await; the rest of the engine read only once the cancellation
            has stopped the upload (else the client could have its answer, and send the record, first)."""
            loop.call_soon_threadsafe(task.cancel)
            cut.wait(BOUND_S)

        half_read.on_request(cancel_the_task)  # on the server's thread, half the engine read
        told: list[object] = []
        build.listeners.append(lambda b, ev: told.append(ev) if ev is None else None)  # after the store's

        await asyncio.wait([task], timeout=BOUND_S)
        assert task.done() and task.cancelled(), "the build's task did not end cancelled"
        assert half_read.is_set and server.decided.wait(BOUND_S), "the engine's upload never began"
        assert told == [None], "the listeners after the store's never heard the build was over"
        done, _ = await asyncio.wait([asyncio.ensure_future(build.wait())], timeout=BOUND_S)
        assert done, "the build's end was never answered"
        summary = done.pop().result().record()
    finally:
        server.stop()
        remote.forget_remotes()

    # the build stands, and its evidence carries the store's record: the upload was cut by the cancellation
    assert summary["outcome"] == "built", summary
    said = (
        f"the engine was not sent to the remote store {server.url}: its upload was stopped (event_loop) and no record "
        "was sent; the engine is built and kept in the local store"
    )
    assert said in summary["store"]["warnings"] and warned == [said], (summary["store"], warned)
    written = json.loads((build.evidence_dir / "summary.json").read_text())
    assert written == json.loads(json.dumps(summary, default=str)), "the record answered is not the one written"
    # nothing half-written: no record was sent (the engine's blob may have gone whole into the loopback's buffers
    # first: harmless, named by its content), the local entry is whole, no temp left
    assert not [t for t in server.stored if "/ac/" in t], server.stored
    key, sha = str(summary["engineKey"]), str(summary["engineArtifact"]["sha256"])
    assert [e.name for e in entries(store)] == [key]
    local_entry_whole(store, key, sha)
    assert list((store / "tmp").iterdir()) == [], "a temp folder was left"
