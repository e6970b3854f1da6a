"""Where a store's upload of a build's engine to the remote store stands (store/upload_state.py: `Store.upload`), and
what a stop of a build that has ended still cuts there (`Store.upload_a_stop_cuts`).

A stop's line after the build ended (cli/store_lookup.stop_words) said `stopping the upload of its engine to the remote
store <url>` from the build's record alone — also when the store skipped the upload: the key did not match what was
built, the local publish failed, the remote could not be reached a moment ago. Now the store says where its upload
stands: not started, sending, done (how) or skipped (why), thread-safe, read while the publish runs on its own thread.

Real publishes into a real store folder, against loopback remotes (tests/store/scripted_remote.py): one that holds
the engine's PUT while the test reads the state from the thread that holds it; one that refuses connections (the
first publish finds it unreachable, the next one skips it)."""

from __future__ import annotations

import hashlib
import json
import socket
import threading
import time
from pathlib import Path

from tests.store.scripted_remote import Listener, Request, content_length
from trtls.store import remote
from trtls.store.entries import Store
from trtls.store.key import EngineKey, key_of_parts
from trtls.store.upload_state import UploadNow

PARTS = {"format": "forged", "forged": "upload state"}
ENGINE = b"E" * 65536


class HoldsTheEnginePut(Listener):
    """A remote that stores what is PUT (201; a HEAD is a 404): while the engine's PUT is held, before its body is
    read, it reads what `store` says of its upload (`seen`)."""

    def __init__(self, store: list[Store]) -> None:
        self.store = store
        self.seen: list[tuple[UploadNow, str | None]] = []
        super().__init__()

    def answer(self, conn: socket.socket, request: Request) -> None:
        if request.line.startswith("HEAD "):
            conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
            return
        if " /cache/cas/" in request.line:  # the engine's PUT, held here: the store is sending it
            (store,) = self.store
            self.seen.append((store.upload.now(), store.upload_a_stop_cuts()))
        body, length = request.body, content_length(request.head)
        while len(body) < length:
            chunk = conn.recv(1 << 16)
            if not chunk:
                return
            body += chunk
        conn.sendall(b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n")


def _engine(tmp_path: Path) -> tuple[Path, str]:
    path = tmp_path / "demo.engine"
    path.write_bytes(ENGINE)
    return path, hashlib.sha256(ENGINE).hexdigest()


def _store(root: Path, url: str) -> Store:
    store = Store(root, remote=url)
    store.check()
    return store


def _held_store(tmp_path: Path) -> tuple[Store, HoldsTheEnginePut]:
    """A store (remotes forgotten) whose remote holds its engine's PUT, the server told the store to read its upload
    state from; the caller stops the server."""
    remote.forget_remotes()
    holder: list[Store] = []
    server = HoldsTheEnginePut(holder)
    try:
        store = _store(tmp_path / "store", server.url)
    except BaseException:
        server.stop()
        raise
    holder.append(store)
    return store, server


def test_the_upload_is_sending_while_the_put_is_held_and_done_once_sent(tmp_path: Path) -> None:
    store, server = _held_store(tmp_path)
    try:
        assert str(store.upload.now()) == "not started"
        assert store.upload_a_stop_cuts() == server.url, "a stop before the upload starts cuts it"
        engine, sha = _engine(tmp_path)
        key = key_of_parts(PARTS)
        published = threading.Thread(
            target=store.publish, args=(key, PARTS, engine, {"buildId": "b"}, sha), daemon=True
        )
        published.start()
        published.join(120)  # a bound for something that must happen, not a speed
        assert not published.is_alive(), "the publish did not end"
    finally:
        server.stop()
    assert [(str(now), cuts) for now, cuts in server.seen] == [("sending", server.url)], server.requests
    assert str(store.upload.now()) == "done: sent", store.notes
    assert store.upload_a_stop_cuts() is None, "an upload that is over is not cut by a stop"
    assert [r.split()[0] for r in server.requests] == ["HEAD", "PUT", "PUT"], server.requests


def test_a_remote_found_unreachable_a_moment_ago_is_skipped_and_no_stop_names_it(tmp_path: Path) -> None:
    remote.forget_remotes()
    closed = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{closed.getsockname()[1]}/cache"
    closed.close()  # nothing listens there: a connection is refused
    engine, sha = _engine(tmp_path)
    key = key_of_parts(PARTS)

    first = _store(tmp_path / "first", url)
    first.publish(key, PARTS, engine, {"buildId": "a"}, sha)
    now = first.upload.now()
    assert now.phase == "done" and str(now).startswith("done: not sent: it could not be reached ("), now

    later = _store(tmp_path / "later", url)
    assert str(later.upload.now()) == "not started"
    assert later.upload_a_stop_cuts() is None, "a stop named an upload the store skips (the remote is down)"
    later.publish(key, PARTS, engine, {"buildId": "b"}, sha)
    assert str(later.upload.now()) == f"skipped: the remote store {url} could not be reached a moment ago"
    assert later.upload_a_stop_cuts() is None


def test_a_key_that_does_not_match_what_was_built_skips_the_upload(tmp_path: Path) -> None:
    """The build's end (`lookup._publish`) finds an input changed while the engine was built: nothing is published,
    and the store says the upload is skipped, and why — a stop names no upload."""
    from trtls.builds.avoidance.lookup import _publish
    from trtls.store.use import StoreUse

    store, server = _held_store(tmp_path)
    try:
        onnx = tmp_path / "demo.onnx"
        onnx.write_bytes(b"onnx")
        key = EngineKey(key_of_parts(PARTS), PARTS, read_stats={str(onnx): [0, 0, 0, 0]}, hashed_at=time.time())
        use = StoreUse("demo", tmp_path / "state", None, tmp_path / "demo.engine", "demo", store=store, key=key)
        engine, sha = _engine(tmp_path)
        record = {"buildId": "b", "startedAt": time.time()}
        assert _publish(use, engine, record, sha, {}) is False
    finally:
        server.stop()
    now = store.upload.now()
    assert now.phase == "skipped" and now.reason == record["keyMismatch"], (now, record)
    assert str(now).startswith(f"skipped: not stored: {onnx} changed while the engine was built"), now
    assert store.upload_a_stop_cuts() is None
    assert server.requests == [], "nothing was sent"
    assert json.dumps(store.notes) == "[]"
