"""Loopback socket servers for the remote store's tests (tests/store/test_remote_*.py).

`Listener` is the one accept loop they share: a real socket server on a loopback port whose every connection is
served on a thread of its own, its request read (`read_request`) and answered — by `ScriptedServer`, a remote that
says exactly what a test scripts (`script(request_line, conn)`: test_remote_hostile_answers.py,
test_remote_fetch_ctrl_c.py), by a `Proxy` in front of nginx (test_remote_push_ctrl_c.py,
test_remote_concurrent_writers.py: `pass_half` and `pass_rest` pass a body on), by a remote of its own
(test_remote_push_ctrl_c.py) or one that never answers (test_remote_stall_lsp.py). The server thread knows when a
request came, so a test acts there, never on reading a child's output: `build_against` runs the real `trtls build`
(`run_signalled`, any `trtls` command) that such a thread signals (`SignalledBuild`); `held_until_let_go` holds a
request's body unanswered until the build lets it go."""

from __future__ import annotations

import os
import re
import select
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

from tests.store.helpers import build_cmd, with_store

CHUNK = 1 << 16


class Listener:
    """A socket server on a loopback port (`url`, with `path`): every connection it accepts is served on a thread of
    its own, until `stop`. `serve` reads the request's head, records its line (`requests`) and hands it to `answer`;
    a subclass answers (or serves the connection its own way), and calls `__init__` last, once it is ready."""

    def __init__(self, path: str = "/cache") -> None:
        self.requests: list[str] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}{path}"
        self.stopped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return  # stopped
            threading.Thread(target=self.serve, args=(conn,), daemon=True).start()

    def serve(self, conn: socket.socket) -> None:
        with conn:
            request = read_request(conn)
            if request is None:
                return
            self.requests.append(request.line)
            self.answer(conn, request)

    def answer(self, conn: socket.socket, request: Request) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        self.stopped.set()
        self.sock.close()


class Proxy(Listener):
    """A loopback proxy in front of `upstream` (nginx): each request answered through a connection of its own to it,
    by `forward`."""

    def __init__(self, upstream: str) -> None:
        target = urlsplit(upstream)
        self.upstream = (str(target.hostname), int(target.port or 80))
        super().__init__(target.path)

    def answer(self, conn: socket.socket, request: Request) -> None:
        with socket.create_connection(self.upstream, timeout=120) as up:
            self.forward(conn, up, request)

    def forward(self, conn: socket.socket, up: socket.socket, request: Request) -> None:
        raise NotImplementedError


class Request(NamedTuple):
    head: bytes  # the request line and headers, without the blank line that ends them
    body: bytes  # what of the body came with them
    line: str  # the request line

    @property
    def data(self) -> bytes:
        """The bytes read, as they came."""
        return self.head + b"\r\n\r\n" + self.body


def read_request(conn: socket.socket) -> Request | None:
    """A request's head read as it comes (with what of its body came along); None when the client closed first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(CHUNK)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return Request(head, body, head.split(b"\r\n", 1)[0].decode())


def content_length(head: bytes) -> int:
    found = re.search(rb"(?im)^content-length:\s*(\d+)", head)
    assert found is not None, head
    return int(found.group(1))


def pass_half(conn: socket.socket, up: socket.socket, request: Request) -> tuple[int, bytes]:
    """The request's head and the first half of its body sent `up`: its Content-Length, and what was read past the
    half (kept back)."""
    length = content_length(request.head)
    body = request.body
    while len(body) < length // 2:
        chunk = conn.recv(CHUNK)
        assert chunk, "the build sent less than half its body"
        body += chunk
    up.sendall(request.head + b"\r\n\r\n" + body[: length // 2])
    return length, body[length // 2 :]


def pass_rest(conn: socket.socket, up: socket.socket, length: int, sent: int) -> bool:
    """What is left of a body of `length` bytes (`sent` of them passed on already) passed `up` as it comes: False
    when the client closed first."""
    while sent < length:
        chunk = conn.recv(CHUNK)
        if not chunk:
            return False
        up.sendall(chunk)
        sent += len(chunk)
    return True


def held_until_let_go(conn: socket.socket, hold_s: float) -> bytes | None:
    """What the client still sends on `conn`, read and kept back (never answered) until it lets the connection go —
    None — or `hold_s` passes: what it sent by then."""
    kept = b""
    until = time.monotonic() + hold_s
    while time.monotonic() < until:
        if not select.select([conn], [], [], 0.5)[0]:
            continue
        try:
            chunk = conn.recv(CHUNK)
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            return None
        kept += chunk
    return kept


class ScriptedServer(Listener):
    """Answers each request with `script(request_line, conn)`; records the request lines."""

    def __init__(self, script: Callable[[str, socket.socket], None]) -> None:
        self.script = script
        super().__init__()

    def answer(self, conn: socket.socket, request: Request) -> None:
        try:
            self.script(request.line, conn)
        except OSError:
            pass  # the client cut the connection: what the bound is for


class SignalledBuild:
    """What a server's thread knows of the real build it serves: its pid once it started, to signal it with."""

    def __init__(self) -> None:
        self.pid: int | None = None
        self.started = threading.Event()  # the build's pid is known

    def signal_the_build(self, signum: int) -> None:
        assert self.started.wait(120) and self.pid is not None
        os.kill(self.pid, signum)


def run_signalled(
    cmd: list[str], server: Listener, build: SignalledBuild, timeout: float = 300
) -> tuple[int, str, str]:
    """A real `trtls` command `cmd`, its pid given to `build` (which the server's thread signals); the server stopped
    once it ended: its exit status, its stdout and its stderr. `timeout` is a bound for something that must happen,
    not a speed: the command is killed past it."""
    try:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        build.pid = proc.pid
        build.started.set()
        try:
            out, err = proc.communicate(timeout=timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    finally:
        server.stop()
    return proc.returncode, out, err


def build_against_out(
    ws: Path, store: Path, server: Listener, build: SignalledBuild, *args: str
) -> tuple[int, str, str]:
    """A real `trtls build` of `ws` (with `args`: `--matrix`) with the local store `store` (empty) and `server` as its
    remote store (`run_signalled`): its exit status, its stdout and its stderr."""
    try:
        with_store(ws, store, remote=server.url)
    except BaseException:
        server.stop()
        raise
    return run_signalled(build_cmd(ws, *args), server, build)


def build_against(ws: Path, store: Path, server: Listener, build: SignalledBuild, *args: str) -> tuple[int, str]:
    """`build_against_out`, its stdout left out: its exit status and its stderr."""
    returncode, _, err = build_against_out(ws, store, server, build, *args)
    return returncode, err
