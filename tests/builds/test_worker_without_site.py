"""The built-in worker starts without `site` (issue 31): its module path comes from the supervisor (PYTHONPATH), so the
second interpreter of a build skips site's walk of the `.pth` files (67 of 80 ms of an interpreter's start on the
16-core host), and still imports the same trtls and builder, and still runs a sitecustomize. Where a plain search of
that path would find other modules (an import hook maps one elsewhere), or TRTLS_WORKER_SITE=1, it starts as before.
Real worker processes, a real sitecustomize."""

from __future__ import annotations

import importlib.machinery
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trtls.builds.supervisor import worker_launch
from trtls.builds.supervisor.worker_launch import BUILTIN_WORKER, SITE_ENV, launch_argv


def test_the_worker_starts_without_site_and_still_runs_sitecustomize(tmp_path: Path) -> None:
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(
        "import os, sys\n"
        "if 'trtls.builds.worker' in sys.orig_argv:\n"
        "    with open(os.environ['SEEN'], 'w') as fh:\n"
        "        fh.write(repr((sys.flags.no_site, 'site' in sys.modules and sys.modules['site'].__name__)))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(hooks), "SEEN": str(tmp_path / "seen")}
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "from trtls.builds.supervisor import worker_launch; p = worker_launch.start_now('auto'); "
        "print(' '.join(p.args)); p.stdin.close(); p.wait(60)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(hooks)], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    argv = out.stdout.split()
    assert argv[1:4] == ["-S", "-m", "trtls.builds.worker"], argv
    assert (tmp_path / "seen").read_text() == "(1, 'site')", "the sitecustomize ran in the siteless worker"


def test_site_is_kept_when_a_plain_search_would_find_another_module(monkeypatch: pytest.MonkeyPatch) -> None:
    """An import hook (as an editable install's finder) provides a builder module that no folder on the path holds:
    the worker without `site` would not find it, so it starts with `site`."""

    class Hook:
        @staticmethod
        def find_spec(name: str, path: Any = None, target: Any = None) -> Any:
            if name == "tensorrt":
                return importlib.machinery.ModuleSpec(name, None, origin="/elsewhere/tensorrt/__init__.py")
            return None

    env: dict[str, str] = {}
    assert launch_argv(list(BUILTIN_WORKER), env)[1] == "-S" and "PYTHONPATH" in env
    monkeypatch.setattr(sys, "meta_path", [Hook(), *sys.meta_path])
    env = {}
    assert launch_argv(list(BUILTIN_WORKER), env) == BUILTIN_WORKER and env == {}


def test_trtls_itself_must_be_found_on_the_path(monkeypatch: pytest.MonkeyPatch) -> None:
    here = str(Path(worker_launch.__file__).resolve().parents[3])  # the folder trtls is imported from
    monkeypatch.setattr(sys, "path", [p for p in sys.path if os.path.realpath(p or ".") != os.path.realpath(here)])
    assert not worker_launch._found_alike(("trtls",), [p for p in sys.path if p])
    assert launch_argv(list(BUILTIN_WORKER), {}) == BUILTIN_WORKER


def test_an_external_worker_or_the_opt_out_keeps_site() -> None:
    external = [sys.executable, "my_worker.py"]
    assert launch_argv(list(external), {}) == external
    assert launch_argv(list(BUILTIN_WORKER), {SITE_ENV: "1"}) == BUILTIN_WORKER
