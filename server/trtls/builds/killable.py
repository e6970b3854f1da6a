"""A child process a Stop can end at any moment: started in its own session, so a kill of its process group ends it
and everything it started (ONNX Runtime or TensorRT threads, their own children). Used by the precision
conversion and the triage's TensorRT comparison; the build worker has its own cooperative cancel (worker.py)."""

from __future__ import annotations

import subprocess
import time
from typing import Any

from trtls.fs.kill import end_child

POLL_S = 0.05


def ran_to_the_end(proc: subprocess.Popen[Any], token: Any) -> bool:
    """Wait for `proc` (started with `start_new_session=True`); when `token.is_set` first, kill its process group,
    reap it and return False."""
    while proc.poll() is None:
        if token.is_set:
            end_child(proc)  # not reaped yet: its pid is still its own
            return False
        time.sleep(POLL_S)
    return True
