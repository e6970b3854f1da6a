"""`python -m trtls.builds.farm.preloaded_worker FD MODULE`: the ordinary worker, started by a node worker (actor)
before its job exists, that imports the builder (TensorRT, the worker's largest fixed cost) at once and says when on
file descriptor FD — one JSON line, then FD is closed: {"t": wall time the import ended, "importS", "modules", "pid"}.

Then it is exactly `python -m trtls.builds.worker`: it reads its job on stdin (or exits when stdin closes first).
The line on FD is how a matrix's evidence knows when its worker had TensorRT loaded (docs/farm.md "Where the fixed
cost goes"), and how a warm farm's actor knows its worker is ready before it is claimed.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from trtls.core.vocabulary import BUILDER_MODULES


def main() -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as the worker: Ctrl-C belongs to the supervisor
    fd, module = int(sys.argv[1]), sys.argv[2]
    t0 = time.time()
    from trtls.builds.worker import main as worker

    events = os.dup(1)  # as the worker's EventWriter does: nothing the import prints may reach the event stream
    os.dup2(2, 1)
    try:
        worker.preload([module])
    finally:
        sys.stdout.flush()
        os.dup2(events, 1)  # the worker's own EventWriter takes fd 1 again (and points fd 1 at stderr)
        os.close(events)
    loaded = [m for m in BUILDER_MODULES if m in sys.modules]
    info = {"t": time.time(), "importS": round(time.time() - t0, 3), "modules": loaded, "pid": os.getpid()}
    try:
        os.write(fd, (json.dumps(info) + "\n").encode())
        os.close(fd)
    except OSError:  # the actor is gone: the job will never come (stdin closes too)
        pass
    sys.argv = [sys.argv[0]]  # no --preload: the builder is already imported
    return worker.main()


if __name__ == "__main__":
    sys.exit(main())
