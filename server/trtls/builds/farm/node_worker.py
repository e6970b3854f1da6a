"""The node side of a remote build: a Ray actor that runs the ordinary worker (`python -m trtls.builds.worker`)
in a process on its node and relays its protocol lines.

- `run` is a streaming generator: the worker's stdout, batched as it arrives (one Ray object per batch, not per
  line: the worker already coalesces steps to 50 ms, and a batch keeps Ray's per-object cost off the event path);
- `control` (a concurrent method: the actor has threads) writes a control line on the worker's stdin — a cancel
  travels exactly as it does locally; `close_stdin` is the protocol's service_shutdown;
- `signal_group` is the supervisor's escalation (SIGTERM, then SIGKILL to the worker's process group);
- if this actor dies (its driver died, it was killed), the worker's stdin closes: the worker cancels itself
  (docs/protocol.md), so no build outlives the driver that wanted it;
- the ONNX is cached on the node by sha256: it crosses the network once per content hash, not once per build;
- `engine_chunks` sends the finished engine back in pieces (the driver writes it atomically and checks its
  sha256), unless the recipe names a shared folder that the worker wrote to directly.

Imported only on the remote path (a recipe with `[cluster]`): this module imports Ray.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import ray

from trtls.core.atomic import atomic_write_bytes

CHUNK = 8 << 20
BATCH_WAIT_S = 0.005  # after a first line, wait this long for more to share one Ray object


def node_scratch(node_id: str) -> Path:
    """Per node (several test nodes share one /tmp): the ONNX cache and engines on their way back."""
    return Path(tempfile.gettempdir()) / "trtls-farm" / node_id[:16]


def _spawn(args: list[str]) -> subprocess.Popen:
    """Our worker (no args), or an external worker command when `args` is one."""
    return subprocess.Popen(
        args or [sys.executable, "-m", "trtls.builds.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group: escalation kills the group
    )


class Preloaded:
    """Our worker started before its job, importing `module` now (trtls.builds.farm.preloaded_worker); `info` is its
    report once the import ended: {"t", "importS", "modules", "pid"} (`ready` is set then, or when it died)."""

    def __init__(self, module: str) -> None:
        self.module = module
        r, w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "trtls.builds.farm.preloaded_worker", str(w), module],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                pass_fds=(w,),
            )
        finally:
            os.close(w)
        self.started = time.time()
        self.info: dict[str, Any] | None = None
        self.ready = threading.Event()
        threading.Thread(target=self._read, args=(r,), daemon=True).start()

    def _read(self, fd: int) -> None:
        with os.fdopen(fd, "rb") as fh:
            line = fh.readline()
        try:
            self.info = json.loads(line) if line else None
        except ValueError:
            self.info = None
        self.ready.set()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def fits(self, requested: str) -> bool:
        """This worker may build a job that asks for `requested` (builder_module)."""
        if requested == self.module:
            return True
        return self.info is not None and self.info.get("modules") == [requested]

    def report(self) -> dict[str, Any]:
        return {"pid": self.proc.pid, "module": self.module, "spawnedAt": self.started, **(self.info or {})}


def _discard(proc: subprocess.Popen) -> None:
    """A preloaded worker that gets no job: closing its input ends it (it exits without building); its group is
    killed if it does not."""
    try:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(2)
    except Exception:
        _kill_group(proc)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(5)
    except Exception:
        pass


def _alive(pid: int, start: int) -> bool:
    """The process `pid` that started at `start` (clock ticks since boot) still runs (a recycled pid does not)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] != "Z" and int(fields[19]) == start


def log_line(msg: str, severity: str = "INFO") -> str:
    return json.dumps({"v": 1, "type": "log", "t_ns": time.monotonic_ns(), "severity": severity, "msg": msg})


WATCH_DRIVER_S = 0.5  # a farm actor checks that the driver that claimed it still runs this often
DRIVER_GONE_GRACE_S = 10.0  # its driver gone: the worker cancels itself (stdin closed), or is killed after this


