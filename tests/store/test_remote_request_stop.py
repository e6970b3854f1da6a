"""A remote store request and the cancel state it serves: no listener outlives its request, and a stop cuts a connect.

One cancel state serves many requests — the editor's lookups of one session, a matrix's cells — and each request
(store/remote_http.py `_Deadline`) put a listener on it that was never taken off: a long session held one per request
it had ever made. Now each request's listener is taken off when it ends: answered, refused, failed or stopped.

The stop's listener used to be put on only once the socket had connected, so a stop (a Ctrl-C) while the connect was
under way waited for the connect's timeout (5 s for a GET, 60 s for a PUT) and then said the remote could not be
reached (and remembered it as down). Now the connect itself is cut: the request ends at once with the stop's error.

Real sockets on the loopback: a scripted server that answers 200, 404, 500 and a same-origin redirect, and one that
stalls its answer until the stop cuts it; for the connect, a listening socket with a backlog of 0 whose queue this
test fills first (the kernel drops the SYNs that come after, so a connect to it stays under way and is never taken)."""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.store.scripted_remote import ScriptedServer
from trtls.core.cancel import CancelToken
from trtls.store import remote, remote_http
from trtls.store.remote_http import RemoteError, Stopped

BOUND_S = 3.0  # under the 5 s connect timeout: catches the wait for it, says nothing of a speed
STOP_AFTER_S = 0.5  # the stop comes while the connect is under way (it stays so: nothing accepts it)


def listeners(token: CancelToken) -> int:
    """How many listeners `token` holds (what this test is about: nothing public says it)."""
    return len(token._listeners)


