"""The worker's threads allocate from glibc's main arena (issue 31, the fixed cost of a small build;
builds/worker/heap.py): TensorRT builds on the worker's builder thread, and a thread arena of its own handed its heap
back to the kernel and faulted it in again (~20 ms of `demo`'s build). Real processes: glibc's own `malloc_stats`
says which arenas exist, and each entry point of the worker is run with its threads' starts logged."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import trtls
from trtls.builds.worker.heap import chosen_by_person
from trtls.core.build_records import BuildEnvironment

SERVER = Path(trtls.__file__).resolve().parent.parent
GLIBC = sys.platform.startswith("linux") and bool(os.confstr("CS_GNU_LIBC_VERSION"))

ARENAS = """
import ctypes, sys, threading
from trtls.builds.worker.heap import share_main_arena
said = share_main_arena()
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.free.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
def allocate():
    libc.free(libc.malloc(4096))
thread = threading.Thread(target=allocate)
thread.start()
thread.join()
print(said, flush=True)
libc.malloc_stats()  # glibc's own account, one "Arena N:" per arena, on stderr
"""

# The worker's entry points as they run, with every thread start and the `mallopt` lookup logged in order.
ENTRY = """
import _thread, runpy, sys
log = open(sys.argv[1], "a", buffering=1)
assert "threading" not in sys.modules  # threading takes _thread.start_new_thread when it is imported
real_start = _thread.start_new_thread
def start(*args, **kwargs):
    log.write("thread\\n")
    return real_start(*args, **kwargs)
_thread.start_new_thread = start
def hook(event, args):
    if event == "ctypes.dlsym" and args[1] == "mallopt":
        log.write("mallopt\\n")
sys.addaudithook(hook)
module, sys.argv = sys.argv[2], ["trtls-worker", *sys.argv[3:]]
runpy.run_module(module, run_name="__main__")
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not (k.startswith("MALLOC_") or k == "GLIBC_TUNABLES")}
    return {**env, "PYTHONPATH": str(SERVER), **extra}


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc arenas")
@pytest.mark.parametrize(
    ("extra", "shared"),
    [({}, True), ({"MALLOC_ARENA_MAX": "4"}, False), ({"GLIBC_TUNABLES": "glibc.malloc.top_pad=0"}, False)],
)
def test_a_thread_allocates_from_the_main_arena_unless_the_person_chose_a_malloc_policy(
    extra: dict[str, str], shared: bool
) -> None:
    done = subprocess.run(
        [sys.executable, "-S", "-c", ARENAS], capture_output=True, text=True, check=True, env=_env(**extra)
    )
    arenas = [line for line in done.stderr.splitlines() if line.startswith("Arena ")]
    assert done.stdout.strip() == ("1" if shared else "None")
    assert arenas[0] == "Arena 0:", done.stderr
    assert (arenas == ["Arena 0:"]) is shared, f"{extra}: {arenas}"


def test_a_malloc_policy_in_the_environment_is_the_persons() -> None:
    assert not chosen_by_person({})
    assert chosen_by_person({"MALLOC_ARENA_MAX": "2"})
    assert chosen_by_person({"MALLOC_TOP_PAD_": "0"})
    assert chosen_by_person({"GLIBC_TUNABLES": "glibc.rtld.nns=2:glibc.malloc.arena_max=2"})
    assert not chosen_by_person({"GLIBC_TUNABLES": "glibc.rtld.optional_static_tls=512"})
    assert not chosen_by_person({"MALLOCATOR": "x"}), "a name glibc does not read"


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc arenas")
@pytest.mark.parametrize("entry", ["trtls.builds.worker", "trtls.builds.farm.preloaded_worker"])
def test_each_entry_of_the_worker_sets_the_limit_before_its_first_thread(entry: str, tmp_path: Path) -> None:
    log = tmp_path / "order.log"
    read, write = os.pipe()  # the preloaded worker's FD, where it says TensorRT is imported
    args = [str(write), "auto"] if entry.endswith("preloaded_worker") else []
    try:
        done = subprocess.run(
            [sys.executable, "-c", ENTRY, str(log), entry, *args],
            stdin=subprocess.DEVNULL,  # no job: the worker ends after its start, as a dropped one does
            capture_output=True,
            text=True,
            env=_env(),
            pass_fds=(write,),
            timeout=300,
        )
    finally:
        os.close(write)
        os.close(read)
    order = log.read_text().splitlines()
    assert done.returncode == 2, done.stderr  # stdin closed before a job: "nobody wants this build"
    assert order[0] == "mallopt" and order.count("mallopt") == 1, order
    assert "thread" in order, "the worker starts threads (the driver's probe, the libraries' loader, the builder)"


@pytest.mark.skipif(not GLIBC, reason="glibc's malloc arenas")
def test_the_build_environment_record_says_what_the_worker_set() -> None:
    def probe(**extra: str) -> dict[str, object]:
        done = subprocess.run(
            [sys.executable, "-m", "trtls.builds.worker", "--probe"],
            capture_output=True,
            text=True,
            check=True,
            env=_env(**extra),
            timeout=300,
        )
        return json.loads(done.stdout.splitlines()[-1])

    record = probe()
    assert record["malloc_arena_max"] == 1
    declared = [k for k in BuildEnvironment.model_fields if k != "language"]  # `language`: an external worker's
    assert [k for k in record if k != "capabilities"] == declared, "the worker writes the model's keys, in order"
    assert probe(MALLOC_ARENA_MAX="2")["malloc_arena_max"] is None
