"""What the supervisor drives as a build's worker: a local worker process (asyncio's Process) or a farm cell
(trtls.builds.farm.remote_process.RemoteProcess) — one protocol, so the supervisor's loop never asks which."""

from __future__ import annotations

import asyncio
from typing import Protocol


class WorkerStdin(Protocol):
    def write(self, data: bytes) -> None: ...
    def close(self) -> None: ...
    def is_closing(self) -> bool: ...


class WorkerProcess(Protocol):
    """What the supervisor drives: a local worker (asyncio's Process) or a farm cell
    (trtls.builds.farm.remote_process.RemoteProcess, whose stdin forwards control lines to its node)."""

    @property
    def pid(self) -> int | None: ...
    @property
    def returncode(self) -> int | None: ...
    @property
    def stdin(self) -> WorkerStdin | None: ...
    @property
    def stdout(self) -> asyncio.StreamReader | None: ...
    @property
    def stderr(self) -> asyncio.StreamReader | None: ...
    async def wait(self) -> int: ...
