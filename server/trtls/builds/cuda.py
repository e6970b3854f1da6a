"""The CUDA driver and runtime as the loader finds them, through ctypes (no TensorRT, no GPU needed): versions,
device 0's name and compute capability, for the build evidence and for "can an engine run here"."""

from __future__ import annotations

import ctypes
import functools
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

NVIDIA_PROC = "/proc/driver/nvidia"  # the kernel driver's own files: readable without initializing CUDA
DEVICE_NODES = "/dev"  # where its device nodes (nvidia0, nvidia1, …) are
# what chooses and orders CUDA's devices, and which libcuda answers (LD_LIBRARY_PATH: a CUDA forward-compatibility
# libcuda reports another driver version than the kernel module's)
CHOOSING_VARIABLES = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH")
# what `cuda_driver()` answers (each None where unknown); an unanswered driver's record adds `driver_unanswered`
DEVICE_FIELDS = ("cuda_driver", "device_name", "compute_capability")


def _load_first(*names: str) -> Any:
    for name in names:
        if name and (lib := load_library(name)) is not None:
            return lib
    return None


def load_library(name: str) -> ctypes.CDLL | None:
    """`ctypes.CDLL(name)`, None when it does not load; on Linux the loader runs without the GIL. `ctypes.CDLL` holds
    the GIL while the loader maps a library (libcudart: ~20 ms of a worker's start on the 16-core host, 2026-12-03),
    so a thread loading one stalled every other thread's Python; libc's `dlopen`, called as a foreign function, releases
    it. Same flags as ctypes gives (RTLD_NOW | RTLD_LOCAL), same search: the library is then wrapped by its handle."""
    dlopen = _libc_dlopen()
    if dlopen is None:
        try:
            return ctypes.CDLL(name)
        except OSError:
            return None
    sys.audit("ctypes.dlopen", name)  # what ctypes.CDLL says to an audit hook before it loads a library
    handle = dlopen(os.fsencode(name), os.RTLD_NOW | os.RTLD_LOCAL)
    return ctypes.CDLL(name, handle=handle) if handle else None


