"""What kind of failure a TensorRT log describes: an internal error (a bug or limit inside TensorRT) is not
a bad recipe and not bad luck, so it gets its own record and its own advice.

TensorRT reports them as `Error Code 2: Internal Error (Assertion … failed. In analyze at …graphScope.cpp:…)`,
`Error Code 10: Internal Error (Could not find any implementation for node …)`, or, from its Myelin
compiler, `Error Code 1: Myelin ([…] MyelinCheckException: file.cpp:278: CHECK(…) failed. In compileGraph at
…)` — the last measured here: TensorRT-RTX 1.7 on a CPU with `tactic_shared_memory_kib = 32`, and with REFIT
or STRIP_PLAN (their compile needs a GPU). The first internal error in the log is the cause; later ones
(`Assertion engine != nullptr failed`) are its consequences.

Every record here is a `core.failure_record.Failure` (the model summary.json's `failure` and the worker's
`build_finished.failure` share), given only the keys its kind records.
"""

from __future__ import annotations

import re
from typing import Any

from trtls.core.failure_record import Failure, MemoryResource
from trtls.core.tensorrt_log_words import NO_IMPLEMENTATION, NO_RUNNERS

_INTERNAL = re.compile(r"Error Code (?P<code>\d+): (?P<family>Internal Error|Myelin) \((?P<detail>.*)\)\s*$", re.S)
_ASSERTION = re.compile(r"Assertion (?P<assertion>.+?) failed")
_CHECK = re.compile(r"(?P<where>[\w./-]+\.(?:cpp|hpp|h|cu)):(?P<line>\d+): (?P<assertion>CHECK\w*\(.*?\)) failed")
_IN_AT = re.compile(r"In (?P<function>\w+) at (?P<file>[^\s)]+?\.(?:cpp|hpp|h|cu))(?::(?P<line>\d+))?")
_PREFIX = re.compile(r"\[(?P<file>[\w.]+\.(?:cpp|hpp|h|cu))::(?P<function>\w+)::(?P<line>\d+)\]")
# Where TensorRT names the layer: "… for node X.", "node {ForeignNode[A...B]}", "(X: message", "layer X"
_LAYER_PATTERNS = (
    re.compile(r"for node (?P<layer>\{ForeignNode\[.*?\]\}|[^\s.,)]+(?:\.[^\s.,)]+)*)"),
    re.compile(r"\bnode (?P<layer>\{ForeignNode\[.*?\]\})"),
    re.compile(r"\blayer (?P<layer>[^\s,;:)]+)"),
    re.compile(r"\b(?:for|at|in) (?P<layer>/[^\s,;:)]+)"),
    re.compile(r"^(?P<layer>/[^\s:]+|[A-Za-z_][\w./-]*_\d+):\s"),
    re.compile(rf"(?P<layer>[^\s.]\S*) {NO_RUNNERS}"),  # TensorRT-RTX 1.7.1, tacticSupply.cpp
)
_CONSEQUENCES = ("engine != nullptr", "enginePtr != nullptr")


def internal_error(logs: list[dict[str, str]] | list[tuple[str, str]]) -> Failure | None:
    """The first TensorRT internal error in the logs, as a record; None when there is none."""
    found: list[Failure] = []
    for entry in logs:
        severity, msg = (entry["severity"], entry["msg"]) if isinstance(entry, dict) else entry
        if severity not in ("ERROR", "INTERNAL_ERROR"):
            continue
        record = parse_internal_error(msg)
        if record is not None:
            found.append(record)
    causes = [r for r in found if not any(c in (r.assertion or "") for c in _CONSEQUENCES)]
    return (causes or found)[0] if found else None


def parse_internal_error(msg: str) -> Failure | None:
    m = _INTERNAL.search(msg)
    if m is None:
        return None
    detail = m.group("detail")
    if m.group("family") == "Myelin" and "Exception" not in detail and "failed" not in detail:
        return None  # a Myelin message that is not an internal check
    record: dict[str, Any] = {
        "kind": "internal_error",
        "errorCode": int(m.group("code")),
        "message": msg.strip(),
        "assertion": None,
        "source": None,
        "layer": None,
    }
    check = _CHECK.search(detail)
    assertion = _ASSERTION.search(detail)
    if check is not None:
        record["assertion"] = check.group("assertion")
        record["source"] = f"{check.group('where').rsplit('/', 1)[-1]}:{check.group('line')}"
    elif assertion is not None:
        record["assertion"] = assertion.group("assertion").strip()
    else:  # e.g. "Could not find any implementation for node …": the first sentence says what happened
        record["summary"] = re.split(r"(?<=\w)\.\s|\.$", detail.strip(), maxsplit=1)[0][:200]
    where = _IN_AT.search(detail)
    prefix = _PREFIX.search(msg)
    if where is not None:
        record["function"] = where.group("function")
        if record["source"] is None:
            line = where.group("line")
            record["source"] = where.group("file").rsplit("/", 1)[-1] + (f":{line}" if line else "")
    elif prefix is not None:
        record["function"] = prefix.group("function")
        record["source"] = record["source"] or f"{prefix.group('file')}:{prefix.group('line')}"
    record["layer"] = _layer(detail)
    return Failure(**record)