@ray.remote(max_concurrency=4)
class NodeWorker:
    def __init__(self, preload: str | None = None, farm: str | None = None) -> None:
        # The build's worker starts now and imports TensorRT (its largest fixed cost) while the driver learns
        # where this actor landed and the ONNX arrives, instead of after (as a local CLI build does: spawn.py).
        self.early: Preloaded | None = Preloaded(preload) if preload else None
        self.preload_module = preload
        # `farm`: this actor's name in the warm local farm (`trtls farm up` owns it). It outlives the runs that claim
        # it, so after each build it starts its next worker at once (TensorRT imported before the next job), and it
        # watches the driver that claimed it: a driver that dies (Ctrl-C, kill -9) cannot take it down with it.
        self.farm = farm
        self.claimed: dict[str, Any] | None = None
        self.claims = 0
        ctx = ray.get_runtime_context()
        self.node_id = ctx.get_node_id()
        self.scratch = node_scratch(self.node_id)
        self.proc: subprocess.Popen | None = None
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=40)
        self.lock = threading.Lock()
        self.job_dir: Path | None = None
        # control that arrived while the ONNX was still on its way (the worker not started yet): applied at start
        self.pending: list[str] = []
        self.stdin_closed = False

    # -- the warm farm's side: claim, release, health -----------------------------------------------
    def claim(self, driver: dict[str, Any]) -> dict[str, Any]:
        """A driver asks for this idle farm actor. Refused when another holds it, or when its preloaded worker died
        (the farm's head replaces such an actor: it is never used). {"ok": True, "where", "worker"} otherwise."""
        with self.lock:
            if self.claimed is not None:
                return {"ok": False, "why": "busy"}
            early = self.early
            if early is None or not early.alive():
                return {"ok": False, "why": "its preloaded worker died", "broken": True}
            self.claimed = dict(driver)
            self.claims += 1
        if driver.get("host") == socket.gethostname() and driver.get("pid"):
            threading.Thread(target=self._watch_driver, args=(self.claimed,), daemon=True).start()
        return {"ok": True, "where": self.where(), "worker": early.report(), "claims": self.claims}

    def release(self, token: str, kill: bool = False) -> bool:
        """The claim `token` ends: the last build's process group is gone (killed if `kill` or if it still runs),
        and a preloaded worker waits for the next job (started now if there is none)."""
        with self.lock:
            if self.claimed is None or self.claimed.get("token") != token:
                return False
            proc, self.proc = self.proc, None
            self.claimed = None
        if proc is not None and (kill or proc.poll() is None):
            _kill_group(proc)
        self.cleanup()
        self._ensure_preloaded()
        return True

    def health(self) -> dict[str, Any]:
        early = self.early
        return {
            "claimed": self.claimed is not None,
            "worker": "none" if early is None else "alive" if early.alive() else "dead",
            "preloaded": early is not None and early.info is not None,
            "pid": os.getpid(),
        }

    def shutdown(self) -> None:
        """The farm goes down: end this actor's processes (its preloaded worker, a build still running)."""
        with self.lock:
            procs = [p for p in (self.proc, self.early.proc if self.early else None) if p is not None]
            self.early = None
        for proc in procs:
            _kill_group(proc)

    def _ensure_preloaded(self) -> None:
        if self.farm and self.preload_module and (self.early is None or not self.early.alive()):
            self.early = Preloaded(self.preload_module)

    def _watch_driver(self, claim: dict[str, Any]) -> None:
        pid, start = int(claim["pid"]), int(claim.get("start") or 0)
        while self.claimed is claim:
            if not _alive(pid, start):
                self._driver_gone(claim)
                return
            time.sleep(WATCH_DRIVER_S)

    def _driver_gone(self, claim: dict[str, Any]) -> None:
        """As when a driver's own actor dies with it: stdin closes, the worker cancels itself; killed if it lingers."""
        self.close_stdin()
        proc = self.proc
        if proc is not None:
            try:
                proc.wait(DRIVER_GONE_GRACE_S)
            except subprocess.TimeoutExpired:
                pass
        if self.claimed is claim:
            self.release(str(claim.get("token")), kill=True)

    def where(self) -> dict[str, Any]:
        """Where this cell landed (for the evidence), answered once the actor is placed and constructed."""
        ctx = ray.get_runtime_context()
        labels = dict(ctx.get_node_labels() or {})
        return {
            "node_id": self.node_id,
            "hostname": socket.gethostname(),
            "labels": labels,
            "accelerator_type": labels.get("ray.io/accelerator-type"),
            "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
            "actor_pid": os.getpid(),
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),  # what the worker process inherits
        }

    def _onnx(self, sha: str, box: list) -> tuple[Path, str]:
        path = self.scratch / "onnx" / f"{sha}.onnx"
        if path.is_file():
            return path, f"trtls farm: ONNX {sha[:12]} already on this node (not sent again)"
        data: bytes = ray.get(box[0])
        got = hashlib.sha256(data).hexdigest()
        if got != sha:
            raise ValueError(f"the ONNX arrived damaged: sha256 {got[:12]} ≠ {sha[:12]}")
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, data)
        return path, f"trtls farm: ONNX {sha[:12]} received on this node ({len(data)} bytes)"

    def run(self, job: dict[str, Any], onnx_sha: str, onnx_box: list, shared_output: bool, command: list[str] | None):
        """Stream the worker's event lines: {"lines": [...]} batches, then {"exit": code, "stderr": [...]}."""
        t_job = time.time()
        with self.lock:  # a warm actor runs one build after another: nothing of the last one carries over
            self.proc, self.pending, self.stdin_closed = None, [], False
            self.stderr_tail.clear()
        onnx_path, note = self._onnx(onnx_sha, onnx_box)
        # wall-clock times (the driver turns them into its matrix's fixed-cost breakdown; one clock on one machine)
        timing: dict[str, Any] = {"jobT": t_job, "onnxT": time.time(), "actorPid": os.getpid(), "farm": self.farm}
        yield {"lines": [log_line(note)], "timing": timing}
        job = dict(job)
        self.job_dir = self.scratch / "jobs" / job["build_id"]
        self.job_dir.mkdir(parents=True, exist_ok=True)
        job["onnx"] = str(onnx_path)
        if not shared_output:
            job["output"] = str(self.job_dir / Path(job["output"]).name)
            job["write_root"] = str(self.job_dir)  # the node writes into its own scratch folder, not the recipe's
        job["quarantine_dir"] = str(self.scratch / "quarantine")
        job["timing_cache"] = None  # a cache lives with the recipe; it is not shipped (TensorRT-RTX: a no-op)
        early, self.early = self.early, None
        usable = early is not None and early.alive() and not command
        if early is not None and not (usable and early.fits(str(job.get("builder_module", "auto")))):
            _discard(early.proc)  # another module (or an external worker) was asked for after all
            early = None
        preloaded_before_job = early is not None and early.info is not None
        with self.lock:  # the job line is written before any control line can be
            argv = [sys.executable if part == "{python}" else part for part in command or []]
            self.proc = early.proc if early else _spawn(argv)
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write((json.dumps(job) + "\n").encode())
            for line in self.pending:
                self.proc.stdin.write(line.encode())
            self.proc.stdin.flush()
            if self.stdin_closed:
                self.proc.stdin.close()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        fd = self.proc.stdout.fileno()
        pending = b""
        reported = False
        while True:
            select.select([fd], [], [])
            chunk = os.read(fd, 1 << 16)
            if chunk:
                time.sleep(BATCH_WAIT_S)  # let a burst (phase finish + start) share one object
                more = select.select([fd], [], [], 0)[0]
                while more:
                    extra = os.read(fd, 1 << 16)
                    if not extra:
                        break
                    chunk += extra
                    more = select.select([fd], [], [], 0)[0]
            pending += chunk
            *lines, pending = pending.split(b"\n")
            if lines:
                batch: dict[str, Any] = {"lines": [ln.decode() for ln in lines if ln]}
                if not reported:  # the worker speaks: its builder import (if preloaded) has been reported
                    reported = True
                    if early is not None:
                        early.ready.wait(1.0)
                    batch["timing"] = {
                        "worker": early.report() if early else {"pid": self.proc.pid, "preloaded": False},
                        "preloadedBeforeJob": preloaded_before_job,
                    }
                yield batch
            if not chunk:
                break
        code = self.proc.wait()
        self._ensure_preloaded()  # a farm actor: the next job's worker imports TensorRT now, not when it comes
        yield {"exit": code, "stderr": list(self.stderr_tail)}

    def _read_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.stderr_tail.append(raw.decode(errors="replace").rstrip())

    def control(self, line: str) -> bool:
        with self.lock:
            proc = self.proc
            if proc is None:
                self.pending.append(line)
                return True
        if proc.stdin is None or proc.poll() is not None:
            return False
        try:
            proc.stdin.write(line.encode())
            proc.stdin.flush()
            return True
        except (BrokenPipeError, ValueError):
            return False

    def close_stdin(self) -> None:
        with self.lock:
            self.stdin_closed = True
            proc = self.proc
        if proc is not None and proc.stdin is not None:
            try:
                proc.stdin.close()
            except OSError:
                pass

    def signal_group(self, signum: int) -> bool:
        with self.lock:
            proc = self.proc
        if proc is None or proc.poll() is not None:
            return False
        try:
            os.killpg(proc.pid, signal.Signals(signum))
            return True
        except ProcessLookupError:
            return False

    def engine_chunks(self, path: str):
        """The built engine in pieces; the node's copy is removed once sent."""
        with open(path, "rb") as fh:
            while chunk := fh.read(CHUNK):
                yield chunk
        self.cleanup()

    def cleanup(self) -> None:
        if self.job_dir is not None:
            shutil.rmtree(self.job_dir, ignore_errors=True)
