"""log_relay with the real TensorRT-RTX built-in logger, in a child process (the relay takes fd 1): VERBOSE and INFO
never reach Python, what one call logged is delivered by the time sync() returns, a message with newlines stays
one message, and what is not TensorRT's goes on to stderr."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, os, sys
from trtls.builds import adapter
from trtls.builds.log_relay import process_relay

bm = adapter.load_builder_module("tensorrt_rtx")
got = []
relay = process_relay(bm.trt, lambda severity, msg: got.append((severity, msg)))
builder = bm.trt.Builder(relay.logger)
network = builder.create_network(0)
parser = bm.trt.OnnxParser(network, relay.logger)
ok = parser.parse_from_file(sys.argv[1])
relay.sync()
after_good = list(got)
network2 = builder.create_network(0)  # kept: a parser must not outlive its network
parser2 = bm.trt.OnnxParser(network2, relay.logger)
parser2.parse(b"not an onnx model")
relay.sync()
after_bad = list(got)
os.write(1, b"a line a library printed\n")
os.write(1, b"[01/01/2026-00:00:00] [TRT] [W] first line\nsecond line\n")
relay.sync()
print(json.dumps({"ok": ok, "after_good": after_good, "after_bad": after_bad, "all": got}), file=sys.stderr)
"""


def test_relay_filters_in_cpp_and_syncs(quickstart_models: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(quickstart_models / "demo.onnx")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    *other, last = proc.stderr.strip().splitlines()
    result = json.loads(last)
    assert result["ok"] is True
    severities = {s for s, _ in result["all"]}
    assert severities <= {"WARNING", "ERROR", "INTERNAL_ERROR"}, severities  # no INFO or VERBOSE crossed into Python
    new = result["after_bad"][len(result["after_good"]) :]
    assert any(s == "ERROR" and "ParseFromCodedStream" in m for s, m in new), new  # there by the time sync returned
    assert ["WARNING", "first line\nsecond line"] in result["all"]
    assert "a line a library printed" in other
    assert not proc.stdout  # fd 1 belongs to the relay: nothing leaks to the real stdout


def test_python_logger_sees_verbose_the_relay_does_not(quickstart_models: Path) -> None:
    """Why the relay exists: the same parse through a Python ILogger calls Python for every VERBOSE message."""
    child = r"""
import sys
from trtls.builds import adapter
bm = adapter.load_builder_module("tensorrt_rtx")
calls = []
logger = adapter.make_logger(bm, lambda s, m: calls.append(s))
builder = bm.trt.Builder(logger)
network = builder.create_network(0)
parser = bm.trt.OnnxParser(network, logger)
assert parser.parse_from_file(sys.argv[1])
print(sum(1 for s in calls if s == "VERBOSE"))
"""
    proc = subprocess.run(
        [sys.executable, "-c", child, str(quickstart_models / "demo.onnx")], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert int(proc.stdout.strip()) > 100
