"""log_relay with the real TensorRT-RTX built-in logger, in a child process (the relay takes fd 1): VERBOSE and INFO
never reach Python, what one call logged is delivered by the time sync() returns, a message with newlines stays
one message, and what is not TensorRT's goes on to stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

CHILD = r"""
import json, os, sys
from trtls.builds.worker import adapter
from trtls.builds.worker.log_relay import process_relay

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
from trtls.builds.worker import adapter
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


# The shape TensorRT-RTX 1.7's built-in logger writes one message in (strace of a real build): the prefix in
# pieces, the text in one write with its own newlines, then "\n" alone.
STRESS_CHILD = r"""
import json, os, random, sys, threading, time
from trtls.builds.worker import adapter
from trtls.builds.worker.log_relay import process_relay

bm = adapter.load_builder_module("tensorrt_rtx")
got = []
relay = process_relay(bm.trt, lambda severity, msg: got.append((severity, msg)))
network = bm.trt.Builder(relay.logger).create_network(0)
parser = bm.trt.OnnxParser(network, relay.logger)
count = int(sys.argv[2])
rng = random.Random(18)
missing_at_sync = []
done = threading.Event()

def body(k):
    lines = [f"trtls-stress {k}: Error Code 1: Myelin ([myelin_graph.h:1295] CHECK_GE(smem_limit, 47104) failed."]
    lines += [f"  LHS: {k * i}" for i in range(1, 2 + k % 5)] + [f" In compileGraph at codeGenerator.cpp:{k})"]
    return "\n".join(lines)

def log_like_tensorrt(k):
    for piece in ("[", "12", "/", "01", "/", "2026", "-", "20", ":", "07", ":", "56", "] ", "[TRT] [E] "):
        os.write(1, piece.encode())
    if k % 7 == 0:
        time.sleep(0)  # let the reader in mid-message
    os.write(1, body(k).encode())
    if k % 11 == 0:
        time.sleep(0.0005)  # the text is in, its closing newline is not: where a read used to end a message
    os.write(1, b"\n")

def sync_all_the_time():  # markers from another thread land anywhere inside the messages being written
    while not done.is_set():
        relay.sync()
        time.sleep(rng.random() / 2000)

syncer = threading.Thread(target=sync_all_the_time)
syncer.start()
real = 0
for k in range(count):
    log_like_tensorrt(k)
    if k % 50 == 0:
        parser.parse(b"not an onnx model")  # TensorRT's own logger, between ours
        real += 1
    if k % 3 == 0:
        relay.sync()  # what this thread logged must be out, whole, when sync returns
        if not got or got[-1][1] != body(k) and not (k % 50 == 0 and "ParseFromCodedStream" in got[-1][1]):
            missing_at_sync.append(k)
done.set()
syncer.join()
relay.sync()
with open(sys.argv[1], "w") as f:
    json.dump({"got": got, "expected": [body(k) for k in range(count)], "real": real, "missing": missing_at_sync}, f)
"""


def test_a_thousand_multiline_messages_under_load_arrive_whole(tmp_path: Path) -> None:
    """Defect (issue 18): a read boundary ended a message, so a Myelin error lost its last line under load.
    Real relay, real pipe, TensorRT's own write pattern, 1,200 messages, CPU burners on every core and a thread
    calling sync() all the time: every message arrives once, whole, in order, and by the time sync returns."""
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(max(2, os.cpu_count() or 2))]
    try:
        out = tmp_path / "relay.json"
        proc = subprocess.run(
            [sys.executable, "-c", STRESS_CHILD, str(out), "1200"], capture_output=True, text=True, timeout=600
        )
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(out.read_text())
    ours = [msg for severity, msg in result["got"] if msg.startswith("trtls-stress")]
    assert ours == result["expected"]  # none cut, merged, lost or repeated
    assert all(severity == "ERROR" for severity, _ in result["got"])
    tensorrt_own = [msg for _, msg in result["got"] if "ParseFromCodedStream" in msg]
    assert len(tensorrt_own) == result["real"] == 24 and len(result["got"]) == 1200 + 24
    assert result["missing"] == []
    assert "LHS" not in proc.stderr and "compileGraph" not in proc.stderr  # no piece of a message fell out
    assert not proc.stdout


def test_the_framer_ends_a_message_at_the_next_one_not_at_a_read() -> None:
    """The reads that cut the Myelin error, replayed: the text arrives without its closing newline, then the newline
    alone; a sync marker lands in the middle of the next message's prefix."""
    from trtls.builds.worker.log_relay import LogFramer

    text = "Error Code 1: Myelin (CHECK_GE(smem_limit, 47104) failed.\n  LHS: 31744\n  RHS: 48128\n In compileGraph)"
    framer = LogFramer()
    assert framer.feed(b"[12/01/2026-20:07:56] [TRT] [E] " + text.encode()) == []
    assert framer.feed(b"\n") == []  # a complete line, but the message may go on: it ends where the next begins
    assert framer.feed(b"[12/01/2026-20:07:56] [TR\x00trtls-log-sync 7\n") == []  # mid-line: decided at line end
    assert framer.feed(b"T] [W] next\n") == [("log", "ERROR", text), ("mark", 7)]
    assert framer.idle() == [("log", "WARNING", "next")]  # the pipe went quiet after a complete line
