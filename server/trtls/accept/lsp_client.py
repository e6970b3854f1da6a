"""A small raw JSON-RPC-over-stdio client for `trtls serve` (what an editor does, nothing more).

Answers the server's requests (workDoneProgress/create, codeLens/refresh, ...) with null, keeps every
notification, and lets the caller wait for one that matches a predicate.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trtls.fs import Kind, parse_json, read_text, signal_child
from trtls.fs.stream import open_stream

RECORD_LIMIT = 16 << 20  # the recipe the client opens, a build's running.json


class LspClient:
    def __init__(self) -> None:
        self.proc: asyncio.subprocess.Process | None = None
        self.notifications: list[dict[str, Any]] = []
        self.server_requests: list[dict[str, Any]] = []
        self._pending: dict[int, asyncio.Future] = {}
        self._ids = itertools.count(1)
        self._changed = asyncio.Event()
        self._reader: asyncio.Task | None = None
        self.stderr_path: Path | None = None

    async def start(self, cwd: Path, stderr_path: Path, within: Path | None = None) -> None:
        """Start `trtls serve` in `cwd`; its stderr goes to `stderr_path`, written inside `within` (the scratch
        folder of the run; by default the log's own folder)."""
        self.stderr_path = stderr_path
        self._stderr = open_stream(stderr_path, kind=Kind.scratch, within=within or stderr_path.parent)
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "trtls",
            "serve",
            cwd=str(cwd),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=self._stderr,
        )
        self._reader = asyncio.ensure_future(self._read())

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def _send(self, msg: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        body = json.dumps(msg).encode()
        self.proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        out = self.proc.stdout
        try:
            while True:
                length = None
                while True:
                    line = await out.readline()
                    if not line:
                        return
                    line = line.strip()
                    if not line:
                        break
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                if length is None:
                    continue
                msg = parse_json(await out.readexactly(length))
                self._dispatch(msg)
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            for fut in self._pending.values():
                if not fut.done():
                    fut.set_exception(ConnectionError("the language server went away"))
            self._changed.set()

    def _dispatch(self, msg: dict[str, Any]) -> None:
        if "method" in msg and "id" in msg:  # a request from the server
            self.server_requests.append(msg)
            try:
                self._send({"jsonrpc": "2.0", "id": msg["id"], "result": None})
            except (ConnectionError, RuntimeError):
                pass
        elif "id" in msg:
            fut = self._pending.pop(msg["id"], None)
            if fut is not None and not fut.done():
                if "error" in msg:
                    fut.set_exception(RuntimeError(f"LSP error: {msg['error']}"))
                else:
                    fut.set_result(msg.get("result"))
        else:
            self.notifications.append(msg)
        self._changed.set()

    async def request(self, method: str, params: Any, timeout: float = 60.0) -> Any:
        rid = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        self._pending[rid] = fut
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        return await asyncio.wait_for(fut, timeout)

    def notify(self, method: str, params: Any) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 120.0) -> Any:
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while True:
            value = predicate()
            if value:
                return value
            left = end - loop.time()
            if left <= 0:
                raise TimeoutError("the language server did not send what was expected in time")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), min(left, 0.5))
            except TimeoutError:
                pass

    def of(self, method: str) -> list[dict[str, Any]]:
        return [n["params"] for n in self.notifications if n.get("method") == method and n.get("params") is not None]

    async def initialize(self, root: Path) -> None:
        uri = root.as_uri()
        await self.request(
            "initialize",
            {
                "processId": None,
                "rootUri": uri,
                "workspaceFolders": [{"uri": uri, "name": root.name}],
                "capabilities": {
                    "window": {"workDoneProgress": True},
                    "workspace": {"codeLens": {"refreshSupport": True}},
                },
                "initializationOptions": {"buildTree": True},
            },
        )
        self.notify("initialized", {})

    def build_trees(self, build_id: str) -> list[dict]:
        """Every `trtls/buildTree` notification received so far for one build."""
        return [t for t in self.of("trtls/buildTree") if t.get("buildId") == build_id]

    async def build_past_phase(self, ws: Path, engine: str, phases: int, timeout: float) -> tuple[str, int | None]:
        """Open the workspace's trtls.toml, start `trtls.buildEngine` for `engine` and wait until its live tree has
        more than `phases` phases; the build id and the worker pid from running.json (None when it has none)."""
        uri = (ws / "trtls.toml").as_uri()
        text = read_text(ws / "trtls.toml", limit=RECORD_LIMIT)
        self.notify(
            "textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "toml", "version": 1, "text": text}}
        )
        result = await self.request(
            "workspace/executeCommand",
            {"command": "trtls.buildEngine", "arguments": [{"uri": uri, "engine": engine}]},
        )
        build_id: str = result["buildId"]
        await self.wait_for(
            lambda: any(len(t.get("phases") or []) > phases for t in self.build_trees(build_id)), timeout=timeout
        )
        running = ws / ".trtls" / "runs" / build_id / "running.json"
        worker_pid = parse_json(read_text(running, limit=RECORD_LIMIT)).get("workerPid") if running.is_file() else None
        return build_id, worker_pid

    async def close(self, timeout: float = 30.0) -> None:
        """shutdown + exit; kill if the server does not go."""
        if self.proc is None:
            return
        if self.proc.returncode is None:
            try:
                await self.request("shutdown", None, timeout=timeout)
                self.notify("exit", None)
            except Exception:
                pass
            try:
                await asyncio.wait_for(self.proc.wait(), timeout)
            except TimeoutError:
                signal_child(self.proc, signal.SIGKILL)  # our own child, not yet reaped
                await self.proc.wait()
        if self._reader is not None:
            await asyncio.gather(self._reader, return_exceptions=True)
        self._stderr.close()
