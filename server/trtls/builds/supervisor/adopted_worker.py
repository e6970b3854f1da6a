"""A worker started before the event loop, driven by the supervisor like any other (`WorkerProcess`).

`trtls build` of an unchanged recipe whose engine the store lacks learns it inside the store's fast path, before the
command line's parser, asyncio and the build's modules are imported (~0.1–0.2 s): the worker is started right there
with `subprocess` (`worker_launch.start_now`), gets its job ahead (builds/supervisor/speculation.py), and is adopted
here once the event loop runs: its pipes read through asyncio's streams, its end awaited through a pidfd (a thread
where the kernel has none). Standard library only."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
from typing import IO

READ_LIMIT = 1 << 24  # as spawn_worker's: one event line may carry a large phase tree or capability answer


class PipeStdin:
    """The worker's stdin as the supervisor writes it (`WorkerStdin`): small lines, written whole; a worker that is
    gone takes nothing and raises nothing (as asyncio's writer)."""

    def __init__(self, pipe: IO[bytes]) -> None:
        self.pipe = pipe

    def write(self, data: bytes) -> None:
        if self.pipe.closed:
            return
        try:
            self.pipe.write(data)
            self.pipe.flush()
        except (BrokenPipeError, ConnectionResetError, ValueError):
            with contextlib.suppress(OSError):
                self.pipe.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.pipe.close()

    def is_closing(self) -> bool:
        return self.pipe.closed


class AdoptedWorker:
    """A `subprocess.Popen` worker behind the supervisor's WorkerProcess protocol (`adopt` makes one)."""

    def __init__(self, popen: subprocess.Popen[bytes], stdout: asyncio.StreamReader, stderr: asyncio.StreamReader):
        assert popen.stdin is not None
        self.popen = popen
        self._stdin = PipeStdin(popen.stdin)
        self._stdout, self._stderr = stdout, stderr
        self._ended: asyncio.Future[int] | None = None

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        return self.popen.returncode

    @property
    def stdin(self) -> PipeStdin:
        return self._stdin

    @property
    def stdout(self) -> asyncio.StreamReader:
        return self._stdout

    @property
    def stderr(self) -> asyncio.StreamReader:
        return self._stderr

    async def wait(self) -> int:
        if self.popen.returncode is not None:
            return self.popen.returncode
        if self._ended is None:
            self._ended = asyncio.ensure_future(self._reap())
        return await asyncio.shield(self._ended)

    async def _reap(self) -> int:
        loop = asyncio.get_running_loop()
        try:
            fd = os.pidfd_open(self.popen.pid)
        except (AttributeError, OSError):  # no pidfd here (or already reaped): a thread waits
            return await loop.run_in_executor(None, self.popen.wait)
        ended = loop.create_future()

        def readable() -> None:
            loop.remove_reader(fd)
            if not ended.done():
                ended.set_result(None)

        loop.add_reader(fd, readable)
        try:
            await ended
        finally:
            loop.remove_reader(fd)
            os.close(fd)
        return self.popen.wait()


async def adopt(popen: subprocess.Popen[bytes]) -> AdoptedWorker:
    """The worker `popen` (pipes on stdin, stdout and stderr), its output read by the running loop from now on."""
    loop = asyncio.get_running_loop()
    readers = []
    for pipe in (popen.stdout, popen.stderr):
        reader = asyncio.StreamReader(limit=READ_LIMIT, loop=loop)
        protocol = asyncio.StreamReaderProtocol(reader, loop=loop)
        await loop.connect_read_pipe(lambda p=protocol: p, pipe)  # type: ignore[misc]
        readers.append(reader)
    return AdoptedWorker(popen, readers[0], readers[1])
