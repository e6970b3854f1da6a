"""A remote store that says exactly what a test scripts: a real socket server on a loopback port whose every
request is answered by `answer(request_line, conn)` in a thread of its own (tests/store/test_remote_hostile_answers.py,
tests/store/test_remote_fetch_ctrl_c.py). The server thread knows when a request came, so a test acts there, never on
reading a child's output."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable


class ScriptedServer:
    """Answers each request with `answer(request_line, conn)`; records the request lines."""

    def __init__(self, answer: Callable[[str, socket.socket], None]) -> None:
        self.answer = answer
        self.requests: list[str] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/cache"
        self.stopped = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopped.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = conn.recv(4096)
                if not chunk:
                    return
                head += chunk
            line = head.split(b"\r\n", 1)[0].decode()
            self.requests.append(line)
            try:
                self.answer(line, conn)
            except OSError:
                pass  # the client cut the connection: what the bound is for

    def stop(self) -> None:
        self.stopped.set()
        self.sock.close()
