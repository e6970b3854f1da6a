"""A Ctrl-C while a build downloads its engine from the remote store stops it at once.

The lookup runs on a thread (builds/avoidance/lookup.py, off the event loop); a Ctrl-C cancelled the request that
awaited it, but the thread read on — the command said `interrupted by Ctrl-C` and then waited for the download's own
bound (30 s, or the engine's size at the slowest rate) before the process could end, and an engine that came within
it was kept in the local store after the person had stopped the build. Now the request's cancel state (the one the
Ctrl-C sets, cli/common.StopKeys) cuts the request's socket, as its deadline does (store/remote_http.py `_Deadline`):
the fetch ends, its temp folder is discarded and nothing is kept.

Real processes and sockets: a real `trtls build` of a folder with an empty local store, and a remote — a socket server
in this test — that serves the seed's record at once and its engine half, then sends the build its SIGINT from the
thread that answers the GET (it knows the download is under way; no reading of the child's output), and keeps the
rest of the engine coming a byte every half second. The build must have let go of the connection before the server
would send the rest (a generous bound, not a speed)."""

from __future__ import annotations

import hashlib
import json
import os
import select
import signal
import socket
import threading
import time
from pathlib import Path

from tests.store.scripted_remote import ScriptedServer, SignalledBuild, build_against
from trtls.core.cancel import CancelToken

HOLD_S = 20.0  # what the server waits for the build to let go before it sends the rest (under the 30 s grace)


class EngineThenCtrlC(SignalledBuild):
    """The seed's record at once; its engine half, then the build's SIGINT, then a byte every half second until the
    build cuts the connection — or, after HOLD_S, the rest at once (what the old code waited for and kept)."""

    def __init__(self, record: bytes, engine: bytes) -> None:
        super().__init__()
        self.record, self.engine = record, engine
        self.signalled = threading.Event()
        self.let_go = threading.Event()  # the build cut the connection before the whole engine was sent
        self.sent_all = threading.Event()

    def __call__(self, line: str, conn: socket.socket) -> None:
        if " /cache/ac/" in line:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(self.record) + self.record)
            return
        half = len(self.engine) // 2
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(self.engine) + self.engine[:half])
        if not self.interrupt():
            conn.sendall(self.engine[half:])  # not stopped this time: the whole engine
            return
        self.signalled.set()
        rest = self.engine[half:]
        until = time.monotonic() + HOLD_S
        try:
            while time.monotonic() < until and len(rest) > 1:
                readable, _, _ = select.select([conn], [], [], 0.5)
                if readable and not _recv_or_reset(conn):
                    break  # the build shut the connection down (or ended): nothing more is read
                conn.sendall(rest[:1])  # a byte every half second: each within the 5 s a read waits
                rest = rest[1:]
            else:
                conn.sendall(rest)
                self.sent_all.set()
                return
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.let_go.set()  # the build cut the connection before the whole engine was sent

    def interrupt(self) -> bool:
        self.signal_the_build(signal.SIGINT)  # the person's Ctrl-C, while the engine is coming
        return True


def _recv_or_reset(conn: socket.socket) -> bytes:
    try:
        return conn.recv(1 << 16)
    except ConnectionResetError:
        return b""


def test_a_ctrl_c_while_the_engine_is_fetched_cuts_the_download_and_keeps_nothing(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    key = str(seeded[1]["engineKey"])
    entry = seeded[0] / "entries" / key
    record, engine = (entry / "entry.json").read_bytes(), (entry / "engine").read_bytes()
    assert len(engine) > 200, "the engine is long enough to trickle"
    answer = EngineThenCtrlC(record, engine)
    server = ScriptedServer(answer)
    store = tmp_path / "store-b"
    returncode, err = build_against(seed_ws, store, server, answer)
    assert answer.signalled.is_set(), f"the engine was never asked for: {server.requests}\n{err[-3000:]}"
    assert returncode == 130, err[-3000:]
    assert err.strip().endswith("trtls build: interrupted by Ctrl-C") and "Traceback" not in err, err[-3000:]
    assert answer.let_go.is_set() and not answer.sent_all.is_set(), (
        f"the build read on after its Ctrl-C (the server sent the whole engine after {HOLD_S:g} s)"
    )
    assert not (store / "entries" / key).exists(), "an engine the person stopped the download of was kept"
    assert list((store / "entries").iterdir()) == []
    assert list((store / "tmp").iterdir()) == [], "the download's temp folder was left"
    assert not (seed_ws / "build" / "demo.engine").exists(), "nothing was built or restored"
    runs = seed_ws / ".trtls" / "runs"
    assert not runs.exists() or list(runs.iterdir()) == [], "no build was started"
    assert [r.split()[1] for r in server.requests] == [f"/cache/ac/{key}", f"/cache/cas/{_sha(record)}"]


def _sha(record: bytes) -> str:
    return str(json.loads(record)["engine"]["sha256"])


def test_the_stop_cuts_the_fetch_in_flight_and_the_remote_is_not_held_against(tmp_path: Path) -> None:
    """In one process, the store's own cancel state (`Store.stop`, the lookup's: builds/avoidance/lookup.py sets it
    when the request is stopped), set from the server's thread once the engine is half sent: the lookup in flight
    ends with a miss and a note, keeps nothing, and the remote is neither taken as down nor refused for the key —
    the next lookup, with a cancel state not set, fetches the engine whole."""
    from trtls.store import remote
    from trtls.store.entries import Store
    from trtls.store.key import key_of_parts

    parts = {"format": "forged", "forged": "stopped"}
    key = key_of_parts(parts)
    engine = b"E" * 4096
    sha = hashlib.sha256(engine).hexdigest()
    record = json.dumps(
        {"format": "trtls.store-entry/1", "key": key, "parts": parts, "engine": {"sha256": sha, "size": len(engine)}}
    ).encode()
    stop = CancelToken()
    answer = EngineThenStop(record, engine, stop)
    server = ScriptedServer(answer)
    remote.forget_remotes()
    try:
        store = Store(tmp_path / "store", remote=server.url)
        store.check()
        store.stop = stop
        got: list[object] = []
        thread = threading.Thread(target=lambda: got.append(store.get(key)), daemon=True)
        thread.start()
        thread.join(120)  # a bound for something that must happen, not a speed
        assert not thread.is_alive() and got == [None], "the stopped fetch went on"
        assert answer.let_go.is_set() and not answer.sent_all.is_set(), "the fetch read on after the stop"
        assert store.notes == [f"the remote store {server.url} was not used: the build was stopped while it was asked"]
        assert list((tmp_path / "store" / "entries").iterdir()) == []
        assert list((tmp_path / "store" / "tmp").iterdir()) == []
        assert stop.source == "ctrl_c"
        asked = len(server.requests)
        assert store.get(key) is None and len(server.requests) == asked, "a stopped store asks nothing more"

        answer.stop = None  # the next build's lookup: its own cancel state, not set
        again = Store(tmp_path / "store", remote=server.url)
        again.stop = CancelToken()
        entry = again.get(key)
        assert entry is not None and entry.engine.read_bytes() == engine, again.notes
    finally:
        server.stop()
        remote.forget_remotes()


class EngineThenStop(EngineThenCtrlC):
    """As EngineThenCtrlC, the stop set on the cancel state itself (its Ctrl-C: the request's source)."""

    def __init__(self, record: bytes, engine: bytes, stop: CancelToken | None) -> None:
        super().__init__(record, engine)
        self.stop = stop
        self.started.set()
        self.pid = os.getpid()

    def interrupt(self) -> bool:
        if self.stop is None:
            return False
        self.stop.request("ctrl_c")
        return True
