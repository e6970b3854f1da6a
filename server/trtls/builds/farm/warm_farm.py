"""A warm local farm: one persistent local Ray head (`trtls farm up`) that every `address = "local"` run on this
machine reuses instead of starting an embedded instance (the CLI's `trtls build --matrix`, the language server).

The head is our own process (`python -m trtls.builds.farm.warm_head`): it starts an embedded Ray instance, writes
the state file below once the instance answers, and on SIGTERM shuts down exactly the Ray processes it started
(`ray stop` would stop every Ray instance of this user on the machine, the test clusters of other runs included).

Discovery (`find`): the state file under the user's cache folder names the head's pid and GCS address; the head is
used only when that pid proves to be our head (its start id, and the nonce `start` passed to it alone in
`fs.kill.NONCE_ENV`), its GCS is on 127.0.0.1 and answers, and its labels include the recipe's `[cluster] labels` —
anything else falls back to an embedded instance (`connect` says which). `stop` signals the head only when it
proves to be that head (a planted state file names someone else's process: left alone, and said so).

The farm is secured like every local instance (`local_guard`): on loopback only, token authentication on, its token
in `farm.token` (0600) beside the state file (0600), and a driver authenticates with that file. No Ray import here:
the CLI's `farm status` answers without loading Ray.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from trtls import fs
from trtls.builds.farm import local_guard
from trtls.core.paths import user_cache_dir
from trtls.fs import Kind, ProcessProof, parse_json, read_bytes, read_text
from trtls.fs.kill import NONCE_ENV, new_nonce, process_alive
from trtls.fs.stream import open_stream

HEAD_MODULE = "trtls.builds.farm.warm_head"
STATE_LIMIT = 64 << 10  # a state file is a few hundred bytes; anything larger is not ours


def state_path() -> Path:
    """`$TRTLS_FARM_STATE`, else `$XDG_CACHE_HOME/trtls/farm.json` (default `~/.cache/trtls/farm.json`; a relative
    XDG_CACHE_HOME is ignored: core.paths.user_cache_dir)."""
    if env := os.environ.get("TRTLS_FARM_STATE"):
        return Path(env)
    return user_cache_dir() / "farm.json"


def token_path() -> Path:
    return state_path().with_suffix(".token")


def log_path() -> Path:
    """The head's log beside the state file (appended to by each `farm up`; its every run begins `LOG_MARK`)."""
    return state_path().with_suffix(".log")


LOG_MARK = "trtls farm"  # how each run's part of the log begins (the head's own lines say "trtls farm: …")


def state_folder() -> Path:
    """The state file's folder, created (0700) when missing, never through a symlink below what exists: the real
    folder every farm file is written in."""
    folder = state_path().parent
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    return fs.ensure_folder(folder, within=existing, mode=0o700)


@dataclass(frozen=True)
class WarmHead:
    address: str  # GCS host:port (127.0.0.1: a local farm listens on loopback only)
    pid: int
    num_cpus: int
    labels: dict[str, str]
    started_at: float
    session_dir: str = ""
    auth_mode: str = ""  # RAY_AUTH_MODE the head runs with: "token"
    workers: int = 0  # preloaded workers (TensorRT imported) the farm's node host keeps idle (farm_actors.FarmHost)
    token_path: str = ""  # the farm's token (0600): a driver authenticates with it (RAY_AUTH_TOKEN_PATH)
    start_id: str = ""  # the head's start id (fs.kill.process_start_id): a reused pid is another process
    nonce: str = ""  # passed to the head alone in its environment (fs.kill.NONCE_ENV): proves the pid is our head

    def describe(self) -> str:
        labels = ", ".join(f"{k}={v}" for k, v in self.labels.items()) or "no labels"
        return (
            f"warm local farm at {self.address} (trtls farm up, pid {self.pid}; {self.num_cpus} CPUs; "
            f"{self.workers} preloaded workers on its node host; {labels})"
        )

    def proof(self) -> ProcessProof:
        return ProcessProof(self.pid, self.start_id or None, self.nonce or None)


