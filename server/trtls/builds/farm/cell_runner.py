"""One cell on its node: the ordinary worker (`python -m trtls.builds.worker`) in its own process group, its protocol
lines relayed in batches, its stdin the control channel. Plain Python (no Ray import): the node's actor hosts it —
`node_host.NodeHost` (one actor per node runs every CPU-only cell placed there) or `node_worker.NodeWorker` (one actor
per cell that holds a GPU).

- `run` is a generator: the worker's stdout, batched as it arrives (one Ray object per batch, not per line: the
  worker already coalesces steps to 50 ms, and a batch keeps Ray's per-object cost off the event path);
- `control` writes a control line on the worker's stdin — a cancel travels exactly as it does locally — and a cancel
  (or stdin closed, or the cell's end) sets the cell's cancel state (`stop`), which cuts the node's store lookup
  and the engine's upload;
  `close_stdin` is the protocol's service_shutdown; `signal_group` is the supervisor's escalation;
- the ONNX is cached on the node by sha256: it crosses the network once per content hash, not once per build;
- with the driver's remote-store plan, the key is looked up first (`look_up`): a hit sends the verified engine back
  with no ONNX, no worker and no TensorRT here (node_store.py), a built engine is published from here;
- `engine_chunks` sends the finished engine back in pieces (the driver writes it atomically and checks its sha256),
  unless the recipe names a shared folder that the worker wrote to directly.
"""

from __future__ import annotations

import collections
import errno
import hashlib
import json
import os
import secrets
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from trtls import fs
from trtls.builds.farm.builder_env import builder_environment, spawn_worker
from trtls.builds.farm.node_scratch import node_scratch, scratch_folder
from trtls.core.cancel import CancelToken
from trtls.core.paths import UnsafeWrite, inside, real
from trtls.fs import Kind, parse_json
from trtls.fs.descriptor import file_of

CHUNK = 8 << 20
BATCH_WAIT_S = 0.005  # after a first line, wait this long for more to share one Ray object
WATCH_DRIVER_S = 0.5  # a farm's node host checks that the driver of a cell still runs this often
DRIVER_GONE_GRACE_S = 10.0  # its driver gone: the worker cancels itself (stdin closed), or is killed after this
_onnx_locks: collections.defaultdict[str, threading.Lock] = collections.defaultdict(threading.Lock)


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
                env=builder_environment(),
            )
        finally:
            os.close(w)
        self.started = time.time()
        self.info: dict[str, Any] | None = None
        self.ready = threading.Event()
        threading.Thread(target=self._read, args=(r,), daemon=True).start()

    def _read(self, fd: int) -> None:
        with file_of(fd, "rb") as fh:
            line = fh.readline()
        try:
            self.info = parse_json(line) if line else None
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


def discard(proc: subprocess.Popen) -> None:
    """A preloaded worker that gets no job: closing its input ends it (it exits without building); its group is
    killed if it does not."""
    try:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(2)
    except Exception:
        fs.end_child(proc)  # our child, leader of its own group


def pid_alive(pid: int, start: int) -> bool:
    """The process `pid` that started at `start` (clock ticks since boot) still runs (a recycled pid does not)."""
    from trtls.builds.farm.proc_tree import read

    now = read(pid)  # None for a zombie
    return now is not None and now.start == start


def driver_token(build_id: str) -> dict[str, Any]:
    """Who sends a cell to the warm farm's host (it outlives drivers, so it watches this one's pid and start time)."""
    from trtls.builds.farm.proc_tree import read

    me = read(os.getpid())
    return {
        "token": f"{build_id}-{secrets.token_hex(4)}",
        "pid": os.getpid(),
        "start": me.start if me else 0,
        "host": socket.gethostname(),
        "build": build_id,
    }


def log_line(msg: str, severity: str = "INFO") -> str:
    return json.dumps({"v": 1, "type": "log", "t_ns": time.monotonic_ns(), "severity": severity, "msg": msg})


