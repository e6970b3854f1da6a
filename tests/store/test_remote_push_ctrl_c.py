"""A Ctrl-C (or a SIGTERM) while a finished build sends its engine to the remote store stops the upload at once.

The build is done by then: its engine is in place and published to the local store; the publish then sends it on
(`Store.publish` → `store.remote.push_entry`: the engine's PUT, then its record's). That ran on the event loop, inside
the build's end (builds/supervisor/build_end.py, the store's listener: builds/avoidance/lookup.attach), so the loop
could not answer the signal: the stop waited for the upload's whole bound (60 s and the engine's size at 4 MiB/s) and
the record was sent after it. Now the publish runs on a thread the build's end awaits; the stop reaches the store's
cancel state (`Store.stop`, through `Build.stop_end_with`), which cuts the PUT's socket as it cuts a fetch
(store/remote_http.py `_Deadline`): no record is sent, the command says why, and the build stands (exit 0, as any stop
that comes once the engine is complete: tests/builds/test_build_core.py).

Real processes and the server docs/store.md tells users to run: a real `trtls build` of the quickstart's `demo` with
an empty local store, and nginx's WebDAV module (tests/store/nginx_dav.py) behind a proxy in this test that passes
every request through but holds the engine's PUT: it sends nginx the headers and half the body, sends the build its
signal from the thread that holds the PUT (no reading of the child's output), then reads what the build still sends
without passing it on — until the build lets the connection go, or HOLD_S passes (then it sends nginx the rest: what
the old code waited for). nginx, whose body was cut short, must keep nothing of it: no blob, no temp file."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import socket
import threading
import time
from pathlib import Path

import pytest

from tests.store.helpers import entries, local_entry_whole, summaries
from tests.store.nginx_dav import DavServer
from tests.store.scripted_remote import (
    Listener,
    Proxy,
    Request,
    SignalledBuild,
    build_against,
    content_length,
    held_until_let_go,
    pass_half,
    pass_rest,
)
from trtls.core.cancel import CancelToken

HOLD_S = 20.0  # how long the proxy waits for the build to let the PUT go before it sends nginx the rest


class HoldingProxy(Proxy):
    """A loopback proxy in front of nginx: every request passes through, except the PUT of an engine (`cas/`), held
    half sent while the build is signalled (`signum`)."""

    def __init__(self, upstream: str, signum: int) -> None:
        self.build = SignalledBuild()
        self.signum = signum
        self.signalled = threading.Event()
        self.let_go = threading.Event()  # the build cut its PUT before it had sent it whole
        self.sent_all = threading.Event()  # HOLD_S passed: the whole engine went to nginx
        super().__init__(upstream)

    def forward(self, conn: socket.socket, up: socket.socket, request: Request) -> None:
        if request.line.startswith("PUT ") and "/cas/" in request.line:
            if not self._hold(conn, up, request):
                return  # the build let go: nginx is left with half a body and a closed connection
        else:
            up.sendall(request.data)
            if request.line.startswith("PUT "):  # a record's body may come after its headers
                pass_rest(conn, up, content_length(request.head), len(request.body))
        try:
            while chunk := up.recv(1 << 16):  # nginx's answer as it comes, until it closes
                conn.sendall(chunk)
        except OSError:
            pass

    def _hold(self, conn: socket.socket, up: socket.socket, request: Request) -> bool:
        """Half the engine to nginx, the build's signal, then what the build still sends read and kept back: False
        when the build let the connection go first, True when HOLD_S passed (the rest then went to nginx)."""
        length, kept = pass_half(conn, up, request)
        self.build.signal_the_build(self.signum)  # the person's Ctrl-C (CI's SIGTERM) while the engine goes out
        self.signalled.set()
        rest = held_until_let_go(conn, HOLD_S)
        if rest is None:
            self.let_go.set()
            return False
        kept += rest
        up.sendall(kept)  # not let go: the rest of the engine, as the old code waited for
        self.sent_all.set()
        pass_rest(conn, up, length, length // 2 + len(kept))
        return True


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _nginx_done_with(nginx: DavServer, line: str) -> str:
    """nginx's access log once it holds the request `line` (a cut PUT is logged when nginx has given it up)."""
    deadline = time.monotonic() + 60
    while line not in (log := nginx.access_log()):
        assert time.monotonic() < deadline, f"nginx never logged {line}:\n{log}"
        time.sleep(0.1)
    return log


