"""The build worker: one TensorRT build in a child process, speaking `trtls.events/1` (docs/protocol.md).

Threads, and why:
- the main thread runs TensorRT, as a plain script does: a build on a second thread allocates from a malloc arena of
  its own, and glibc's thread arenas cost TensorRT's builder 5–19 % on the 16-core host (`large`, 2026-12-06:
  42.9 s on a script's main thread, 45.2 s on a second thread, 51.1 s on a second thread sharing the main arena;
  docs/performance.md "The builder on the main thread");
- the emitter thread turns the monitor's queue into JSON lines, coalescing steps (latest step per
  phase at most every 50 ms; phase starts and finishes are never dropped);
- the control thread reads control messages on stdin. stdin closing (the supervisor died) is a cancel with
  source service_shutdown: a worker never outlives its supervisor's interest in it;
- the signal thread acts on SIGTERM even while the builder is silent inside one C++ call for minutes (the main
  thread, where Python runs signal handlers, is busy there): the signal's C handler writes its number to a pipe
  (`signal.set_wakeup_fd`) that this thread reads (`_escalation_watch`);
- the CUDA driver's probe (builds/cuda.warm_driver, started first thing) and the environment record's thread, which
  waits for it and sends the record while TensorRT's builder already runs (builds/worker/environment.py).

Job: the first stdin line, a JSON object declared by `trtls.core.worker_job.WorkerJob` (docs/protocol.md § Job; read
here as a plain dict: this process never imports pydantic). Then control lines: {"type":"cancel","source":...}, and
{"type":"commit"} for a job sent with `hold_commit` (the supervisor checked it: the engine may be written).
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import resource
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from trtls import fs
from trtls.builds.artifacts import engine_temp_path
from trtls.builds.build_facts import build_config_hash as build_config_hash
from trtls.builds.cuda import DriverProbe
from trtls.builds.worker.build import Worker
from trtls.builds.worker.emitter import EventWriter
from trtls.core.protocol import CANCEL_SOURCES


def probe() -> int:
    """`--probe`: print the builder environment this worker would use (for printDebugInformation)."""
    from trtls.builds.worker import adapter

    try:
        bm = adapter.load_builder_module(os.environ.get("TRTLS_BUILDER_MODULE", "auto"))
        record = adapter.environment_record(bm)
        from trtls.builds.worker.build_config_apply import module_capabilities

        record["capabilities"] = module_capabilities(bm)
    except Exception as exc:
        record = {"error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(record, default=str))
    return 0


def preload(preference: list[str]) -> None:
    """`--preload [MODULE]`: import the builder while the supervisor is still preparing the job (a CLI starts its
    worker first and loads the recipe meanwhile), so the two start-ups overlap instead of adding up. A failure
    here is silent: the build's own load reports it properly."""
    from trtls.builds.worker import adapter

    try:
        adapter.load_builder_module(preference[0] if preference else "auto")
    except Exception:
        pass


