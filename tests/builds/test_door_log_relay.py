"""The log relay's text for people is terminal-safe (issue 27, item 13): a line a library printed that the relay
passes on to stderr cannot clear the screen, set the title or write the clipboard; TensorRT's own messages (node
names included) reach `on_log` unchanged, for the worker's JSON events (the encoder escapes them; each face escapes
them where it prints them).

The real TensorRT-RTX built-in logger and relay, in a child process (the relay takes fd 1)."""

from __future__ import annotations

import json
import subprocess
import sys

CHILD = r"""
import json, os, sys
from trtls.builds.worker import adapter
from trtls.builds.worker.log_relay import process_relay

bm = adapter.load_builder_module("tensorrt_rtx")
got = []
relay = process_relay(bm.trt, lambda severity, msg: got.append((severity, msg)))
os.write(1, b"\x1b[2J\x1b]52;c;ZXZpbA==\x07a library line\n")
os.write(1, b"[01/01/2026-00:00:00] [TRT] [W] node \x1b]0;pwned\x07conv1 is odd\n")
relay.sync()
print(json.dumps(got), file=sys.stderr)
"""


def test_lines_passed_on_to_stderr_are_terminal_safe_and_trt_messages_stay_raw_for_json() -> None:
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    *other, last = proc.stderr.decode().strip().splitlines()
    assert "\\x1b[2J\\x1b]52;c;ZXZpbA==\\x07a library line" in other  # visible, inert
    assert b"\x1b" not in b"\n".join(line.encode() for line in other)  # no escape reached the terminal
    assert json.loads(last) == [["WARNING", "node \x1b]0;pwned\x07conv1 is odd"]]  # data: raw, escaped by JSON
