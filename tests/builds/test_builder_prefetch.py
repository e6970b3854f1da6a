"""The worker loads its builder's shared libraries on a thread while its own modules import (issue 31,
builds/worker/prefetch.py): without the GIL (libc's dlopen), and only after the C modules its imports load — each a
dlopen that would otherwise wait behind the builder's, holding the GIL. A library that does not load is the builder
import's to report. Each runs a fresh interpreter without `site`, as the worker starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import trtls
from trtls.builds import cuda
from trtls.builds.worker.prefetch import builder_libraries, load_libraries, prefetch_builder

SERVER = Path(trtls.__file__).resolve().parent.parent


def _run(code: str, *paths: Path) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in (SERVER, *paths))}
    return subprocess.run(
        [sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True, env=env
    ).stdout


def test_the_worker_imports_no_c_module_after_the_libraries_start_loading() -> None:
    code = (
        "import json, sys\n"
        "from trtls.builds.worker import prefetch\n"
        "prefetch.load_extensions()\n"
        "def c_modules():\n"
        "    return {n for n, m in list(sys.modules.items()) if str(getattr(m, '__file__', '')).endswith('.so')}\n"
        "before = c_modules()\n"
        "import trtls.builds.worker.main, trtls.builds.worker.adapter, trtls.builds.worker.monitor, platform\n"
        "import subprocess, trtls.builds.worker.build, trtls.builds.worker.emitter\n"
        "print(json.dumps(sorted(c_modules() - before)))\n"
    )
    assert json.loads(_run(code)) == []


def _fake_builder(tmp_path: Path, libraries: dict[str, bytes]) -> Path:
    (tmp_path / "fakebuilder").mkdir()
    (tmp_path / "fakebuilder" / "__init__.py").write_text("")
    libs = tmp_path / "fakebuilder_libs"
    libs.mkdir()
    (libs / "__init__.py").write_text("")
    for name, data in libraries.items():
        (libs / name).write_bytes(data)
    return libs


def _a_small_library() -> bytes:
    maps = Path("/proc/self/maps").read_text()
    path = next(line.split()[-1] for line in maps.splitlines() if "/libffi.so" in line or "/libz.so" in line)
    return Path(path).read_bytes()


def test_the_libraries_of_the_named_builder_load_largest_first(tmp_path: Path) -> None:
    small = _a_small_library()
    libs = _fake_builder(tmp_path, {"libcore.so.1": small + b"\0" * 4096, "libparser.so.1": small, "notes.txt": b"x"})
    code = (
        "import json, sys\n"
        "from trtls.builds.worker.prefetch import prefetch_builder\n"
        "import trtls.builds.worker.prefetch as p\n"
        "p.BUILDER_MODULES = ('nosuchbuilder', 'fakebuilder')\n"
        "thread = prefetch_builder(['--preload', 'auto'])\n"
        "thread.join()\n"
        "maps = open('/proc/self/maps').read()\n"
        "loaded = [n for n in ('libcore', 'libparser') if n in maps]\n"
        "print(json.dumps([thread.name, 'fakebuilder' in sys.modules, loaded, p.builder_libraries(('fakebuilder',))]))"
    )
    name, imported, loaded, found = json.loads(_run(code, tmp_path))
    assert name == "trtls-builder-libs" and not imported and loaded == ["libcore", "libparser"]
    assert found == [str(libs / "libcore.so.1"), str(libs / "libparser.so.1")]  # not notes.txt


def test_nothing_to_load_starts_no_thread(tmp_path: Path) -> None:
    assert prefetch_builder(["--probe"]) is None  # no --preload: a probe or a job-first worker
    assert prefetch_builder(["--preload", "nosuchbuilder"]) is None
    assert builder_libraries(("nosuchbuilder",)) == []
    (tmp_path / "broken.so").write_bytes(b"not a library")
    load_libraries([str(tmp_path / "broken.so"), str(tmp_path / "missing.so")])  # silent: the import reports it


def test_a_library_loads_as_ctypes_loads_it() -> None:
    libc = cuda.load_library("libc.so.6")
    assert libc is not None and libc.getpid() == os.getpid()
    assert cuda.load_library("libnosuchlibrary.so.9") is None
