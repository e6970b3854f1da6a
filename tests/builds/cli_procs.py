"""Real `trtls build` processes for the concurrency and kill tests: started with `--json`, their stdout read on a
thread so a test can wait for a given line (an event, the waiting line, the summary) without sleeping."""

from __future__ import annotations

import hashlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any


class CliBuild:
    def __init__(self, ws: Path, engine: str, *extra: str, env: dict[str, str] | None = None):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "trtls", "build", str(ws), "--engine", engine, "--json", *extra],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **(env or {})},
        )
        self.lines: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.seen: list[dict[str, Any]] = []
        self.stderr = ""
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self.lines.put(json.loads(line))
            except ValueError:
                continue
        self.lines.put(None)

    def wait_for(self, predicate, timeout: float = 300) -> dict[str, Any]:
        """The first line (past or future) that `predicate` accepts; fails if the process ends first."""
        for line in self.seen:
            if predicate(line):
                return line
        deadline = time.monotonic() + timeout
        while True:
            line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            if line is None:
                raise AssertionError(f"process ended before the line; stderr: {self.stderr_text()[-2000:]}")
            self.seen.append(line)
            if predicate(line):
                return line

    def summary(self, timeout: float = 300) -> dict[str, Any]:
        return self.wait_for(lambda ln: ln.get("type") == "summary", timeout)["summary"]

    def finish(self, timeout: float = 300) -> int:
        return self.proc.wait(timeout=timeout)

    def interrupt(self) -> None:
        self.proc.send_signal(signal.SIGINT)

    def stderr_text(self) -> str:
        if self.proc.poll() is not None and self.proc.stderr is not None and not self.stderr:
            self.stderr = self.proc.stderr.read()
        return self.stderr

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def is_phase_start(line: dict[str, Any]) -> bool:
    return line.get("type") == "phase_start"


def is_waiting_line(line: dict[str, Any]) -> bool:
    return line.get("type") == "log" and "waiting for build" in str(line.get("msg"))


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def share_output(ws: Path, engine: str = "large", output: str = "build/demo.engine") -> None:
    """Make `engine` write the same output as `demo` (the recipe copy is the test's own)."""
    recipe = ws / "trtls.toml"
    text = recipe.read_text()
    old = f'output = "build/{engine}.engine"'
    assert old in text
    recipe.write_text(text.replace(old, f'output = "{output}"'))


def pause_env(folder: Path, point: str) -> dict[str, str]:
    """The worker's test hook (fs/hold.test_pause): stop at `point` until released or no longer wanted."""
    folder.mkdir(parents=True, exist_ok=True)
    return {"TRTLS_TEST_PAUSE": f"{point}:{folder}"}


def wait_for_file(folder: Path, suffix: str, timeout: float = 300) -> Path:
    """The marker a paused worker writes (`<build id>.<point>`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = sorted(folder.glob(f"*{suffix}"))
        if found:
            return found[0]
        time.sleep(0.02)
    raise AssertionError(f"no {suffix} marker in {folder}")


def wait_for_bound(ws: Path, engine: str, build_id: str = "*", timeout: float = 300) -> Path:
    """The build's `running.json` (its supervisor has it: builds/supervisor/running_record.py): from here a Ctrl-C is
    the build's own stop, with its evidence. A job can reach its worker before — a changed recipe's checked job goes
    as soon as the recipe is checked, before the lookup (app/request.py) — and a stop then ends the request with
    nothing built and nothing written (docs/architecture.md), so a test of a bound build's stop waits for this too."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = sorted((ws / ".trtls" / "runs").glob(f"{build_id if build_id != '*' else engine + '-*'}/running.json"))
        if found:
            return found[0]
        time.sleep(0.02)
    raise AssertionError(f"no running.json of {engine} {build_id} under {ws}")