class CellRun:
    """One cell's worker on this node. `early`: a worker already started (preloaded) for it, or None; `fetch` turns
    the driver's boxed ONNX object ref into bytes (ray.get, done by the actor that hosts this)."""

    def __init__(self, node_id: str, early: Preloaded | None, fetch: Callable[[Any], bytes], farm: str | None = None):
        self.scratch = node_scratch(node_id)
        self.node_id = node_id
        self.early = early
        self.fetch = fetch
        self.farm = farm
        self.proc: subprocess.Popen | None = None
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=40)
        self.lock = threading.Lock()
        self.job_dir: Path | None = None
        # control that arrived while the ONNX was still on its way (the worker not started yet): applied at start
        self.pending: list[str] = []
        self.stdin_closed = False
        self.node = f"{socket.gethostname()} ({node_id[:12]})"
        self.looked, self.said = False, ""  # the node's own store lookup (builds/farm/node_store.py): done, its line
        self.hit: Any = None  # the key's entry (trtls.store.entries.Entry) when the remote store held it
        # the cell's cancel state here: the driver's cancel line, its stdin closed, the cell's end. It cuts the node's
        # lookup of the key in the remote store (no worker runs then to take a cancel line) and its upload of the
        # engine at once (the worker said it built by then: a cancel line to it stops nothing, and the upload ran to
        # its bound, then sent the record)
        self.stop = CancelToken()

    def look_up(self, plan: dict[str, Any]) -> bool:
        """Look the cell's key up in the remote store (`plan`: the driver's, builds/farm/node_store.py) before any
        worker starts here; True on a hit: the cell is served without one. The cell's cancel state (`stop`) cuts it:
        its host registers the cell before it looks up, so a stop of the cell reaches the lookup."""
        from trtls.builds.farm.node_store import look_up_on_node

        self.looked = True
        self.hit, self.said = look_up_on_node(plan, self.scratch, self.node, self.stop)
        return self.hit is not None

    def _onnx(self, sha: str, box: list) -> tuple[Path, str]:
        path = self.scratch / "onnx" / f"{sha}.onnx"
        with _onnx_locks[sha]:  # two cells of one host: the second finds the first one's copy
            if path.is_file():
                return path, f"trtls farm: ONNX {sha[:12]} already on this node (not sent again)"
            data: bytes = self.fetch(box[0])
            got = hashlib.sha256(data).hexdigest()
            if got != sha:
                raise ValueError(f"the ONNX arrived damaged: sha256 {got[:12]} ≠ {sha[:12]}")
            folder = scratch_folder(path.parent, self.scratch)
            fs.atomic_write_bytes(path, data, kind=Kind.cache, within=folder)
        return path, f"trtls farm: ONNX {sha[:12]} received on this node ({len(data)} bytes)"

    def run(
        self,
        job: dict[str, Any],
        onnx_sha: str,
        onnx_box: list,
        shared_output: bool,
        command: list[str] | None,
        store: dict[str, Any] | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Stream the worker's event lines: {"lines": [...]} batches, then {"exit": code, "stderr": [...]}. `store`:
        the driver's plan for the remote engine store (builds/farm/node_store.py): a built engine is published
        there from this node before its `build_finished` line is passed on."""
        t_job = time.time()
        jobs = scratch_folder(self.scratch / "jobs", self.scratch)
        self.job_dir = fs.ensure_folder(jobs / job["build_id"], within=jobs)
        if store is not None and not self.looked and not shared_output:  # a warm actor's next cell: not looked yet
            self.look_up(store)
        said = [log_line(self.said)] if self.said else []
        if self.hit is not None:  # served from the remote store: no ONNX, no worker, no TensorRT on this node
            from trtls.builds.farm.node_store import serve_on_node

            out = self.job_dir / Path(job["output"]).name
            hit, note = serve_on_node(store or {}, self.scratch, self.hit, out, job["build_id"], self.node)
            timing: dict[str, Any] = {"jobT": t_job, "actorPid": os.getpid(), "farm": self.farm}
            if hit is not None:
                yield {"lines": [*said, log_line(note)], "timing": timing, "hit": hit}
                yield {"exit": 0, "stderr": []}
                return
            said.append(log_line(note))  # it could not be served here after all: built
        onnx_path, note = self._onnx(onnx_sha, onnx_box)
        # wall-clock times (the driver turns them into its matrix's fixed-cost breakdown; one clock on one machine)
        timing = {"jobT": t_job, "onnxT": time.time(), "actorPid": os.getpid(), "farm": self.farm}
        yield {"lines": [*said, log_line(note)], "timing": timing}
        job = dict(job)
        job["onnx"] = str(onnx_path)
        if not shared_output:
            job["output"] = str(self.job_dir / Path(job["output"]).name)
            job["write_root"] = str(self.job_dir)  # the node writes into its own scratch folder, not the recipe's
        job["quarantine_dir"] = str(self.scratch / "quarantine")
        job["timing_cache"] = None  # a cache lives with the recipe; it is not shipped (TensorRT-RTX: a no-op)
        early, self.early = self.early, None
        usable = early is not None and early.alive() and not command
        if early is not None and not (usable and early.fits(str(job.get("builder_module", "auto")))):
            discard(early.proc)  # another module (or an external worker) was asked for after all
            early = None
        preloaded_before_job = early is not None and early.info is not None
        with self.lock:  # the job line is written before any control line can be
            argv = [sys.executable if part == "{python}" else part for part in command or []]
            self.proc = early.proc if early else spawn_worker(argv)
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
        env: dict[str, Any] = {}
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
                if store is not None:
                    batch["lines"] = self._publish(batch["lines"], job, store, env, t_job)
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
        yield {"exit": code, "stderr": list(self.stderr_tail)}

    def _publish(
        self, lines: list[str], job: dict[str, Any], plan: dict[str, Any], env: dict[str, Any], t_job: float
    ) -> list[str]:
        """`lines`, the engine published to the remote store when one says `build_finished` (built): that line then
        carries a note saying so (or why not). `env` keeps the worker's `environment` (its builder) across batches."""
        from trtls.builds.farm.node_store import finished_with_note, publish_from_node

        out = []
        for text in lines:
            if '"environment"' in text[:80]:
                env.update(parse_json(text).get("environment") or {})
            elif '"build_finished"' in text[:80] and '"outcome": "built"' in text:
                finished = parse_json(text)
                of = {**plan, "buildId": job["build_id"], "startedAt": t_job}  # the producing build, as recorded
                took = round(time.time() - t_job, 3)
                output = Path(job["output"])
                note = publish_from_node(of, self.scratch, output, finished, env, self.node, took, self.stop)
                text = finished_with_note(text, note)
            out.append(text)
        return out

    def _read_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.stderr_tail.append(raw.decode(errors="replace").rstrip())

    def control(self, line: str) -> bool:
        if '"cancel"' in line:  # not a commit line: the cell's cancel state is set too
            from trtls.builds.farm.node_store import stop_on

            stop_on(self.stop, line)
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
        self.stop.request("service_shutdown")  # stdin closing is the protocol's service_shutdown
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
        return fs.signal_child(proc, signal.Signals(signum), group=True)

    def engine_chunks(self, path: str) -> Iterator[bytes]:
        """The built engine in pieces (only a regular file of this cell's job folder, never through a link); the
        node's copy is removed once sent."""
        if self.job_dir is None or not inside(real(Path(path).parent), real(self.job_dir)):
            raise UnsafeWrite(errno.EXDEV, f"is not in this cell's job folder {self.job_dir}", path)
        with fs.open_regular(path, limit=None, follow=False) as fh:
            while chunk := fh.read(CHUNK):
                yield chunk
        self.cleanup()

    def cleanup(self) -> None:
        if self.job_dir is not None:
            try:  # only from the jobs folder trtls made (marked), never through a link
                fs.remove_tree(self.job_dir, kind=Kind.scratch, within=self.job_dir.parent, owned=True)
            except OSError:
                pass

    def end(self) -> None:
        """The cell is over (whatever the outcome): its process group ends if it still runs, an unused preloaded
        worker is discarded, its job folder removed."""
        self.stop.request("service_shutdown")  # an upload still going (the farm goes down) is cut
        with self.lock:
            proc, early, self.early = self.proc, self.early, None
        if proc is not None and proc.poll() is None:
            fs.end_child(proc)
        if early is not None:
            discard(early.proc)
        self.cleanup()

    def watch_driver(self, driver: dict[str, Any], ended: threading.Event) -> bool:
        """A farm's host outlives the drivers that send it cells: a driver that dies (Ctrl-C mid-exit, kill -9) makes
        its cell's worker cancel itself, as when a driver's own actor dies with it (stdin closes); killed if it
        lingers past DRIVER_GONE_GRACE_S. True when the driver died (False: the cell ended first)."""
        pid, start = int(driver["pid"]), int(driver.get("start") or 0)
        while not ended.wait(WATCH_DRIVER_S):
            if not pid_alive(pid, start):
                self.close_stdin()
                proc = self.proc
                if proc is not None:
                    try:
                        proc.wait(DRIVER_GONE_GRACE_S)
                    except subprocess.TimeoutExpired:
                        pass
                self.end()
                return True
        return False