_SOURCE_FILE = re.compile(r"\.(?:cpp|hpp|h|cu)(?::\d+)?$")


def _layer(detail: str) -> str | None:
    for pattern in _LAYER_PATTERNS:
        for m in pattern.finditer(detail):
            layer = m.group("layer").rstrip(".")
            # "In analyze at /_src/optimizer/common/graphScope.cpp:471" names TensorRT's source, not a layer
            # (measured: silero-vad's If-based model on TensorRT-RTX 1.7, tests/onnx_files/test_third_party_models.py)
            if not _SOURCE_FILE.search(layer):
                return layer
    return None


def describe(record: Failure) -> str:
    """One line for a diagnostic: what failed, where, and in which layer when the log names one."""
    what = f"{record.assertion} failed" if record.assertion else record.summary or "internal check failed"
    where = f" in {record.function}" if record.function else ""
    where += f" ({record.source})" if record.source else ""
    layer = f"; layer named by the log: {record.layer}" if record.layer else ""
    return f"TensorRT internal error (Error Code {record.errorCode}): {what}{where}{layer}"


_LEAN = re.compile(r"Unable to load library: (?P<lib>libnvinfer_lean[\w.]*)")


def setting_failure(logs: list[dict[str, str]] | list[tuple[str, str]]) -> Failure | None:
    """Failures the log pins on one recipe key. Measured: TensorRT-RTX 1.7 with version_compatible alone fails
    with `Error Code 6: API Usage Error (Unable to load library: libnvinfer_lean.so.1 …)` — the wheel ships no
    lean runtime to embed; with exclude_lean_runtime it builds."""
    for entry in logs:
        severity, msg = (entry["severity"], entry["msg"]) if isinstance(entry, dict) else entry
        m = _LEAN.search(msg) if severity in ("ERROR", "INTERNAL_ERROR") else None
        if m is not None:
            return Failure(
                kind="setting",
                code="TRT146",
                key="version_compatible",
                hint=f"version_compatible embeds the lean runtime, and this TensorRT has no {m.group('lib')} "
                "to embed: set exclude_lean_runtime = true (the lean runtime must then be installed where the "
                "engine runs)",
            )
    return None


# ---------------------------------------------------------------- memory exhaustion

# Lines that say an allocation failed. Measured here: TensorRT-RTX 1.7 building the quickstart `demo` under
# `ulimit -v 600000` logs `Unexpected exception std::bad_alloc`; with `workspace_mib = 1` the quickstart `large`
# fails in Myelin with "no tactics to implement the operation within workspace limit. Consider increase the allowed
# workspace size". Reported by users and seen on the lent H200: `Error Code 2: OutOfMemory (Requested size was N
# bytes.)`; CUDA's own wording (`cudaErrorMemoryAllocation`, `CUDA_ERROR_OUT_OF_MEMORY`, "out of memory").
_ALLOCATION = re.compile(
    r"Error Code 2: OutOfMemory|\bOutOfMemory\b|Requested size was|std::bad_alloc|\bMemoryError\b|"
    r"cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY|(?i:\bout of memory\b)|[Ff]ailed to allocate|"
    r"[Aa]llocation (?:of \S+ bytes )?failed|Cannot allocate memory",
)
_WORKSPACE_LIMIT = re.compile(r"within workspace limit|increase the allowed workspace size|[Ii]nsufficient workspace")
_DEVICE = re.compile(r"\bcuda|\bGPU\b|\bdevice\b", re.I)
_REQUESTED = re.compile(r"Requested size was (?P<n>\d+)\s*bytes", re.I)
# the recipe keys a retry can change (core.build_config: BuilderSettings, MemoryPoolLimits)
LESS_MEMORY_KEYS = (
    "builder.memory_pool_limits.workspace_mib",
    "builder.memory_pool_limits.tactic_dram_mib",
    "builder.max_aux_streams",
    "builder.max_num_tactics",
)
WORKSPACE_KEY = "builder.memory_pool_limits.workspace_mib"


