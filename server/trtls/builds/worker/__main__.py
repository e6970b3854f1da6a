"""`python -m trtls.builds.worker`: the build worker's entry point (the protocol is docs/protocol.md)."""

import sys

if sys.flags.no_site:
    # Started without `site` (builds/supervisor/spawn.py `_launch`: its module path came in PYTHONPATH): the hooks
    # site would have run still do, as site runs them — a sitecustomize, and a usercustomize where user site is on.
    import site

    site.execsitecustomize()
    if site.check_enableusersite():
        site.execusercustomize()

from trtls.builds.cuda import warm_driver
from trtls.builds.worker.parked import wait_for_start
from trtls.builds.worker.prefetch import prefetch_builder

# Started `--parked` (builds/supervisor/worker_launch.py: a `trtls build` the store may still serve), the interpreter
# and the modules above started beside the CLI's memo and store checks; nothing heavier runs before its start line —
# no builder's libraries, no driver — and its input closing ends it here, having done nothing.
wait_for_start(sys.argv[1:])

# The environment record asks the CUDA driver for device 0, and a process's first cuInit is ~0.15 s on a GPU host
# (the 16-core H200 host, 2026-12-03): the builder waited ~70–100 ms for it once TensorRT was imported. Started here,
# before the worker's own modules load, it runs ~40 ms sooner beside them and TensorRT's import; so does the runtime's
# version (a dlopen of libcudart), which the same record asks.
warming = warm_driver(runtime=True)

# TensorRT's libraries load on a thread of their own (libc's dlopen, without the GIL) while the modules below import:
# the builder's import then finds them loaded (~20 ms of its ~38 ms here, 2026-12-05; builds/worker/prefetch.py).
loading = prefetch_builder(sys.argv[1:])

from trtls.builds.worker.main import main  # noqa: E402 (after the probe's start, on purpose)

sys.exit(main(warming, loading))