def read_state(path: Path | None = None) -> WarmHead | None:
    try:
        data = parse_json(read_text(path or state_path(), limit=STATE_LIMIT, follow=False))
        return WarmHead(
            str(data["address"]),
            int(data["pid"]),
            int(data["num_cpus"]),
            {str(k): str(v) for k, v in dict(data.get("labels") or {}).items()},
            float(data.get("started_at") or 0.0),
            str(data.get("session_dir") or ""),
            str(data.get("auth_mode") or ""),
            int(data.get("workers") or 0),
            str(data.get("token_path") or ""),
            str(data.get("start_id") or ""),
            str(data.get("nonce") or ""),
        )
    except (OSError, ValueError, KeyError, TypeError, OverflowError):  # OverflowError: "pid": Infinity
        return None


def write_state(head: WarmHead) -> None:
    """The state file (0600: it names the token file and carries the head's nonce)."""
    fs.atomic_write_text(
        state_path(), json.dumps(asdict(head), indent=2) + "\n", kind=Kind.farm_state, within=state_folder(), mode=0o600
    )


def forget(head: WarmHead) -> None:
    """Remove the state and token files of `head` (only while the state file still names it)."""
    current = read_state()
    if current is None or (current.pid, current.nonce) != (head.pid, head.nonce):
        return
    folder = state_folder()
    for path in (state_path(), token_path()):
        fs.remove_file(path, kind=Kind.farm_state, within=folder)


def is_our_head(pid: int) -> bool:
    """The pid is alive and runs the warm head's module (a recycled pid of another program is not)."""
    try:
        cmdline = read_bytes(f"/proc/{pid}/cmdline", limit=None, follow=True).split(b"\0")
    except OSError:
        return False
    return HEAD_MODULE.encode() in cmdline


def gcs_answers(address: str, timeout_s: float = 1.0) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host or local_guard.LOOPBACK, int(port)), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


def unusable(head: WarmHead) -> str | None:
    """Why a run must not use this head (None: use it)."""
    if local_guard.host_of(head.address) != local_guard.LOOPBACK:
        return f"its GCS address {head.address} is not on 127.0.0.1 (a local farm listens on loopback only)"
    why = fs.prove(head.proof())
    if why is not None or not is_our_head(head.pid):
        return f"it is not running ({why or 'pid ' + str(head.pid) + ' is not the farm head'})"
    if head.auth_mode != "token" or not head.token_path:
        return "it runs without token authentication (an older trtls started it): trtls farm down, then up"
    if not gcs_answers(head.address):
        return f"its GCS at {head.address} does not answer"
    return None


def alive(head: WarmHead) -> bool:
    return unusable(head) is None


def find(labels: dict[str, str] | None = None) -> tuple[WarmHead | None, str]:
    """(the warm head to use, or None; why) for a local run whose `[cluster]` asks for `labels`."""
    head = read_state()
    if head is None:
        return None, "no warm local farm (trtls farm up): an embedded instance for this run"
    why = unusable(head)
    if why is not None:
        return None, f"the warm local farm in {state_path()} is not used: {why}; an embedded instance"
    missing = {k: v for k, v in (labels or {}).items() if head.labels.get(k) != v}
    if missing:
        shown = ", ".join(f"{k}={v}" for k, v in missing.items())
        return None, f"the warm local farm lacks the recipe's labels ({shown}): an embedded instance for this run"
    return head, head.describe()


def refuse_unshareable(path: Path) -> None:
    """RuntimeError for a state path the state, its token and its log cannot share: a relative one (each command
    would look for the farm in the folder it runs in) or one ending `.token` or `.log` (the state would be its own
    token or log, and the token written over it)."""
    if not path.is_absolute():
        raise RuntimeError(
            f"TRTLS_FARM_STATE={path} is a relative path: each command would look for the farm in the folder it runs "
            "in; give an absolute path"
        )
    if path.suffix in (".token", ".log"):
        raise RuntimeError(
            f"TRTLS_FARM_STATE={path} ends in {path.suffix}: the farm's state, its token and its log would be one "
            "file; name the state file otherwise (farm.json)"
        )


def up_lock() -> Any:
    """Held by `trtls farm up` from its look at the state to the new head's state written: two at once start one
    head (the second waits, then finds it running), never two heads of which the state file names one. A state path
    `refuse_unshareable` refuses is refused before the lock beside it is made."""
    refuse_unshareable(state_path())
    return fs.held_lock(
        state_path().with_name(state_path().name + ".lock"), kind=Kind.farm_state, within=state_folder()
    )