def _answers(line: str, conn: socket.socket) -> None:
    target = line.split()[1]
    if target.endswith("/ok"):
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
    elif target.endswith("/moved"):
        conn.sendall(b"HTTP/1.1 302 Found\r\nLocation: /cache/ok\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    elif target.endswith("/put"):
        conn.sendall(b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    elif target.endswith("/stall"):
        conn.recv(1)  # no answer: only the client's cut (or its end) lets this go
    elif target.endswith("/broken"):
        conn.sendall(b"HTTP/1.1 500 Broken\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    else:
        conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")


def _get(url: str, name: str, stop: CancelToken) -> bytes | None:
    with remote_http.request(url, "GET", f"{url}/{name}", stop=stop) as response:
        return None if response is None else remote_http.read_all(response, 100)


def test_a_cancel_state_holds_no_listener_of_a_request_that_ended() -> None:
    server = ScriptedServer(_answers)
    url = server.url
    closed = socket.create_server(("127.0.0.1", 0))
    nobody = f"http://127.0.0.1:{closed.getsockname()[1]}/cache"
    closed.close()  # nothing listens there now: a connect is refused at once
    remote.forget_remotes()
    stop = CancelToken()
    try:
        before = listeners(stop)
        for _ in range(10):  # answered, a 404, a 500, redirected (two connections), a PUT's status, a HEAD, refused
            assert _get(url, "ok", stop) == b"ok"
            assert _get(url, "missing", stop) is None
            with pytest.raises(RemoteError, match="answered 500"):
                _get(url, "broken", stop)
            assert _get(url, "moved", stop) == b"ok"
            assert remote_http.request_status(url, "PUT", f"{url}/put", b"x", 1, stop=stop) == 201
            assert remote_http.head(url, f"{url}/missing", stop) is None
            with pytest.raises(RemoteError, match="could not be reached"):
                _get(nobody, "ok", stop)
        assert listeners(stop) == before, "a request that ended left its listener on the cancel state"

        # the stop of a request that waits for its answer: the request ends with the stop's error, its listener off
        threading.Timer(STOP_AFTER_S, stop.request, args=("ide_stop",)).start()
        with pytest.raises(Stopped):
            _get(url, "stall", stop)
        assert listeners(stop) == before, "a stopped request left its listener on the cancel state"
    finally:
        server.stop()
        remote.forget_remotes()


@contextlib.contextmanager
def never_accepting() -> Iterator[str]:
    """A loopback URL whose connects stay under way: a listener with a backlog of 0 that never accepts, its queue
    filled by connections of this test (the first is queued whole; the kernel then drops every SYN)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    filling: list[socket.socket] = []
    try:
        for _ in range(64):
            sock = socket.socket()
            sock.setblocking(False)
            filling.append(sock)
            sock.connect_ex(server.getsockname())
            with selectors.DefaultSelector() as waiting:
                waiting.register(sock, selectors.EVENT_WRITE)
                connected = bool(waiting.select(2.0)) and not sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if not connected:
                break  # this one is not taken: the queue is full
        else:
            pytest.fail("a listener with a backlog of 0 took 64 connections")
        yield f"http://127.0.0.1:{server.getsockname()[1]}/cache"
    finally:
        for sock in filling:
            sock.close()
        server.close()


def _stopped_while_connecting(call: Callable[[CancelToken], object]) -> tuple[BaseException | None, float, int]:
    """`call(stop)`, its stop set STOP_AFTER_S after it began: what it raised, how long it took, and how many
    listeners the cancel state held after it."""
    stop = CancelToken()
    threading.Timer(STOP_AFTER_S, stop.request, args=("ctrl_c",)).start()
    t0 = time.monotonic()
    try:
        call(stop)
    except Exception as exc:
        return exc, time.monotonic() - t0, listeners(stop)
    return None, time.monotonic() - t0, listeners(stop)


@pytest.mark.parametrize("method", ["GET", "HEAD", "PUT"])
def test_a_stop_cuts_a_connect_under_way_at_once(method: str) -> None:
    remote.forget_remotes()
    with never_accepting() as url:
        target = f"{url}/ac/{'0' * 64}"

        def call(stop: CancelToken) -> object:
            if method == "PUT":  # a PUT waits PUT_TIMEOUT_S (60 s) for its connect
                return remote_http.request_status(url, "PUT", target, b"x", 1, remote_http.PUT_TIMEOUT_S, stop)
            if method == "HEAD":
                return remote_http.head(url, target, stop)
            return _get(url, f"ac/{'0' * 64}", stop)

        raised, took, left = _stopped_while_connecting(call)
        assert isinstance(raised, Stopped), f"not the stop's error: {raised!r}"
        assert took < BOUND_S, f"the stop waited for the connect's timeout ({took:.1f} s)"
        assert left == 0, "the stopped connect left its listener on the cancel state"
        assert url not in remote_http.down, "a stopped connect took the remote as down"
    remote.forget_remotes()


def test_a_stop_while_the_upload_connects_is_the_pushs_note(tmp_path: Path) -> None:
    """Through the store: a publish's push whose first request (the HEAD of its blob) cannot connect, stopped: the
    note says the upload was stopped, not that the remote could not be reached; nothing is remembered against it."""
    from trtls.store.entries import Store
    from trtls.store.key import key_of_parts

    parts = {"format": "forged", "forged": "connect stopped"}
    key = key_of_parts(parts)
    engine = tmp_path / "demo.engine"
    engine.write_bytes(b"engine bytes")
    remote.forget_remotes()
    with never_accepting() as url:
        store = Store(tmp_path / "store", remote=url)
        store.check()
        entry = store.publish(key, parts, engine, {"buildId": "b1"}, None, push=False)

        def push(stop: CancelToken) -> None:
            store.stop = stop
            remote.push_entry(store, entry)

        raised, took, left = _stopped_while_connecting(push)
        assert raised is None and took < BOUND_S, (raised, took)
        assert store.notes == [
            f"the engine was not sent to the remote store {url}: its upload was stopped (ctrl_c) and no record was "
            "sent; the engine is built and kept in the local store"
        ]
        assert left == 0 and url not in remote_http.down
    remote.forget_remotes()