@functools.cache
def _libc_dlopen() -> Any:
    """libc's `dlopen(path, flags)` as a foreign function (which ctypes calls without the GIL); None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        dlopen = ctypes.CDLL(None).dlopen
    except (OSError, AttributeError):
        return None
    dlopen.argtypes = [ctypes.c_char_p, ctypes.c_int]
    dlopen.restype = ctypes.c_void_p
    return dlopen


def _find_library(name: str) -> str:
    """ctypes.util.find_library, except on Linux: there it runs `ldconfig -p`, then gcc and ld (~40 ms of child
    processes, on every build's critical path when no driver is installed) to return a soname that dlopen finds by
    itself: the driver's is libcuda.so.1, and a runtime older than libcudart.so.11 is none TensorRT-RTX uses."""
    if sys.platform.startswith("linux"):
        return ""
    import ctypes.util

    return ctypes.util.find_library(name) or ""


def _cuda_version_string(value: int) -> str:
    return f"{value // 1000}.{(value % 1000) // 10}"


def _driver_test_bound() -> float | None:
    """Test hook (`TRTLS_TEST_DRIVER_ANSWER_S`): a shorter bound than `DRIVER_ANSWER_S`, so a test of a driver that
    never answers ends in seconds; ignored unless a positive number."""
    try:
        value = float(os.environ.get("TRTLS_TEST_DRIVER_ANSWER_S", ""))
    except ValueError:
        return None
    return value if 0 < value < DRIVER_ANSWER_S else None


# How long anyone waits for the CUDA driver's answer, counted from when it was asked (a process's first cuInit: ~0.2 s
# on the H200 host, seconds on a many-GPU host without the persistence daemon). A cuInit that never returns — a wedged
# GPU, a driver mid-upgrade — must not hold a build, its store key or its evidence without end: by then the answer is
# `unanswered` (builds/worker/environment.py, the store's key) and the caller goes on.
DRIVER_ANSWER_S = 20.0
DRIVER_BOUND_S = _driver_test_bound() or DRIVER_ANSWER_S


class DriverProbe(threading.Thread):
    """One asking of the driver (`_ask_driver`), on a thread of its own: ctypes releases the GIL inside the driver,
    and the thread is a daemon, so one stuck in a cuInit never keeps a process from ending. `settle()` waits for it
    until its deadline, never longer; `answer` is None until it has answered."""

    def __init__(self, runtime: bool = False):
        super().__init__(name="trtls-cuda-warm", daemon=True)
        self.runtime = runtime
        self.answer: dict[str, Any] | None = None
        self.answered = threading.Event()  # set once the driver has answered (or `_ask_driver` failed)
        self.deadline = time.monotonic() + DRIVER_BOUND_S

    def run(self) -> None:
        try:
            self.answer = _ask_driver()
        finally:
            self.answered.set()
        if self.runtime:
            cuda_runtime()

    def settle(self, stopped: Callable[[], bool] | None = None) -> None:
        """Wait for the answer until the deadline (at once when it is past): never inside the driver without end;
        `stopped`: and no longer once it says so (a worker's build stopped: its stop is not held up by the record)."""
        if stopped is None:  # the whole probe, the runtime's version included
            self.join(max(0.0, self.deadline - time.monotonic()))
            return
        # the driver's answer, at once when it comes; a stop seen within 10 ms
        while not self.answered.is_set() and (left := self.deadline - time.monotonic()) > 0 and not stopped():
            self.answered.wait(min(left, 0.01))

    def record(self, stopped: bool = False) -> dict[str, Any]:
        """The device record: the driver's answer, or one that says why there is none (`unanswered`). `stopped`: the
        wait was cut by a stop, not by the bound."""
        if self.answer is not None:
            return dict(self.answer)
        if stopped and time.monotonic() < self.deadline:
            return unanswered("the build was stopped before the CUDA driver answered (cuInit)")
        return unanswered()


_asking: DriverProbe | None = None  # the process's probe still asking, if any: a second caller waits for the same one
_asking_lock = threading.Lock()


def _probe(runtime: bool = False) -> DriverProbe:
    """The probe asking now, or a new one started: never two threads inside one driver's cuInit."""
    global _asking
    with _asking_lock:
        if _asking is None or not _asking.is_alive():
            _asking = DriverProbe(runtime)
            _asking.start()
        return _asking


def answered(device: Any) -> bool:
    """Whether `device` is a record of a driver that answered: `DEVICE_FIELDS`, nothing more (the one an account may
    keep and a later key may reuse: builds/avoidance/memo.py); an `unanswered()` record is not."""
    return isinstance(device, dict) and set(device) == set(DEVICE_FIELDS)


def unanswered(why: str | None = None) -> dict[str, Any]:
    """The device record when the driver had not answered within the bound (or `why` it was not waited for):
    nothing of it known, and said."""
    why = why or f"the CUDA driver had not answered (cuInit) within {DRIVER_BOUND_S:g} s of being asked"
    return {**dict.fromkeys(DEVICE_FIELDS), "driver_unanswered": why}


def cuda_driver() -> dict[str, Any]:
    """Driver version and device 0 through libcuda, when there is one; never raises, and never waits past the
    driver's bound (`DRIVER_ANSWER_S`): a driver that has not answered by then gives `unanswered()` — a record no key
    or memo of an answered device equals."""
    probe = _probe()
    if probe.answer is None:  # (answered, it may still be asking the runtime's version: not waited for)
        probe.settle()
    return probe.record()


def _ask_driver() -> dict[str, Any]:
    found: dict[str, Any] = dict.fromkeys(DEVICE_FIELDS)
    lib = _load_first("libcuda.so.1", _find_library("cuda"), "nvcuda.dll")
    if lib is None:
        return found
    try:
        version = ctypes.c_int(0)
        if lib.cuDriverGetVersion(ctypes.byref(version)) == 0 and version.value:
            found["cuda_driver"] = _cuda_version_string(version.value)
        if lib.cuInit(0) != 0:
            return found  # a driver without a usable device (or a container without /dev/nvidia*)
        device = ctypes.c_int(0)
        if lib.cuDeviceGet(ctypes.byref(device), 0) != 0:
            return found
        name = ctypes.create_string_buffer(256)
        if lib.cuDeviceGetName(name, 256, device) == 0:
            found["device_name"] = name.value.decode(errors="replace")
        major, minor = ctypes.c_int(0), ctypes.c_int(0)
        # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75, _MINOR = 76
        if (
            lib.cuDeviceGetAttribute(ctypes.byref(major), 75, device) == 0
            and lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, device) == 0
        ):
            found["compute_capability"] = f"{major.value}.{minor.value}"
    except (AttributeError, OSError):
        pass
    return found


