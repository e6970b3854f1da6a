"""A worker written only from docs/protocol.md, standing in for a C++ builder service with its own
IProgressMonitor (it builds nothing: it walks a fixed phase tree and writes a small "engine").
It is a named stand-in for an external builder — the real builder path is tested with TensorRT-RTX."""

import json
import os
import select
import sys
import time


# PROTOCOL_FAULT (tests of the supervisor's refusals): `undeclared` adds a field the protocol does not declare to
# every step; `version` speaks a protocol version the supervisor does not.
FAULT = os.environ.get("PROTOCOL_FAULT", "")


def emit(event_type, **fields):
    if FAULT == "undeclared" and event_type == "step":
        fields["percent"] = 50
    record = {"v": 2 if FAULT == "version" else 1, "type": event_type, "t_ns": time.monotonic_ns(), **fields}
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def cancelled():
    ready, _, _ = select.select([sys.stdin], [], [], 0)
    if ready:
        line = sys.stdin.readline()
        if not line:
            return "service_shutdown"
        msg = json.loads(line)
        if msg.get("type") == "cancel":
            return msg["source"], msg["t_request_ns"]
    return None


job = json.loads(sys.stdin.readline())
emit("build_started", build_id=job["build_id"], engine=job["engine"], pid=os.getpid(),
     environment={"module": "cpp-service", "version": "10.9.0", "language": "cpp"}, build_config_hash="f" * 64)
emit("phase_start", phase_id="0", parent_id=None, name="Building engine", num_steps=int(os.environ.get("STEPS", "5")))
stop = None
for step in range(int(os.environ.get("STEPS", "5"))):
    time.sleep(0.05)
    stop = cancelled()
    if stop:
        break
    emit("step", phase_id="0", step=step)
if stop:
    t_seen = time.monotonic_ns()
    emit("phase_finish", phase_id="0", status="cancelled")
    emit("builder_returned", ok=False)
    source, t_req = stop if isinstance(stop, tuple) else (stop, None)
    emit("cancel_acknowledged", source=source, t_request_ns=t_req, t_seen_ns=t_seen)
    emit("cache_decision", decision="discarded", reason="cancelled")
    emit("build_finished", outcome="cancelled", cleanup_status="cleaned", t_cleanup_ns=time.monotonic_ns())
    sys.exit(3)
emit("phase_finish", phase_id="0", status="done", step=int(os.environ.get("STEPS", "5")) - 1)
emit("builder_returned", ok=True)
out = job["output"]
os.makedirs(os.path.dirname(out), exist_ok=True)
tmp = f"{out}.trtls-tmp-{job['build_id']}"
with open(tmp, "wb") as fh:
    fh.write(b"engine from an external worker")
    fh.flush()
    os.fsync(fh.fileno())
os.replace(tmp, out)
emit("artifact", action="written", kind="engine", path=out, size=30)
emit("cache_decision", decision="cold", reason="no cache")
emit("build_finished", outcome="built", cleanup_status="not_needed", t_cleanup_ns=time.monotonic_ns())
if os.environ.get("LINGER_UNTIL"):  # a worker slow to exit once it reported (the GPU's teardown on a real host)
    sys.stdout.flush()
    os.close(1)  # its output ends here: the supervisor has read every event
    os.close(2)
    deadline = time.monotonic() + 120
    while not os.path.exists(os.environ["LINGER_UNTIL"]) and time.monotonic() < deadline:
        time.sleep(0.01)
    os._exit(7)
