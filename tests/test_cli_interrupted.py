"""The CLI's safety net: a command with no stop of its own, interrupted by a real SIGINT (Python's default handler:
KeyboardInterrupt wherever it was), ends with one line and exit 130 — not a traceback. The commands with their own
stop (build, matrix, route build, gates, reduce) are tested where they live."""

from __future__ import annotations

import subprocess
import sys

# `trtls info`'s command, replaced by one that receives a real SIGINT while it runs
INTERRUPTED_INFO = """
import signal, sys
import trtls.cli.main as cli
cli.cmd_info = lambda args: signal.raise_signal(signal.SIGINT)
sys.exit(cli.main(["info"]))
"""


def test_a_command_interrupted_by_ctrl_c_says_so_and_exits_130() -> None:
    proc = subprocess.run([sys.executable, "-c", INTERRUPTED_INFO], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 130, proc.stderr
    assert "trtls info: interrupted by Ctrl-C" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