def refuse_foreign(path: Path) -> None:
    """RuntimeError when the state path (`$TRTLS_FARM_STATE`) or the token or log path beside it holds a file that is
    not the farm's own (a recipe, a user's JSON, a user's `notes.log` beside `notes.json`): `farm up` would replace
    the state and token and append the head's output to the log, and `farm down` remove the state and token. A log
    is the farm's when it is empty or begins `LOG_MARK`."""
    refuse_unshareable(path)
    if os.path.lexists(path) and read_state(path) is None:
        raise RuntimeError(
            f"{path} is there but is not a trtls farm state file: it is left as it is (unset "
            "TRTLS_FARM_STATE or point it at a path of its own)"
        )
    token = token_path()
    try:
        ours = re.fullmatch(r"[0-9a-f]{64}", read_text(token, limit=256, follow=False)) is not None
    except FileNotFoundError:
        ours = True
    except (OSError, ValueError):
        ours = False
    if not ours:
        raise RuntimeError(f"{token} is there but is not a trtls farm token: it is left as it is")
    log = log_path()
    try:
        with fs.open_regular(log, limit=None, follow=False) as handle:
            ours = handle.read(len(LOG_MARK)) in (b"", LOG_MARK.encode())
    except FileNotFoundError:
        ours = True
    except (OSError, ValueError):
        ours = False
    if not ours:
        raise RuntimeError(
            f"{log} is there but is not a trtls farm log: it is left as it is (unset TRTLS_FARM_STATE or point it at "
            "a path of its own)"
        )


def start(num_cpus: int, labels: dict[str, str], wait_s: float = 600.0, workers: int | None = None) -> WarmHead:
    """Start the head in its own session (it outlives this command) and wait until it has written its state. The
    farm's token is written first (0600); the head gets it, and a nonce of its own, in its environment."""
    path = state_path()
    folder = state_folder()
    refuse_foreign(path)
    fs.remove_file(path, kind=Kind.farm_state, within=folder)
    token = token_path()
    local_guard.write_token(token, folder)
    nonce = new_nonce()
    env = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_TOKEN"}
    env.update(local_guard.token_env(folder / token.name), **{NONCE_ENV: nonce})
    log = log_path()
    with open_stream(log, kind=Kind.farm_state, within=folder, truncate=False, mode=0o600) as out:
        out.write(f"{LOG_MARK} up at {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n".encode())
        out.flush()
        proc = subprocess.Popen(
            [sys.executable, "-m", HEAD_MODULE, "--num-cpus", str(num_cpus), "--labels", json.dumps(labels)]
            + ([] if workers is None else ["--workers", str(workers)]),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=out,
            env=env,
            start_new_session=True,  # Ctrl-C of `trtls farm up` or its terminal closing does not end the farm
        )
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        head = read_state(path)
        if head is not None and head.pid == proc.pid and head.nonce == nonce:
            return head
        if proc.poll() is not None:
            raise RuntimeError(f"the warm farm's head exited with {proc.returncode} (log: {log})")
        time.sleep(0.1)
    fs.signal_child(proc, signal.SIGTERM)
    raise RuntimeError(f"the warm farm's head did not answer within {wait_s:g} s (log: {log})")


def stop(head: WarmHead, wait_s: float = 60.0) -> str | None:
    """SIGTERM to the head (it shuts down the Ray processes it started), then SIGKILL to its group if it lingers —
    only when the pid proves to be that head. None when it is gone; else why nothing (more) was done."""
    if not process_alive(head.pid) or not is_our_head(head.pid):
        forget(head)  # gone, or its pid now runs another program: nothing to signal
        return None
    why = fs.signal_proven(head.proof(), signal.SIGTERM)
    if why is not None:
        return (
            f"pid {head.pid} runs {HEAD_MODULE} but cannot be proved to be the farm in {state_path()} ({why}); "
            "nothing was signalled — stop it yourself if it is yours"
        )
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if fs.prove(head.proof()) is not None:
            forget(head)
            return None
        time.sleep(0.1)
    fs.signal_proven(head.proof(), signal.SIGKILL, group=True)
    forget(head)
    return None if fs.prove(head.proof()) is not None else f"the head (pid {head.pid}) did not stop"


def status() -> dict[str, Any]:
    head = read_state()
    if head is None:
        return {"running": False, "state": str(state_path())}
    shown = {k: v for k, v in asdict(head).items() if k != "nonce"}
    return {"running": alive(head), "state": str(state_path()), **shown}
