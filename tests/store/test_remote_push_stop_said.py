"""What `trtls build` says of a stop that comes after its build has ended, and what `--timeout` does then.

Once the build has an outcome a stop no longer stops it (`Build.cancel`); what it still cuts is the end's upload of the
engine to the remote store (tests/store/test_remote_push_ctrl_c.py). The terminal said `stopping demo (cooperative;
Ctrl-C again to force)…` all the same: a build stopping, which was not happening. Now the line says what the stop cuts,
read from the build's state (`cli/store_lookup.stop_words`): the upload, while the store's end is not over; nothing when
there is nothing left to cut (no remote) — the outcome that follows is all it says.

`--timeout` that passes while the upload is stalled: it cuts the upload, as a Ctrl-C does; the build stands (built,
exit 0: the timeout stopped no build), its engine and local store entry whole, and the command says the timeout cut the
upload.

Real processes: the real `trtls build` of the quickstart's `demo` (TensorRT-RTX) with an empty local store, and a
loopback remote (`StalledRemote`) that holds no blob and, on the engine's PUT, reads part of the body and then stalls
(reads what still comes, never answers) until the build lets the connection go. The SIGINT is sent from the thread that
holds the PUT (`SignalledBuild`), never on reading the child's output."""

from __future__ import annotations

import hashlib
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

from tests.store.helpers import build_cmd, entries, local_entry_whole, summaries, with_store
from tests.store.scripted_remote import (
    Listener,
    Request,
    SignalledBuild,
    build_against,
    content_length,
    held_until_let_go,
)

HOLD_S = 240.0  # how long the remote holds a PUT the build does not let go of: past the upload's own bound (60 s +)
TIMEOUT_S = 30  # the build's --timeout: far past the demo's build (about a second), far short of HOLD_S


class StalledRemote(Listener):
    """A remote that holds no blob (every request but a PUT: 404) and stalls an engine's PUT (`cas/`): it reads half
    the body, signals the build (`signum`, when given), then reads what still comes and never answers — until the build
    lets go of the connection (`let_go`: the loopback's buffers may have taken the whole body by then; the answer is
    what it waited for) or HOLD_S passes."""

    def __init__(self, signum: int | None = None) -> None:
        self.build = SignalledBuild()
        self.signum = signum
        self.held = threading.Event()  # the engine's PUT came and is held
        self.let_go = threading.Event()  # the build closed the held PUT's connection, unanswered, before HOLD_S
        super().__init__()

    def answer(self, conn: socket.socket, request: Request) -> None:
        if not (request.line.startswith("PUT ") and "/cas/" in request.line):
            conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            return
        length, got = content_length(request.head), len(request.body)
        while got < length // 2:
            chunk = conn.recv(1 << 16)
            if not chunk:
                return
            got += len(chunk)
        self.held.set()
        if self.signum is not None:
            self.build.signal_the_build(self.signum)
        if held_until_let_go(conn, HOLD_S) is None:
            self.let_go.set()


def _built_and_kept(ws: Path, store: Path) -> str:
    """The build stands: built, its engine in place as recorded, its local store entry whole. The engine's sha256."""
    (summary,) = summaries(ws)
    assert summary["outcome"] == "built", summary
    key, sha = str(summary["engineKey"]), str(summary["engineArtifact"]["sha256"])
    assert hashlib.sha256((ws / "build" / "demo.engine").read_bytes()).hexdigest() == sha
    assert [e.name for e in entries(store)] == [key]
    local_entry_whole(store, key, sha)
    return sha


