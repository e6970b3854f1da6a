"""`trtls` (`serve`, `build`: the arguments given) with two of its functions counted: every full recipe check
(`check_recipe`) and every worker job built (`worker_job`) appends one line to the file `TRTLS_TEST_COUNT_FILE`
names. The wrappers are installed before any module binds the names (`from trtls.builds.supervisor.job import
worker_job` in the supervisor and the store glue), so every caller in this process is counted, whichever layer it
sits in; the worker children run unwrapped."""

from __future__ import annotations

import functools
import os
import sys
import traceback
from pathlib import Path
from typing import Any

COUNT_FILE = Path(os.environ["TRTLS_TEST_COUNT_FILE"])


def _counted(module: Any, name: str, label: str) -> None:
    real = getattr(module, name)

    @functools.wraps(real)
    def counted(*args: Any, **kwargs: Any) -> Any:
        caller = traceback.extract_stack(limit=4)[-2]  # who called it: the test's message names the call site
        what = args[2] if label == "job" and len(args) > 2 else Path(str(args[0])).name if args else ""
        with COUNT_FILE.open("a", encoding="utf-8") as fh:
            fh.write(f"{label} {what} {Path(caller.filename).name}:{caller.lineno}\n")
        return real(*args, **kwargs)

    setattr(module, name, counted)


def main() -> int:
    import trtls.builds.supervisor.job
    import trtls.onnx_files.profile_checks

    _counted(trtls.onnx_files.profile_checks, "check_recipe", "check")
    _counted(trtls.builds.supervisor.job, "worker_job", "job")
    from trtls.cli.main import main as trtls_main

    return trtls_main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
