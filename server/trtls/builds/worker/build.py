"""The build the worker runs: `Worker` turns one job into one TensorRT build on the builder thread (parse, configure,
build, commit the engine and timing cache), reporting phases and outcomes as `trtls.events/1` lines. The process around
it (stdin control, signals, `--probe`, `--preload`) is builds/worker/main.py."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from queue import SimpleQueue
from typing import Any

from trtls.builds import timing_cache as tc
from trtls.builds.artifacts import engine_temp_path, remove_or_quarantine, write_engine
from trtls.builds.build_facts import build_config_hash, network_types, peak_rss_bytes
from trtls.builds.worker import cache_step, capability, engine_validity
from trtls.builds.worker.commit_guard import CommitGate, SupervisorGone, SupervisorWatch
from trtls.builds.worker.emitter import Emitter, Event, EventWriter
from trtls.builds.worker.environment import EnvironmentRecord
from trtls.builds.worker.monitor import make_monitor_class
from trtls.core.build_target import build_target
from trtls.core.cancel import CancelToken
from trtls.fs.hold import held_phase, test_pause


class Worker:
    def __init__(self, job: dict[str, Any], writer: EventWriter):
        self.job = job
        self.writer = writer
        self.cancel = CancelToken()
        self.queue: SimpleQueue = SimpleQueue()
        self.emitter = Emitter(self.queue, writer)
        self.output, self.root = Path(job["output"]), job.get("write_root")  # the write stays in root (issue 22)
        self.build_id = job["build_id"]
        self.quarantine_dir = Path(job["quarantine_dir"])
        self.in_commit = False  # no-cancel zone: the finished engine is being written
        self.cancel_arrived_ns: int | None = None
        self.logs: list[tuple[str, str]] = []
        self.held_logs: list[str] | None = None
        self.log_sync: Callable[[], None] = _nothing  # see log_relay: messages arrive on another thread
        self.done = threading.Event()
        self.exit_code = 1
        self.watch = SupervisorWatch()  # worker.py marks it gone at stdin EOF; checked before the rename
        # made once; beside the builder where it can be (`_build`); a stop no longer waits for the driver's answer
        self.environment = EnvironmentRecord(writer, lambda: self.cancel.is_set or self.watch.is_gone())
        self.builder_returned = threading.Event()  # TensorRT's builder has returned (or was never called)
        self.capability: dict[str, Any] = {}  # what the parser (and, after a failure, the builder) said: build_finished
        self.gate = CommitGate(bool(job.get("hold_commit")))  # a job sent ahead of the check: commit when told

    # -- control -------------------------------------------------------------------------------
    def request_cancel(self, source: str, t_request_ns: int | None) -> None:
        self.cancel_arrived_ns = self.cancel_arrived_ns or time.monotonic_ns()  # this process's clock (farm: a node)
        if self.cancel.request(source, t_request_ns):
            self.writer.emit("log", severity="INFO", msg=f"trtls: cancel requested by {source}")

    def never_committed(self) -> bool:
        return self.gate.never_allowed(lambda: self.cancel.is_set or self.watch.is_gone())

    def on_log(self, severity: str, msg: str) -> None:
        """TensorRT logger callback (any thread): keep warnings and errors, forward them as events
        (except while a timing cache is being read: those lines are explained in one message instead)."""
        if severity in ("INTERNAL_ERROR", "ERROR", "WARNING"):
            self.logs.append((severity, msg))
            if self.held_logs is not None:
                self.held_logs.append(msg)
                return
            self.writer.emit("log", severity=severity, msg=msg)

    # -- the build -----------------------------------------------------------------------------
    def run(self) -> None:
        try:
            self.exit_code = self._build()
        except BaseException as exc:
            self.environment.settle()  # whatever was held (the environment record's wait) goes out before the end
            self.writer.emit("build_finished", outcome="failed", error=f"worker error: {type(exc).__name__}: {exc}")
            self.exit_code = 1
        finally:
            self.done.set()

    def _build(self) -> int:
        from trtls.builds.worker import adapter  # the only module that imports TensorRT
        from trtls.builds.worker import build_config_apply as bca

        job = self.job
        faults = job.get("faults") or {}

        bm = adapter.load_builder_module(job.get("builder_module", "auto"))
        self.environment.loaded(bm)
        precision = job.get("precision") or {}
        # The environment record waits for the CUDA driver's first answer, which the builder does not need: unless
        # something before the builder's call reads it (a timing cache handed to TensorRT, the precision step's
        # phase), it is made beside the builder, the events held meanwhile (builds/worker/environment.py).
        beside = not precision.get("convert") and not (job.get("timing_cache") and adapter.timing_cache_supported(bm))
        if beside:
            self.writer.hold()
        else:
            self.environment.get()  # measured before anything can fail on the input: a failed build says what built it
        if self.cancel.is_set:
            return self._cancelled_before_build("TensorRT was being imported")
        logger = self._logger(bm)
        onnx_path = Path(job["onnx"])
        first_root = 0
        if precision.get("convert"):
            first_root = 1  # the precision step is phase "0"; TensorRT's root becomes "1"
            converted = self._precision_phase(onnx_path, precision)
            if isinstance(converted, int):
                return converted  # cancelled or failed, already reported
            onnx_path = converted
        strongly_typed = precision.get("strongly_typed")
        if strongly_typed is None and precision.get("convert"):
            strongly_typed = True  # AutoCast output is meant for a strongly typed network
        try:
            plugin_record = bca.load_plugins(bm, job.get("plugins") or {})
        except bca.SettingError as exc:
            return self._finish_setting_error(exc)
        flags, _, net_not_applied = bca.network_creation_flags(bm, strongly_typed)
        builder = bm.trt.Builder(logger)
        network, config = builder.create_network(flags), builder.create_builder_config()  # flags: bca's choice
        errors = adapter.parse_onnx(bm, builder, network, logger, str(onnx_path))
        self.capability = {"parser": capability.worker_parse_answer(adapter.parser_of(network), errors)}
        if errors:
            return self._finish_failed("ONNX parse failed: " + "; ".join(errors), self.environment.get())
        if self.cancel.is_set:
            return self._cancelled_before_build("the ONNX model was being parsed")
        settings = job.get("settings") or {}
        effective = adapter.apply_builder_settings(
            bm, builder, config, {k: v for k, v in settings.items() if k not in bca.OWN_KEYS}
        )
        more, not_applied = bca.apply_build_config(bm, builder, config, settings, self.logs, self.log_sync)
        effective.update(more)
        not_applied = {**effective.pop("not_applied", {}), **not_applied, **net_not_applied}
        typed = bca.read_strongly_typed(bm, network)
        if strongly_typed is not None or typed:
            effective["strongly_typed"] = typed
        try:
            if precision.get("legacy_flags"):
                effective["legacy_flags"] = bca.apply_legacy_flags(
                    bm, config, list(precision["legacy_flags"]), bool(typed)
                )
            effective.update(plugin_record)
            if (job.get("plugins") or {}).get("serialize"):
                effective["serialize"] = bca.serialize_plugins(bm, config, job["plugins"]["serialize"])
        except bca.SettingError as exc:
            return self._finish_setting_error(exc)
        if not_applied:
            effective["not_applied"] = not_applied
        profiles: list[dict[str, Any]] = job.get("profiles") or []
        profiles_held: list[dict[str, Any]] = []
        adapter.add_profiles(bm, builder, config, profiles, network, profiles_held)
        network_record = network_types(bm, network)  # here: the builder owns the network once it runs

        def started(environment: dict[str, Any]) -> Event:
            target = build_target(environment, effective)
            return (
                "build_started",
                t_call,
                {
                    "build_id": self.build_id,
                    "engine": job["engine"],
                    "pid": os.getpid(),
                    "environment": environment,
                    "build_config_hash": build_config_hash(onnx_path, effective, profiles, environment, target),
                    "effective_settings": effective,
                    "optimization_profiles": profiles_held,
                    "target": target,
                    "network": network_record,
                },
            )

        t_call: int | None = None  # the builder's start, where the record is made beside it; else when it is sent
        if not beside:
            self.writer.release(started(self.environment.get()))
            cache_spec = cache_step.spec_now(self)  # a job sent ahead waits here for its commit to read a cache file
            plan_cache = cache_step.load(self, bm, adapter, config, self.environment.get(), effective, cache_spec)

        monitor_cls = make_monitor_class(adapter.make_progress_monitor_base(bm))
        self.monitor = None
        if not job.get("no_monitor"):  # benchmarks compare against a build with no monitor attached
            self.monitor = monitor_cls(self.queue, self.cancel, faults.get("stall") or held_phase(), first_root)
            config.progress_monitor = self.monitor
        self.emitter.start()
        if beside:
            t_call = time.monotonic_ns()
            self.environment.beside(started, self.build_id, self.builder_returned)

        plan = None
        test_pause("before_build", self.build_id, lambda: self.cancel.is_set)  # tests: a build that holds its output
        try:
            if not self.cancel.is_set:
                plan = builder.build_serialized_network(network, config)
        finally:
            self.builder_returned.set()
        t_return = time.monotonic_ns()
        if beside:
            self.environment.joined()  # the record and build_started are sent: nothing after this waits for them
        self.log_sync()  # every warning and error the build logged is an event before its outcome is
        if self.emitter.is_alive():
            self.emitter.drain()
        self.writer.emit("builder_returned", t_return, ok=plan is not None)
        if beside:  # the cache is not the builder's: decided now (a job sent ahead waits for its commit to read one)
            cache_spec = cache_step.spec_now(self)
            plan_cache = cache_step.load(self, bm, adapter, config, self.environment.get(), effective, cache_spec)
        # a cancel requested after the builder returned a plan is applied after the engine is written (the commit
        # zone); reading is_set alone made that depend on whether this thread got here before the request did
        late = plan is not None and (self.cancel_arrived_ns or 0) > t_return
        if plan is not None and self.never_committed():
            late = False  # never allowed to commit: whatever cancelled the wait applies, the engine is discarded
            if not self.cancel.is_set:
                self.request_cancel("service_shutdown", None)  # the supervisor left without a word (re-parented)
        if self.cancel.is_set and not late:
            return self._finish_cancelled(t_return, plan, plan_cache)
        if plan is None:
            error = next(
                (m for s, m in reversed(self.logs) if s in ("ERROR", "INTERNAL_ERROR")), "builder returned no engine"
            )
            self.capability["builder"] = capability.ask_built_network(self, builder, network, config)
            if self.monitor is not None:
                self.capability["trial"] = capability.build_trial(self.monitor.timed, error)
            return self._finish_failed(error, self.environment.get(), plan_cache)
        return self._commit(bm, adapter, config, plan, plan_cache)

    def _logger(self, bm: Any) -> Any:
        """TensorRT's built-in logger read back through fd 1 (log_relay: VERBOSE is filtered in C++, not by a Python
        callback per message)."""
        from trtls.builds.worker.log_relay import process_relay

        relay = process_relay(bm.trt, self.on_log)
        self.log_sync = relay.sync
        return relay.logger

    def _precision_phase(self, onnx_path: Path, spec: dict[str, Any]) -> Path | int:
        """Phase "0": ModelOpt AutoCast (or its cached result). Returns the model to build, or an exit code."""
        from trtls.builds import precision as prec

        name = f"Precision conversion (ModelOpt AutoCast {spec['convert']})"
        self.writer.emit("phase_start", phase_id="0", parent_id=None, name=name, num_steps=3, tid=threading.get_ident())
        last: dict[str, int | None] = {"step": None}

        def on_step(n: int) -> None:
            last["step"] = n
            self.writer.emit("step", phase_id="0", step=n)

        try:
            result = prec.run_precision_step(onnx_path, spec, Path(spec["cache_dir"]), self.cancel, on_step)
        except prec.PrecisionCancelled:
            t = time.monotonic_ns()
            self.writer.emit("phase_finish", t, phase_id="0", status="cancelled", step=last["step"])
            self.writer.emit("cancel_acknowledged", t, source=self.cancel.source, t_request_ns=self.cancel.t_request_ns)
            self.writer.emit(
                "build_finished",
                outcome="cancelled",
                cleanup_status="cleaned",
                t_cleanup_ns=time.monotonic_ns(),
                notes=["stopped during the precision conversion; the AutoCast child was killed, nothing was cached"],
            )
            return 3
        except prec.PrecisionFailed as exc:
            self.writer.emit("phase_finish", phase_id="0", status="done", step=last["step"])
            code = "TRT147" if exc.kind == "missing_modelopt" else "TRT148"
            failure = {"kind": "precision", "code": code, "key": "convert", "reason": exc.kind}
            return self._finish_failed(f"precision conversion failed: {exc}", {}, failure=failure)
        self.writer.emit("phase_finish", phase_id="0", status="done", step=2)
        self.writer.emit("precision", record=result.record)
        return result.onnx

    def _finish_setting_error(self, exc: Any) -> int:
        failure = {"kind": "plugin" if exc.code == "TRT149" else "setting", "code": exc.code, "key": exc.key}
        return self._finish_failed(str(exc), self.environment.get(), failure=failure)

    def _cleanup(self, reason: str) -> tuple[str, int, list]:
        qdir = self.quarantine_dir if self.job.get("keep_evidence") else None
        inventory: list[dict[str, Any]] = []
        status = "cleaned"
        if not (self.job.get("faults") or {}).get("skip_cleanup"):
            temp, root = engine_temp_path(self.output, self.build_id), Path(self.root) if self.root else None
            inventory, status = remove_or_quarantine([temp], qdir, reason, within=root)
        for entry in inventory:
            self.writer.emit("artifact", **entry)
        return status, time.monotonic_ns(), inventory

    def _cancelled_before_build(self, during: str) -> int:
        """A cancel seen between the worker's preparing steps (no monitor yet, no cache touched): importing TensorRT
        and parsing a large model take seconds, and a cancel that waited for the build's first callback could
        outlast the grace and be forced."""
        self.environment.get()  # what would have built it, as a build that went on would have said
        t = time.monotonic_ns()
        self.writer.emit(
            "cancel_acknowledged", t, source=self.cancel.source, t_request_ns=self.cancel.t_request_ns, t_seen_ns=t
        )
        return self._end_cancelled([f"stopped before TensorRT's build started ({during}); nothing was built or cached"])

    def _finish_cancelled(self, t_return: int, plan: Any, cache_plan: tc.CachePlan) -> int:
        seen = self.monitor.cancel_seen_ns if self.monitor is not None else None
        self.writer.emit(
            "cancel_acknowledged",
            t_return,
            source=self.cancel.source,
            t_request_ns=self.cancel.t_request_ns,
            t_seen_ns=seen,
        )
        notes = []
        if plan is not None:
            notes.append(
                "the builder returned a complete engine after the cancel request; it was discarded as requested"
            )
        cache_plan, _ = tc.after_build(cache_plan, "cancelled", False, None, _nothing)
        cache_step.emit(self.writer, cache_plan, False)
        return self._end_cancelled(notes)

    def _end_cancelled(self, notes: list[str]) -> int:
        """Clean up and report `cancelled`: the end both cancel paths share."""
        status, t_clean, _ = self._cleanup(f"build {self.build_id} cancelled by {self.cancel.source}")
        self.writer.emit(
            "build_finished",
            outcome="cancelled",
            cleanup_status=status,
            t_cleanup_ns=t_clean,
            notes=notes,
            peak_rss_bytes=peak_rss_bytes(),
            capability=self.capability or None,
        )
        return 3

    def _finish_failed(
        self,
        error: str,
        environment: dict,
        cache_plan: tc.CachePlan | None = None,
        failure: dict[str, Any] | None = None,
    ) -> int:
        self.log_sync()  # the supervisor classifies a failure from the logged errors: they must come first
        if cache_plan is not None:
            cache_plan, _ = tc.after_build(cache_plan, "failed", False, None, _nothing)
            cache_step.emit(self.writer, cache_plan, False)
        status, t_clean, _ = self._cleanup(f"build {self.build_id} failed: {error}")
        self.writer.emit(
            "build_finished",
            outcome="failed",
            error=error,
            cleanup_status=status,
            t_cleanup_ns=t_clean,
            failure=failure,
            peak_rss_bytes=peak_rss_bytes(),
            capability=self.capability or None,
        )
        return 1

    def _commit(self, bm: Any, adapter: Any, config: Any, plan: Any, cache_plan: tc.CachePlan) -> int:
        """No-cancel zone: a cancel arriving now is recorded and applied after the engine is safely written."""
        self.in_commit = True
        notes: list[str] = []
        time.sleep((self.job.get("faults") or {}).get("commit_delay_s", 0))  # fault injection: a slow disk
        try:
            size, digest = write_engine(
                self.output, self.build_id, memoryview(plan), self.watch.check(self.build_id), self.root
            )
        except OSError as exc:
            self.in_commit = False
            if isinstance(exc, SupervisorGone):  # nobody would record this engine: discarded, never renamed
                return self._end_cancelled([str(exc)])
            return self._finish_failed(f"cannot write engine {self.output}: {exc.strerror or exc}", {}, cache_plan)
        self.in_commit = False
        # write_engine hashed the bytes it wrote: do not read 10s of MB back to hash them again
        self.writer.emit("artifact", action="written", kind="engine", path=str(self.output), size=size, sha256=digest)
        test_pause("after_rename", self.build_id)
        if self.cancel.is_set:
            notes.append("cancel requested after the engine was complete; it was applied after the engine was written")
            self.writer.emit(
                "cancel_acknowledged",
                source=self.cancel.source,
                t_request_ns=self.cancel.t_request_ns,
                after_complete=True,
            )
        cache_plan, written = cache_step.write_back(adapter, bm, config, cache_plan)
        cache_step.emit(self.writer, cache_plan, written)
        done: dict[str, Any] = {"engine_bytes": size, "engine_sha256": digest, "cleanup_status": "not_needed"}
        # will it load here (issue 33)
        done["engine_validity"] = engine_validity.check(bm, plan, self.environment.device_name)
        done.update(t_cleanup_ns=time.monotonic_ns(), notes=notes, peak_rss_bytes=peak_rss_bytes())
        done["capability"] = self.capability or None
        self.writer.emit("build_finished", outcome="built", **done)
        return 0


def _nothing(*_: Any) -> None:
    """No timing caches to combine (a build that did not finish), no log lines to wait for (no relay yet)."""
    return None