def warm_driver(runtime: bool = False) -> DriverProbe:
    """Probe the driver on a thread of its own, now. A process's first cuInit takes ~0.2 s on a machine with a GPU (an
    H200 host, 2026-12-03) and ctypes releases the GIL while it runs, so a caller with Python work to do first (the CLI
    loading its recipe before the store key's device probe) later finds the driver initialized: its own `cuda_driver()`
    is then quick, and still measures. `settle()` it before the process ends (no thread inside the driver at exit,
    unless the driver is stuck past its bound). `runtime`: the CUDA runtime's version too (`cuda_runtime`, remembered:
    a worker's environment record asks it, and its dlopen took ~20 ms of the 16-core host's build start,
    2026-12-03)."""
    return _probe(runtime)


@functools.cache  # one loader, one answer per process: the worker's warm thread asks first (`warm_driver`)
def cuda_runtime() -> str | None:
    """Version of the libcudart the loader finds (cudaRuntimeGetVersion needs no driver).

    TensorRT-RTX links its CUDA runtime statically, so this is the system's runtime, not
    necessarily the one inside the builder.
    """
    lib = _load_first(*(f"libcudart.so.{v}" for v in (13, 12, 11)), _find_library("cudart"))
    if lib is None:
        return None
    try:
        version = ctypes.c_int(0)
        if lib.cudaRuntimeGetVersion(ctypes.byref(version)) == 0 and version.value:
            return _cuda_version_string(version.value)
    except (AttributeError, OSError):
        pass
    return None


def gpu_available() -> bool:
    """A CUDA driver with at least one device answered. False on this CPU-only machine."""
    return cuda_driver()["device_name"] is not None


def device_fingerprint() -> str | None:
    """What decides `cuda_driver()`'s answer, read without initializing CUDA (a process's first cuInit costs ~0.2 s on
    a GPU host; this costs a directory listing and a few small reads): the kernel driver's version, the variables
    that choose and order CUDA's devices and find libcuda (`CHOOSING_VARIABLES`), and each GPU this process can open
    — its device node's minor and the driver's `information` for it (model, UUID, bus). None when the driver's files
    are not there (no NVIDIA kernel driver, or one that CUDA reaches otherwise, as WSL's): then only `cuda_driver()`
    can tell. The store's fast path
    compares it with the one taken beside the memo's device (builds/avoidance/memo.py): equal, same device 0."""
    proc, dev = NVIDIA_PROC, DEVICE_NODES
    try:
        version = _read_small(os.path.join(proc, "version"))
        gpus = os.path.join(proc, "gpus")
        infos = [_read_small(os.path.join(gpus, bus, "information")) for bus in sorted(os.listdir(gpus))]
        nodes = sorted(n for n in os.listdir(dev) if n.startswith("nvidia") and n[6:].isdigit())
    except OSError:
        return None
    usable = {n[6:] for n in nodes if os.access(os.path.join(dev, n), os.R_OK | os.W_OK)}
    seen = [i for i in infos if _minor(i) in usable]
    choice = [os.environ.get(k) for k in CHOOSING_VARIABLES]
    return repr((version, choice, sorted(usable), seen))


def _read_small(path: str) -> str:
    from trtls.fs import read_text  # the door: a regular file, bounded (a /proc file of the kernel driver)

    return read_text(path, limit=1 << 16, follow=True, errors="replace")


def _minor(information: str) -> str | None:
    for line in information.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "Device Minor":
            return value.strip()
    return None