def memory_exhaustion(
    logs: list[dict[str, str]] | list[tuple[str, str]],
    error: str | None = None,
    stderr_tail: list[str] | tuple[str, ...] = (),
    resources: dict[str, Any] | None = None,
) -> Failure | None:
    """The build ran out of memory, as a failure record (`kind: out_of_memory`); None when nothing says so.

    Said by: an allocation failure in TensorRT's errors (OutOfMemory, "Requested size was", std::bad_alloc, CUDA's
    out-of-memory), a Python MemoryError in the worker's error or stderr, the kernel's OOM killer acting while the
    worker ran (`resources.oom.oomKill`), or a workspace pool too small for any tactic. TensorRT's "Could not find any
    implementation for node" counts only next to an allocation failure: alone it is an internal error (whose retry
    advice, core.evidence, says it is often memory: nothing measured says so)."""
    lines: list[str] = []
    for entry in logs:
        severity, msg = (entry["severity"], entry["msg"]) if isinstance(entry, dict) else entry
        if severity in ("ERROR", "INTERNAL_ERROR"):
            lines.append(msg)
    said = [m for m in lines if _ALLOCATION.search(m)]
    said += [t for t in (error or "", *stderr_tail) if t and _ALLOCATION.search(t) and t not in said]
    workspace = [m for m in lines if _WORKSPACE_LIMIT.search(m)]
    oom = (resources or {}).get("oom") or {}
    killed_by_oom = oom.get("oomKill") is True
    if not said and not workspace and not killed_by_oom:
        return None
    evidence = (workspace + said)[:3] + [m for m in lines if NO_IMPLEMENTATION in m][:1]
    if killed_by_oom:
        evidence.append(f"the kernel's OOM killer acted while the worker ran ({oom.get('how')})")
    resource: MemoryResource
    if workspace and not said:
        resource = "workspace_limit"
    elif said and any(_DEVICE.search(m) for m in said):
        resource = "device_memory"
    else:
        resource = "host_memory" if (killed_by_oom or said) else "memory"
    requested = next((int(m.group("n")) for m in map(_REQUESTED.search, said) if m), None)
    rss = (resources or {}).get("peakRssBytes")
    return Failure(
        kind="out_of_memory",
        resource=resource,
        evidence=evidence,
        requestedBytes=requested,
        peakRssBytes=rss,
        peakRssHow=(resources or {}).get("how"),
        oomKill=oom.get("oomKill"),
        keys=[WORKSPACE_KEY] if resource == "workspace_limit" else list(LESS_MEMORY_KEYS),
        advice=_memory_advice(resource, rss),
    )


def memory_advice(record: Failure) -> str:
    """What a retry should change, naming the recipe keys (a blind retry runs out the same way)."""
    return _memory_advice(record.resource, record.peakRssBytes)


def _memory_advice(resource: str | None, peak: object) -> str:
    if resource == "workspace_limit":
        return (
            "the workspace pool limit leaves TensorRT no tactic for a layer: raise "
            f"{WORKSPACE_KEY} (or remove it to use the device's memory); a retry with the same limit fails the same way"
        )
    at = f" (worker peak RSS {peak / (1 << 20):.0f} MiB)" if isinstance(peak, int) else ""
    return (
        f"the build ran out of memory{at}: retry with less memory for the builder — lower "
        "builder.memory_pool_limits.workspace_mib and builder.memory_pool_limits.tactic_dram_mib, fewer "
        "auxiliary streams (builder.max_aux_streams = 0), fewer tactics (builder.max_num_tactics) — or on a "
        "machine with more memory; a blind retry runs out the same way"
    )


def describe_memory(record: Failure) -> str:
    """One line for a diagnostic: what ran out and what said so."""
    what = {
        "workspace_limit": "the workspace pool limit is too small for any tactic",
        "device_memory": "GPU memory ran out",
        "host_memory": "host memory ran out",
    }.get(str(record.resource), "memory ran out")
    requested = record.requestedBytes
    asked = f" (TensorRT asked for {requested} bytes)" if requested else ""
    first = (record.evidence or [""])[0]
    said = f"; the log: {first[:200]}" if first else ""
    return f"out of memory during the build: {what}{asked}{said}"


def classify_failure(
    outcome: str,
    failure: Failure | None,
    logs: list[dict[str, str]] | list[tuple[str, str]],
    error: str | None = None,
    stderr_tail: list[str] | tuple[str, ...] = (),
    resources: dict[str, Any] | None = None,
) -> Failure | None:
    """Why a build that did not finish failed: the worker's own record (a setting, a plugin, the precision step) when
    it sent one; else memory exhaustion (before an internal error: an allocation failure is often logged as "Could not
    find any implementation"), a TensorRT internal error, or a setting the log pins. A killed worker can only have run
    out of memory (the OOM killer, a MemoryError) — anything else about it is unknown."""
    if outcome not in ("failed", "killed"):
        return failure
    if failure is not None and failure.kind in ("setting", "plugin", "precision"):
        return failure
    memory = memory_exhaustion(logs, error, stderr_tail, resources)
    if memory is not None:
        return memory
    if failure is not None or outcome != "failed":
        return failure
    return internal_error(logs) or setting_failure(logs)