def test_a_ctrl_c_after_the_build_ended_says_it_stops_the_upload_not_the_build(seed_ws: Path, tmp_path: Path) -> None:
    remote = StalledRemote(signal.SIGINT)
    store = tmp_path / "store"
    returncode, err = build_against(seed_ws, store, remote, remote.build)
    assert remote.held.is_set(), f"the engine was never sent: {remote.requests}\n{err[-3000:]}"
    assert remote.let_go.wait(60), f"the upload went on after the Ctrl-C\n{err[-3000:]}"
    assert returncode == 0 and "Traceback" not in err, err[-3000:]
    assert "cooperative" not in err and "stopping demo" not in err, err[-3000:]  # no build was stopping
    said = (
        f"demo is built already; stopping the upload of its engine to the remote store {remote.url} (the engine stays)…"
    )
    assert said in err.splitlines(), err[-3000:]
    assert "its upload was stopped (ctrl_c)" in err, err[-3000:]
    _built_and_kept(seed_ws, store)
    assert not [r for r in remote.requests if "/ac/" in r and r.startswith("PUT ")], remote.requests


def test_a_ctrl_c_after_the_build_ended_with_nothing_left_to_cut_says_no_stop(seed_ws: Path, tmp_path: Path) -> None:
    """No remote store: once the build has its outcome a Ctrl-C cuts nothing (its evidence is written all the same),
    so nothing is said of a stop; the outcome follows, exit 0. The press lands while the evidence is written (the test
    hook holds the build's end there until the test says go)."""
    import os

    store, pause = tmp_path / "store", tmp_path / "pause"
    pause.mkdir()
    with_store(seed_ws, store)
    env = {**os.environ, "TRTLS_TEST_PAUSE": f"evidence:{pause}"}
    proc = subprocess.Popen(build_cmd(seed_ws), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 300  # a bound for something that must happen, not a speed
        while not (held := list(pause.glob("*.evidence"))):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-3000:]
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)  # the loop is free (the evidence is written on a thread) and says it at once
        held[0].with_suffix(".go").write_text("")  # a press the loop took later still lands after the outcome
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0 and "Traceback" not in err, err[-3000:]
    assert "stopping" not in err and "cooperative" not in err, err[-3000:]
    assert "demo: built" in out, out[-3000:]
    _built_and_kept(seed_ws, store)


def test_the_timeout_while_the_upload_stalls_cuts_it_and_the_build_stands(seed_ws: Path, tmp_path: Path) -> None:
    remote = StalledRemote()
    store = tmp_path / "store"
    with_store(seed_ws, store, remote=remote.url)
    try:
        done = subprocess.run(
            build_cmd(seed_ws, "--timeout", str(TIMEOUT_S)), capture_output=True, text=True, timeout=HOLD_S + 120
        )
    finally:
        remote.stop()
    err = done.stderr
    assert remote.held.is_set(), f"the engine was never sent (built in time?): {remote.requests}\n{err[-3000:]}"
    assert remote.let_go.wait(60), f"the stalled upload was not cut by --timeout\n{err[-3000:]}"
    # the timeout stopped no build: exit 0 (124 is a build the timeout cancelled), the engine usable where it was built
    assert done.returncode == 0 and "Traceback" not in err, err[-3000:]
    said = (
        f"--timeout: {TIMEOUT_S} s passed after demo was built; stopping the upload of its engine to the remote store "
        f"{remote.url} (the engine stays)…"
    )
    assert said in err.splitlines(), err[-3000:]
    assert (
        f"warning: the engine was not sent to the remote store {remote.url}: its upload was stopped (ci_timeout) and "
        "no record was sent; the engine is built and kept in the local store"
    ) in err.splitlines(), err[-3000:]
    sha = _built_and_kept(seed_ws, store)
    (summary,) = summaries(seed_ws)
    assert summary.get("cancelSource") is None, summary  # the build itself was never cancelled
    assert any("stopped (ci_timeout)" in w for w in summary["store"]["warnings"]), summary["store"]
    assert summary["store"]["upload"]["stoppedBy"] == "ci_timeout", summary["store"]  # the outcome's last words
    assert [r.split()[:2] for r in remote.requests if r.startswith("PUT ")] == [["PUT", f"/cache/cas/{sha}"]]