def main(warming: DriverProbe | None = None, loading: threading.Thread | None = None) -> int:
    """`warming`: the CUDA driver's probe, when the entry point already started it (`__main__`); `loading`: the
    builder's libraries being loaded (builds/worker/prefetch.py), joined before the interpreter could finalize."""
    if "--probe" in sys.argv[1:]:
        code = probe()
        if warming is not None:
            warming.settle()  # no thread inside the driver as the interpreter finalizes (unless stuck past its bound)
        if loading is not None:
            loading.join()  # nor inside the loader
        return code
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C belongs to the supervisor, which sends a cancel
    if warming is None:
        from trtls.builds.cuda import warm_driver

        # The build's environment record asks the CUDA driver for device 0 (a process's first cuInit: ~0.2 s on a
        # GPU host, measured on the H200 host 2026-12-03, while TensorRT-RTX's builder needs no cuInit): started
        # now, beside TensorRT's import, it is done when the record is made (ctypes releases the GIL inside it).
        warming = warm_driver()
    # The record's `platform` runs `uname -p` as a child (~7 ms here, more under load) the first time it is asked;
    # asked now, it runs while TensorRT imports and the job is awaited, and the record finds it cached.
    naming = threading.Thread(target=platform.platform, name="trtls-platform", daemon=True)
    naming.start()
    writer = EventWriter()
    if "--preload" in sys.argv[1:]:
        preload(sys.argv[sys.argv.index("--preload") + 1 :][:1])
    line = sys.stdin.readline()
    if not line:
        warming.settle()  # no thread inside the driver as the interpreter finalizes (unless stuck past its bound)
        naming.join()
        if loading is not None:
            loading.join()  # nor inside the loader
        return 2
    job = json.loads(line)
    limit = (job.get("faults") or {}).get("fsize_limit_bytes")
    if limit:  # fault injection: a disk that fills up while the engine is written (EFBIG, not a signal)
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    worker = Worker(job, writer)
    worker.environment.device_probe = warming  # the environment record waits for it, beside the builder where it can

    def on_sigterm(*_: Any) -> None:
        # The escalation path: the builder ignored the cooperative cancel. Remove what we may have
        # started writing (only possible outside the commit zone's rename) and go.
        if not worker.in_commit:
            with contextlib.suppress(OSError):  # only our own temp name, only inside the write root
                fs.remove_file(
                    engine_temp_path(worker.output, worker.build_id),
                    kind=fs.Kind.engine_output,
                    within=worker.root or worker.output.parent,
                )
        os._exit(143)

    _escalation_watch(on_sigterm)

    def read_control() -> None:
        for raw in sys.stdin:
            try:
                msg = json.loads(raw)
            except ValueError:
                continue
            if msg.get("type") == "cancel":
                source = msg.get("source")
                worker.request_cancel(source if source in CANCEL_SOURCES else "api", msg.get("t_request_ns"))
            elif msg.get("type") == "commit":
                worker.gate.allow()
        # EOF: the supervisor is gone or closed our input; nobody wants this build any more.
        worker.watch.gone = True  # first: the cancel below may fail to report (nobody reads stdout any more)
        worker.request_cancel("service_shutdown", None)

    threading.Thread(target=read_control, name="trtls-control", daemon=True).start()
    worker.run()  # on this thread (see the module doc)
    writer.out.flush()
    # Long done (the environment record waited for it), or stuck in a cuInit past its bound: this process ends with
    # os._exit below, which runs no driver teardown beside it
    warming.settle()
    naming.join()
    # Everything is written, fsynced and reported: skip the interpreter's teardown (TensorRT's destructors and
    # module cleanup take 30–100 ms that every build would wait for). Nothing is buffered any more.
    sys.stderr.flush()
    # The supervisor writes the evidence once both pipes reach end-of-file, which an exit gives only after the kernel
    # has unmapped this process (TensorRT's libraries, the build's heap: ~15–20 ms here, 2026-12-04). Closed now (the
    # events' copy of stdout; fd 1, the log relay's pipe or stderr; fd 2), they end at once and the unmapping runs
    # beside the evidence (issue 31).
    with contextlib.suppress(OSError, ValueError):
        os.close(writer.out.fileno())
    for fd in (1, 2):
        with contextlib.suppress(OSError):
            os.close(fd)
    os._exit(worker.exit_code)


def _escalation_watch(on_sigterm: Callable[[], None]) -> None:
    """SIGTERM runs `on_sigterm` at once, whatever the main thread is doing. Python runs a signal's handler on the main
    thread only, between two bytecodes, and the main thread may sit inside TensorRT's builder for minutes; but the
    signal's C handler, whichever thread the kernel picked, writes the signal's number to the wakeup fd, and a thread
    of ours reads it there. The Python-level handler does the same, whichever comes first (`on_sigterm` ends the
    process). Nothing else is changed: no signal mask, so children the worker starts inherit none."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)  # set_wakeup_fd's requirement: a full pipe never blocks a signal handler
    signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    signal.signal(signal.SIGTERM, lambda *_: on_sigterm())

    def watch() -> None:
        while True:
            try:
                got = os.read(read_end, 64)
            except InterruptedError:
                continue
            if not got:
                return
            if signal.SIGTERM in got:
                on_sigterm()

    threading.Thread(target=watch, name="trtls-signals", daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
