"""A warm local farm: one persistent local Ray head (`trtls farm up`) that every `address = "local"` run on this
machine reuses instead of starting an embedded instance (the CLI's `trtls build --matrix`, the language server).

The head is our own process (`python -m trtls.builds.farm.warm_head`): it starts an embedded Ray instance, writes
the state file below once the instance answers, and on SIGTERM shuts down exactly the Ray processes it started
(`ray stop` would stop every Ray instance of this user on the machine, the test clusters of other runs included).

Discovery (`find`): the state file under the user's cache folder names the head's pid and GCS address; the head is
used only when that pid is alive and is our head, its GCS port accepts a connection and its labels include the
recipe's `[cluster] labels` — anything else falls back to an embedded instance (`connect` says which). No Ray
import here: the CLI's `farm status` answers without loading Ray.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trtls.core.atomic import atomic_write_text

HEAD_MODULE = "trtls.builds.farm.warm_head"


def state_path() -> Path:
    """`$TRTLS_FARM_STATE`, else `$XDG_CACHE_HOME/trtls/farm.json` (default `~/.cache/trtls/farm.json`)."""
    if env := os.environ.get("TRTLS_FARM_STATE"):
        return Path(env)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "trtls" / "farm.json"


@dataclass(frozen=True)
class WarmHead:
    address: str  # GCS host:port
    pid: int
    num_cpus: int
    labels: dict[str, str]
    started_at: float
    session_dir: str = ""
    auth_mode: str = ""  # RAY_AUTH_MODE the head runs with ("token": a driver must send ~/.ray/auth_token)
    workers: int = 0  # preloaded workers (TensorRT imported) the farm's node host keeps idle (farm_actors.FarmHost)

    def describe(self) -> str:
        labels = ", ".join(f"{k}={v}" for k, v in self.labels.items()) or "no labels"
        return (
            f"warm local farm at {self.address} (trtls farm up, pid {self.pid}; {self.num_cpus} CPUs; "
            f"{self.workers} preloaded workers on its node host; {labels})"
        )


def read_state(path: Path | None = None) -> WarmHead | None:
    try:
        data = json.loads((path or state_path()).read_text())
        return WarmHead(
            str(data["address"]),
            int(data["pid"]),
            int(data["num_cpus"]),
            {str(k): str(v) for k, v in dict(data.get("labels") or {}).items()},
            float(data.get("started_at") or 0.0),
            str(data.get("session_dir") or ""),
            str(data.get("auth_mode") or ""),
            int(data.get("workers") or 0),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_state(head: WarmHead, path: Path | None = None) -> None:
    target = path or state_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(target, json.dumps(head.__dict__, indent=2) + "\n")


def is_our_head(pid: int) -> bool:
    """The pid is alive and runs the warm head (a recycled pid of another program is not our head)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return HEAD_MODULE.encode() in cmdline


def gcs_answers(address: str, timeout_s: float = 1.0) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


def alive(head: WarmHead) -> bool:
    return is_our_head(head.pid) and gcs_answers(head.address)


def find(labels: dict[str, str] | None = None) -> tuple[WarmHead | None, str]:
    """(the warm head to use, or None; why) for a local run whose `[cluster]` asks for `labels`."""
    head = read_state()
    if head is None:
        return None, "no warm local farm (trtls farm up): an embedded instance for this run"
    if not alive(head):
        return None, f"the warm local farm in {state_path()} is not running (pid {head.pid}): an embedded instance"
    missing = {k: v for k, v in (labels or {}).items() if head.labels.get(k) != v}
    if missing:
        shown = ", ".join(f"{k}={v}" for k, v in missing.items())
        return None, f"the warm local farm lacks the recipe's labels ({shown}): an embedded instance for this run"
    return head, head.describe()


def start(num_cpus: int, labels: dict[str, str], wait_s: float = 600.0, workers: int | None = None) -> WarmHead:
    """Start the head in its own session (it outlives this command) and wait until it has written its state."""
    path = state_path()
    path.unlink(missing_ok=True)
    log = path.with_suffix(".log")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", HEAD_MODULE, "--num-cpus", str(num_cpus), "--labels", json.dumps(labels)]
            + ([] if workers is None else ["--workers", str(workers)]),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            start_new_session=True,  # Ctrl-C of `trtls farm up` or its terminal closing does not end the farm
        )
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        head = read_state(path)
        if head is not None and head.pid == proc.pid:
            return head
        if proc.poll() is not None:
            raise RuntimeError(f"the warm farm's head exited with {proc.returncode} (log: {log})")
        time.sleep(0.1)
    proc.terminate()
    raise RuntimeError(f"the warm farm's head did not answer within {wait_s:g} s (log: {log})")


def stop(head: WarmHead, wait_s: float = 60.0) -> bool:
    """SIGTERM to the head (it shuts down the Ray processes it started), then SIGKILL to its group if it lingers.
    True when it is gone."""
    if not is_our_head(head.pid):
        state_path().unlink(missing_ok=True)
        return True
    os.kill(head.pid, signal.SIGTERM)
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if not is_our_head(head.pid):
            state_path().unlink(missing_ok=True)
            return True
        time.sleep(0.1)
    try:
        os.killpg(head.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    state_path().unlink(missing_ok=True)
    return not is_our_head(head.pid)


def status() -> dict[str, Any]:
    head = read_state()
    if head is None:
        return {"running": False, "state": str(state_path())}
    return {"running": alive(head), "state": str(state_path()), **head.__dict__}