def cut_put_left_nothing(proxy: HoldingProxy, nginx: DavServer, sha: str) -> None:
    """The remote: the engine's PUT (`sha`) the only one the build sent, and cut; nginx kept nothing of the half it
    was sent — no file, no body left in its temp folder."""
    puts = [line.split()[1] for line in proxy.requests if line.startswith("PUT ")]
    assert puts == [f"/cache/cas/{sha}"], proxy.requests
    log = _nginx_done_with(nginx, f"PUT /cache/cas/{sha}")
    assert not re.search(rf"PUT /cache/cas/{sha} HTTP/1\.1\" 20[014]", log), log
    held = [p for p in nginx.files.rglob("*") if p.is_file()]
    assert held == [], held
    body_temps = [p for p in (nginx.folder / "body").rglob("*") if p.is_file()]
    assert body_temps == [], f"nginx kept the cut body: {body_temps}"


@pytest.mark.parametrize(("signum", "source"), [(signal.SIGINT, "ctrl_c"), (signal.SIGTERM, "service_shutdown")])
def test_a_stop_while_the_engine_is_sent_cuts_the_upload_and_sends_no_record(
    seed_ws: Path, nginx_dav: DavServer, tmp_path: Path, signum: int, source: str
) -> None:
    proxy = HoldingProxy(nginx_dav.url, signum)
    store = tmp_path / "store-b"
    returncode, err = build_against(seed_ws, store, proxy, proxy.build)
    assert proxy.signalled.is_set(), f"the engine was never sent: {proxy.requests}\n{err[-3000:]}"
    assert proxy.let_go.is_set() and not proxy.sent_all.is_set(), (
        f"the build sent its engine on after the stop (the proxy passed it to nginx after {HOLD_S:g} s)\n{err[-3000:]}"
    )

    # the build stands: built, exit 0 (a stop that came once the engine was complete), its engine in place
    assert returncode == 0 and "Traceback" not in err, err[-3000:]
    (summary,) = summaries(seed_ws)
    key, sha = str(summary["engineKey"]), str(summary["engineArtifact"]["sha256"])
    assert summary["outcome"] == "built", summary
    assert _sha((seed_ws / "build" / "demo.engine").read_bytes()) == sha
    said = (
        f"the engine was not sent to the remote store {proxy.url}: its upload was stopped ({source}) and no record "
        "was sent; the engine is built and kept in the local store"
    )
    assert f"warning: {said}" in err, err[-3000:]
    assert said in summary["store"]["warnings"], summary["store"]
    # … and its local store entry, whole: its record holds together and its engine hashes to the recorded sha256
    assert [e.name for e in entries(store)] == [key]
    local_entry_whole(store, key, sha)
    assert list((store / "tmp").iterdir()) == [], "a temp folder was left"

    # the remote: the engine's PUT cut, no record asked for; nginx kept nothing of the half it was sent
    cut_put_left_nothing(proxy, nginx_dav, sha)
    files = nginx_dav.files
    assert not (files / "ac" / key).exists(), "a record was sent for an engine that was not"
    assert not (files / "cas" / sha).exists(), "the remote kept part of the engine under its name"
    assert json.loads((store / "entries" / key / "entry.json").read_text())["engine"]["sha256"] == sha


