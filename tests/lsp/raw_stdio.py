"""A bare JSON-RPC client over the server's real stdio, for what a typed client cannot send: malformed frames,
hostile params, `exit` in the middle of a build. It keeps the server's stderr so a test can count tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

SERVER = [sys.executable, "-m", "trtls", "serve"]


class RawServer:
    def __init__(self, cwd: Path | None = None, preexec_fn: Any = None, refuse_progress: bool = False) -> None:
        self.refuse_progress = refuse_progress  # answer window/workDoneProgress/create with an error
        self.proc = subprocess.Popen(
            SERVER,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=cwd,
            preexec_fn=preexec_fn,
        )
        self.messages: list[dict[str, Any]] = []
        self.stderr = b""
        self._lock = threading.Condition()
        self._next_id = 0
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    # -- wire ----------------------------------------------------------------------------------
    def send_bytes(self, body: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        self.proc.stdin.flush()

    def send(self, message: dict[str, Any]) -> None:
        self.send_bytes(json.dumps({"jsonrpc": "2.0", **message}).encode())

    def notify(self, method: str, params: Any = None) -> None:
        self.send({"method": method, **({"params": params} if params is not None else {})})

    def request(self, method: str, params: Any = None, timeout: float = 120) -> dict[str, Any]:
        """Send a request and wait for its response (the whole response object: result or error)."""
        self._next_id += 1
        rid = self._next_id
        self.send({"id": rid, "method": method, **({"params": params} if params is not None else {})})
        return self.wait_for(lambda m: m.get("id") == rid and "method" not in m, timeout)

    def command(self, name: str, arg: Any, timeout: float = 120) -> dict[str, Any]:
        """`workspace/executeCommand` of `name` with one argument; its result (a reply without one fails here)."""
        reply = self.request("workspace/executeCommand", {"command": name, "arguments": [arg]}, timeout)
        assert "result" in reply, reply
        result: dict[str, Any] = reply["result"]
        return result

    def wait_for(self, predicate: Any, timeout: float = 120) -> dict[str, Any]:
        end = time.monotonic() + timeout
        with self._lock:
            while True:
                for m in self.messages:
                    if predicate(m):
                        return m
                left = end - time.monotonic()
                assert left > 0, "no such message from the server in time"
                self._lock.wait(left)

    def _read(self) -> None:
        out = self.proc.stdout
        assert out is not None
        while True:
            length = 0
            while True:
                line = out.readline()
                if not line:
                    return
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
                if line in (b"\r\n", b"\n"):
                    break
            message = json.loads(out.read(length))
            if message.get("method") == "window/workDoneProgress/create" and self.refuse_progress:
                self.send({"id": message["id"], "error": {"code": -32603, "message": "no progress here"}})
            elif message.get("method") in ("window/workDoneProgress/create", "workspace/codeLens/refresh"):
                self.send({"id": message["id"], "result": None})  # answer as an editor would
            with self._lock:
                self.messages.append(message)
                self._lock.notify_all()

    def _read_stderr(self) -> None:
        err = self.proc.stderr
        assert err is not None
        while chunk := err.read1(65536):  # type: ignore[attr-defined]
            self.stderr += chunk

    # -- session -------------------------------------------------------------------------------
    def initialize(self, root: Path | None = None) -> None:
        params: dict[str, Any] = {
            "processId": None,
            "rootUri": root.as_uri() if root else None,
            "capabilities": {"window": {"workDoneProgress": True}},
        }
        if root is not None:
            params["workspaceFolders"] = [{"uri": root.as_uri(), "name": root.name}]
        response = self.request("initialize", params)
        assert "result" in response, response
        self.notify("initialized", {})

    def shown_messages(self) -> list[str]:
        return [m["params"]["message"] for m in self.messages if m.get("method") == "window/showMessage"]

    def close(self, timeout: float = 60) -> int:
        """shutdown + exit, then wait for the process (killed if it does not go)."""
        if self.proc.poll() is None:
            try:
                self.request("shutdown", timeout=timeout)
                self.notify("exit")
            except (AssertionError, BrokenPipeError, OSError):
                pass
        return self.wait(timeout)

    def wait(self, timeout: float = 60) -> int:
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()  # an editor that quits closes the pipe too
        except OSError:
            pass
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait()
        time.sleep(0.2)  # the stderr reader drains what is left
        return code
