"""The driver side of a remote build: something the supervisor drives exactly like a local worker process.

`RemoteProcess` has what the supervisor uses of `asyncio.subprocess.Process` — `stdin` (control lines),
`stdout`/`stderr` (stream readers), `wait()`, `returncode`, `pid` — plus `signal_group(sig)` for the
escalation. So the supervisor, the phase tree, the six cancel sources, escalation, evidence and the editor panel
work unchanged on a remote cell. What this transport adds to the stream, as protocol events:

- `queued` at submit and `placed` once a node holds the cell (node id, hostname, labels, accelerator type,
  GPU ids, queue wait) — the tree shows "waiting for a node" in between, bounded by `queue_timeout_s`;
- the engine: on the worker's `build_finished` (built), the node's engine is fetched, written atomically at the
  requested output (`<output>.trtls-tmp-<build id>`, fsync, rename) and its sha256 checked against the worker's
  before the worker's `artifact`/`build_finished` lines are passed on; a mismatch fails the build, and a
  previous engine is never touched;
- a lost node (or an actor that died) ends the stream with `lost` set: the supervisor records `killed (node lost)`.

Where a cell runs: a CPU-only cell reserves its CPUs with a placement group and runs on its node's shared host
(`host_slot`; the host is `node_host`: one actor per node, the warm farm's when connected to one); a cell that holds
a GPU has an actor of its own (`node_worker`), because Ray sets CUDA_VISIBLE_DEVICES only for the actor that holds
the GPU.

The relay (placement, control, the node's lines, the end); the wait for a node and how a cancel or the queue timeout
ends it is `node_wait`, the engine's way back `engine_transfer`, reading the node's stream `node_stream`, reusing a GPU
cell's actor `warm_claim`, the lines it writes `remote_lines`, a cell its node served from the remote store
`node_reuse` (it sets `reused`: the supervisor ends the cell `reused`).
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any

from trtls.builds.farm import cluster
from trtls.builds.farm.engine_transfer import bring_engine
from trtls.builds.farm.host_slot import HostSlot, shares_host
from trtls.builds.farm.node_stream import read_on_thread
from trtls.builds.farm.node_wait import cancelled_lines, left_s, timeout_lines, wait_for_node
from trtls.builds.farm.placement import RemoteSpec
from trtls.builds.farm.remote_lines import in_place
from trtls.builds.farm.remote_lines import line as _line
from trtls.builds.farm.remote_lines import peek as _peek
from trtls.builds.farm.warm_actors import WARM, kill_actor
from trtls.builds.farm.warm_claim import take_warm

KILL_ACTOR_AFTER_S = 0.5  # after SIGKILL to the remote group: the actor too, so its slot is free again


class _Control:
    """`proc.stdin` for the supervisor: each written line is a control call on the actor (a concurrent method)."""

    def __init__(self, owner: RemoteProcess):
        self.owner = owner
        self.closed = False

    def write(self, data: bytes) -> None:
        text = data.decode()
        if not self.closed and '"type": "job"' not in text[:80]:  # the job itself travels with the submit
            self.owner._control(text)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.owner._close_stdin()


class RemoteProcess:
    def __init__(self, job: dict[str, Any], remote: RemoteSpec, command: list[str] | None = None):
        self.job = job
        # an external worker (the recipe's `worker`), run on the node; None: ours (the supervisor names ours as
        # `{python} -m trtls.builds.worker`: the node starts it itself, preloaded — it was never preloaded before)
        ours = command is None or list(command) == ["{python}", "-m", "trtls.builds.worker"]
        self.command = None if ours else command
        self.placement = remote.placement
        self.queue_timeout_s = remote.queue_timeout_s
        # the node's worker writes the engine at the output itself: a shared folder, or a node on this machine
        self.shared_output = remote.shared_dir is not None or remote.same_machine
        self.same_machine, self.store = remote.same_machine, remote.store  # store: builds/farm/node_store.py
        self._look_up = None if self.shared_output else self.store  # the key looked up on the node, before a worker
        self.keep_warm_s = remote.keep_warm_s
        self._built = False  # the node's worker built and the engine arrived intact: its actor may be reused
        self.stdin = _Control(self)
        self.stdout = asyncio.StreamReader(limit=1 << 24)
        self.stderr = asyncio.StreamReader()
        self.returncode: int | None = None
        self.pid: int | None = None
        self.where: dict[str, Any] = {}
        self.lost: str | None = None  # set when the node or the actor died under the build
        self.reused: dict[str, Any] | None = None  # the node served the cell from the remote store (node_reuse.py)
        self._actor: Any = None
        self._exited = asyncio.Event()
        self._cancel_line: str | None = None  # a cancel that arrived before the worker existed
        self._cancelled = asyncio.Event()  # wakes a cell waiting for a node at once (no polling)
        self._task: asyncio.Task | None = None
        self._worker_running = False
        # a CPU-only cell: its placement group and its place on the node's shared host (None: an actor of its own)
        self._slot = HostSlot(self.placement, job["build_id"]) if shares_host(self.placement) else None
        self._phase_seen = False
        self._host_dead = False
        self._signalled = False  # the supervisor sent the remote worker a signal (escalation)

    @classmethod
    async def start(cls, job: dict[str, Any], remote: RemoteSpec, command: list[str] | None = None) -> RemoteProcess:
        self = cls(job, remote, command)
        self._task = asyncio.ensure_future(self._drive())
        return self

    async def wait(self) -> int:
        await self._exited.wait()
        assert self.returncode is not None
        return self.returncode

    # -- supervisor → node ---------------------------------------------------------------------
    def _control(self, line: str) -> None:
        if self._worker_running and self._actor is not None:
            self._actor.control.remote(line)
            return
        self._cancel_line = line  # applied as soon as there is a worker (or ends the queue wait)
        self._cancelled.set()
        if self._slot is not None and self._slot.handle is not None:
            # the cell is being opened on its node's host, which looks its key up in the remote store first: the stop
            # reaches the cell there and cuts that lookup (node_host.NodeHost.open)
            self._slot.handle.control.remote(line)

    def _close_stdin(self) -> None:
        if self._actor is not None and self.returncode is None:
            self._actor.close_stdin.remote()

    def signal_group(self, sig: int) -> None:
        """Escalation: the signal goes to the remote worker's process group; SIGKILL then kills the actor too."""
        if self.returncode is not None:
            return
        if self._actor is None or not self._worker_running:
            self._end_without_worker(-sig, "stopped before it reached a node")
            return
        self._actor.signal_group.remote(int(sig))
        self._signalled = True
        if sig == signal.SIGKILL:
            asyncio.get_running_loop().call_later(KILL_ACTOR_AFTER_S, self._kill_actor)

    def _kill_actor(self) -> None:
        if self._slot is not None:
            self._slot.end(self.keep_warm_s)  # the host is shared: the cell's group ends, its bundle is freed
        elif self._actor is not None:
            kill_actor(self._actor)

    # -- node → supervisor ---------------------------------------------------------------------
    def _feed(self, data: bytes) -> None:
        if not self.stdout.at_eof():
            self.stdout.feed_data(data)

    def _end(self, code: int, stderr: list[str] = ()) -> None:  # type: ignore[assignment]
        if self.returncode is not None:
            return
        for text in stderr:
            self.stderr.feed_data((text + "\n").encode())
        self.returncode = code
        self.stdout.feed_eof()
        self.stderr.feed_eof()
        self._exited.set()

    def _end_without_worker(self, code: int, why: str) -> None:
        self._kill_actor()
        if self._task is not None and not self._task.done():
            self._task.cancel()
        self._end(code, [why])

    async def _drive(self) -> None:
        req = self.placement.request
        t_submit = time.monotonic_ns()
        self._feed(
            _line(
                "queued",
                cell=req.cell,
                labels=req.labels,
                num_gpus=self.placement.num_gpus,
                num_cpus=req.num_cpus,
                gpu_rule=self.placement.gpu_rule,
            )
        )
        try:
            sha, ref = await asyncio.to_thread(cluster.onnx_ref, Path(self.job["onnx"]))
            placed = await (self._on_host(t_submit) if self._slot is not None else self._on_own_actor(t_submit))
            if placed:
                self.where["queue_wait_s"] = round((time.monotonic_ns() - t_submit) / 1e9, 3)
                cluster.mark("actorReady")
                self._feed(_line("placed", **self.where, **self._gpus()))
                await self._stream(sha, ref)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            await self._on_failure(exc)
        finally:
            if self._slot is not None:  # every end: built, failed, cancelled (in the queue too), lost
                self._slot.end(self.keep_warm_s, dead=self._host_dead)

    async def _on_host(self, t_submit: int) -> bool:
        """A CPU-only cell: Ray reserves its bundle (queued as long as no node has room), then it runs on the shared
        host of the node that got it. False when a cancel or the queue timeout ended the wait."""
        from trtls.builds.farm import farm_actors

        assert self._slot is not None
        if not await self._slot.reserve(self._cancelled, left_s(t_submit, self.queue_timeout_s)):
            self._slot.end(self.keep_warm_s)
            self._queue_ended(t_submit)
            return False
        fits = farm_actors.fits(self.placement.ray_options(), self.command, cluster.job_runtime_env)
        warm = bool(cluster.connection.get("warm")) and fits
        answer = await self._slot.open_cell(self.job, self.command, warm, self._cancelled, self._look_up)
        self._actor = self._slot.handle
        if answer is None or self._cancel_line is not None:  # stopped before or while its node looked the key up
            self._queue_ended(t_submit, "while its node looked its key up in the remote store")
            return False
        self.where, note, msg = self._slot.describe(answer)
        if msg:
            self._feed(_line("log", severity="INFO", msg=msg))
        cluster.cell_note(self.job["build_id"], cell=self.placement.request.cell, **note)
        return True

    async def _on_own_actor(self, t_submit: int) -> bool:
        """A cell that holds a GPU: an actor of its own (a warm one of its shape, or a new one)."""
        from trtls.builds.farm.node_worker import NodeWorker

        shape = self.placement.shape()
        got = await take_warm(shape)  # an idle node worker of this shape (checked alive with one round trip)
        if got is None:
            options = self.placement.ray_options()
            # creating an actor registers it with the cluster's control store synchronously: not on the event loop
            actor_class: Any = NodeWorker  # made an actor class by @ray.remote (mypy does not apply class decorators)
            preload = None if self.command else str(self.job.get("builder_module") or "auto")
            self._actor = await asyncio.to_thread(lambda: actor_class.options(**options).remote(preload, self._look_up))
            WARM.waiting[shape] = WARM.waiting.get(shape, 0) + 1
            try:
                got = await wait_for_node(self._actor, shape, self._cancelled, t_submit, self.queue_timeout_s)
            finally:
                WARM.waiting[shape] -= 1
            if got is None:  # a stop kills the new actor: a lookup of the key its construction made is cut with it
                looking = " or for its node's lookup of its key in the remote store" if self._look_up else ""
                self._queue_ended(t_submit, f"while waiting for a node{looking}")
                return False
        self._actor, self.where = got
        if not self.where.get("warm"):
            cluster.cell_note(
                self.job["build_id"],
                cell=self.placement.request.cell,
                actor="new",
                warm=False,
                actorPid=self.where.get("actor_pid"),
            )
        return True

    def _gpus(self) -> dict[str, Any]:
        return {"num_gpus": self.placement.num_gpus, "gpu_rule": self.placement.gpu_rule}

    def _queue_ended(self, t_submit: int, doing: str = "while waiting for a node") -> None:
        """A cancel or the queue timeout ended the wait for a node (builds/farm/node_wait.py), or a cancel its opening
        on the node (`doing`: what it was stopped doing): the stream says which."""
        self._kill_actor()
        if self._cancel_line is not None:
            lines, code = cancelled_lines(self._cancel_line, t_submit, doing), 0
        else:
            lines, code = timeout_lines(self.queue_timeout_s, self.placement.ray_options()), 1
        for out in lines:
            self._feed(out)
        self._end(code)

    async def _stream(self, sha: str, ref: Any) -> None:
        assert self._actor is not None
        gen = self._actor.run.remote(self.job, sha, [ref], self.shared_output, self.command, self.store)
        self._worker_running = True
        if self._cancel_line is not None:  # cancelled while the node was being chosen
            self._actor.control.remote(self._cancel_line)
        held: list[bytes] = []  # the node's engine `artifact` line waits for the engine to arrive here
        exited: dict[str, Any] | None = None
        async for item in read_on_thread(gen, cluster.get_object):
            if "timing" in item:
                self._timing(item["timing"])
            if "hit" in item:  # served from the remote store on the node: its engine comes back, no worker ran
                await self._reused(item["hit"], item["lines"])
                continue
            if "exit" in item:
                exited = item
                if item["exit"] >= 0 or self._signalled:
                    self._end(item["exit"], item.get("stderr", []))
                # else a signal nobody here sent: when the node itself is going, its Ray worker kills the build's
                # group on the way down and relays that exit before its own death is known. The cleanup below
                # reaches the actor or fails; failing, the cell ends as a lost node (`_on_failure`), not
                # "signal SIGKILL".
                break
            for text in item["lines"]:
                raw = (text + "\n").encode()
                if not self._phase_seen:  # the fixed cost's last stages: the first cell's builder starts
                    self._first_stages(text)
                elif '"builder_returned"' in text[:60]:  # the tail's first stage (docs/farm.md "The tail")
                    cluster.cell_mark(self.job["build_id"], "builderReturned")
                if self.shared_output:
                    finished = '"build_finished"' in text
                    if finished:
                        cluster.cell_mark(self.job["build_id"], "finishedOnNode")
                    if finished and '"outcome": "built"' in text:
                        self._built = True
                        cluster.cell_mark(self.job["build_id"], "engineLocal")  # written in place: no transfer
                        if self.same_machine:
                            raw = in_place(text, self.where)
                    self._feed(raw)
                    continue
                ev = _peek(text)
                if ev.get("type") == "build_started":
                    self.pid = ev.get("pid")
                if ev.get("type") == "artifact" and ev.get("kind") == "engine" and ev.get("action") == "written":
                    held.append(raw)
                    continue
                if ev.get("type") == "build_finished":
                    cluster.cell_mark(self.job["build_id"], "finishedOnNode")
                if ev.get("type") == "build_finished" and ev.get("outcome") == "built":
                    brought = await bring_engine(self._actor, self.job, self.where, ev, held)
                    self._built = b"TRT233" not in brought[0]
                    cluster.cell_mark(self.job["build_id"], "engineLocal")
                    for out in brought:
                        self._feed(out)
                    continue
                self._feed(raw)
        try:
            await self._actor.cleanup.remote()  # the node's copy of a cancelled or failed build's job folder
        finally:
            if self._slot is not None:
                pass  # the shared host stays; _drive ends the cell there and frees its bundle
            elif self._built and self.returncode == 0 and self._cancel_line is None:
                WARM.put(
                    self.placement.shape(),
                    self._actor,
                    {k: v for k, v in self.where.items() if k != "warm"},
                    self.keep_warm_s,
                )
            else:
                self._kill_actor()  # the slot is free for the next cell
        if exited is not None:  # the actor answered: the signal was the worker's own (the OOM killer, a user)
            self._end(exited["exit"], exited.get("stderr", []))

    async def _reused(self, hit: dict[str, Any], lines: list[str]) -> None:
        """The node's lines, then its engine brought to the output (builds/farm/node_reuse.py); `reused` set once it
        arrived intact: the supervisor ends the cell `reused`."""
        from trtls.builds.farm.node_reuse import bring_reused

        for text in lines:
            self._feed((text + "\n").encode())
        brought, self.reused = await bring_reused(self._actor, self.job, self.where, hit, self._cancel_line)
        for out in brought:
            self._feed(out)

    def _first_stages(self, text: str) -> None:
        if '"build_started"' in text[:60]:
            cluster.mark("buildStarted")
        elif '"phase_start"' in text[:60]:
            self._phase_seen = True
            cluster.mark("firstPhaseStart")

    def _timing(self, t: dict[str, Any]) -> None:
        """The node's wall-clock times → this run's fixed-cost breakdown and the cell's note."""
        if "onnxT" in t:
            cluster.mark("onnxOnNode", t["onnxT"])
        worker = t.get("worker")
        if worker is not None:
            if worker.get("t") is not None:
                cluster.mark("workerPreloaded", worker["t"])
            cluster.cell_note(
                self.job["build_id"],
                cell=self.placement.request.cell,
                workerPid=worker.get("pid"),
                workerImportS=worker.get("importS"),
                workerModules=worker.get("modules"),
                workerPreloadedBeforeJob=t.get("preloadedBeforeJob"),
            )

    async def _on_failure(self, exc: Exception) -> None:
        from trtls.builds.farm.node_loss import loss_of

        node = self.where.get("node_id") or (self._slot.node_id if self._slot is not None else None)
        self.lost, self._host_dead, code = await loss_of(exc, node, self.where.get("hostname"))
        self._end(code, [self.lost])