class ReadsThePutSlowly(Listener):
    """A remote on a loopback socket that holds no blob (HEAD: 404) and stores every PUT — except, while `cancel` is
    given, an engine's (`cas/`): it reads half of it (the client's send blocks: its buffers are full), sets the
    store's cancel state from its own thread (as a Ctrl-C would), then reads on: a client that lets go sends the rest
    short; one that does not sends it whole and has it stored (what the old code did)."""

    def __init__(self, cancel: CancelToken | None) -> None:
        self.cancel = cancel
        self.let_go = threading.Event()  # the client cut the engine's PUT short
        self.decided = threading.Event()  # the held PUT is over, cut or whole
        self.stored: dict[str, int] = {}  # target → bytes stored
        super().__init__()

    def answer(self, conn: socket.socket, request: Request) -> None:
        method, target = request.line.split()[:2]
        if method != "PUT":
            conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        length = content_length(request.head)
        held = self.cancel is not None and "/cas/" in target
        got = len(request.body)
        while got < (length // 2 if held else length):
            chunk = conn.recv(1 << 16)
            if not chunk:
                return
            got += len(chunk)
        if held:
            got = self._held(conn, got, length)
            if got < length:
                self.let_go.set()
            self.decided.set()
        while got < length:
            chunk = conn.recv(1 << 16)
            if not chunk:
                return
            got += len(chunk)
        self.stored[target] = got
        conn.sendall(b"HTTP/1.1 201 Created\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    def _held(self, conn: socket.socket, got: int, length: int) -> int:
        """The stop set (its cut runs in this thread, before `request` returns), then what is left read as it comes:
        the bytes the client sent in all — short of `length` when it let go."""
        assert self.cancel is not None
        self.cancel.request("ctrl_c")
        while got < length:
            try:
                chunk = conn.recv(1 << 16)
            except ConnectionResetError:
                break
            if not chunk:
                break
            got += len(chunk)
        return got


def test_the_stop_cuts_a_put_while_its_body_is_still_going_out(tmp_path: Path) -> None:
    """In one process: a 64 MiB engine's PUT, its client blocked sending (the server reads no more), is cut when the
    store's cancel state is set; no record is sent, the note says why, the local entry stands and the remote is not
    taken as down — the next publish of the key, with a cancel state not set, sends both."""
    from trtls.store import remote
    from trtls.store.entries import Store
    from trtls.store.key import key_of_parts

    parts = {"format": "forged", "forged": "push stopped"}
    key = key_of_parts(parts)
    engine = tmp_path / "demo.engine"
    engine.write_bytes(os.urandom(64 << 20))  # more than the loopback's buffers: the send blocks
    stop = CancelToken()
    server = ReadsThePutSlowly(stop)
    remote.forget_remotes()
    try:
        store = Store(tmp_path / "store", remote=server.url)
        store.check()
        entry = store.publish(key, parts, engine, {"buildId": "b1"}, None, push=False)
        store.stop = stop
        thread = threading.Thread(target=remote.push_entry, args=(store, entry), daemon=True)
        thread.start()
        thread.join(120)  # a bound for something that must happen, not a speed
        assert not thread.is_alive() and server.decided.wait(60), "the stopped upload went on"
        assert server.let_go.is_set(), "the client sent the whole engine after the stop"
        said = (
            f"the engine was not sent to the remote store {server.url}: its upload was stopped (ctrl_c) and no "
            "record was sent; the engine is built and kept in the local store"
        )
        assert store.notes == [said]
        blob = f"/cache/cas/{entry.sha256}"
        assert [r.split()[:2] for r in server.requests] == [["HEAD", blob], ["PUT", blob]]
        assert server.stored == {}
        store.verify(entry)

        server.cancel = None  # the next build's publish: its own cancel state, not set
        again = Store(tmp_path / "store", remote=server.url)
        again.stop = CancelToken()
        remote.push_entry(again, entry)
        assert again.notes == [], "the remote was held against after a stop"
        assert sorted(server.stored) == [f"/cache/ac/{key}", blob] and server.stored[blob] == entry.size
    finally:
        server.stop()
        remote.forget_remotes()
