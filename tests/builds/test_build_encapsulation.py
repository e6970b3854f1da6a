"""`Build` owns its private state: the supervisor and the end of a build drive it through its lifecycle methods
(`attach`, `worker_started`, `open_event_log`, `hashing_previous_engine`, `previous_sha`, `close_worker_io`,
`resolve`), and no other module reads or writes `build._x` (issue 18, section 3)."""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

from trtls.builds.supervisor.build import Build

PKG = Path(__file__).resolve().parents[2] / "server" / "trtls"
BUILD_PY = PKG / "builds" / "supervisor" / "build.py"


def build_private_names() -> set[str]:
    """The `_x` fields and methods of class Build, read from its source (a new one is covered without a test edit)."""
    tree = ast.parse(BUILD_PY.read_text(encoding="utf-8"))
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Build")
    names: set[str] = set()
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def foreign_uses(source: str, private: set[str]) -> list[tuple[int, str]]:
    """`obj._x` for a Build private `_x` on anything but `self`/`cls` (each class touches only its own)."""
    hits = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in private:
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            hits.append((node.lineno, ast.unparse(node)))
    return hits


def test_the_scan_knows_builds_private_state_and_catches_a_write() -> None:
    private = build_private_names()
    assert {"_proc", "_loop", "_done", "_events_file", "_force", "_previous_sha"} <= private, private
    assert foreign_uses("build._done = loop.create_future()\nx = b._proc.stdin", private) == [
        (1, "build._done"),
        (2, "b._proc"),
    ]
    assert foreign_uses("self._done = None", private) == []


def test_no_module_but_build_py_touches_a_builds_private_fields() -> None:
    private = build_private_names()
    offenders = [
        f"{path.relative_to(PKG)}:{line}: {text}"
        for path in sorted(PKG.rglob("*.py"))
        if path != BUILD_PY
        for line, text in foreign_uses(path.read_text(encoding="utf-8"), private)
    ]
    assert offenders == [], "use Build's lifecycle methods instead:\n" + "\n".join(offenders)


def bare_build(tmp_path: Path) -> Build:
    return Build("b-1", "demo", tmp_path / "trtls.toml", {"output": str(tmp_path / "demo.engine")}, 5.0, ["w"])


async def test_resolve_answers_wait_and_ended_once(tmp_path: Path) -> None:
    build = bare_build(tmp_path)
    forced: list[bool] = []
    build.attach(asyncio.get_running_loop(), force=lambda: forced.append(True))
    build.force()
    await asyncio.sleep(0)
    assert forced == [True], "force() runs the supervisor's escalation on the build's loop"
    build.resolve({"outcome": "built"})
    build.resolve({"outcome": "failed"})  # a second answer is ignored: the first stands
    await asyncio.wait_for(build.ended(), 1)
    assert (await asyncio.wait_for(build.wait(), 1)).record() == {"outcome": "built"}


async def test_previous_sha_is_recorded_once_hashed_and_none_when_unreadable(tmp_path: Path) -> None:
    loop = asyncio.get_running_loop()
    build = bare_build(tmp_path)
    assert await build.previous_sha() is None, "no engine was there: nothing to wait for"
    hashing: asyncio.Future[str] = loop.create_future()
    build.hashing_previous_engine(hashing)
    loop.call_later(0.01, hashing.set_result, "ab" * 32)
    assert await build.previous_sha() == "ab" * 32 and build.previous_engine_sha == "ab" * 32
    unreadable: asyncio.Future[str] = loop.create_future()
    unreadable.set_exception(PermissionError("denied"))
    build.hashing_previous_engine(unreadable)
    assert await build.previous_sha() is None and build.previous_engine_sha is None


def test_the_event_log_and_the_workers_input_close_together(tmp_path: Path) -> None:
    build = bare_build(tmp_path)
    build.evidence_dir.mkdir(parents=True)
    log = build.open_event_log()
    log.write(b'{"type": "log"}\n')

    class Stdin:
        closed = False

        def write(self, data: bytes) -> None: ...
        def is_closing(self) -> bool:
            return self.closed

        def close(self) -> None:
            self.closed = True

    class Proc:
        pid, returncode, stdin, stdout, stderr = 4242, None, Stdin(), None, None

    proc = Proc()
    assert build.worker is None
    build.worker_started(proc)  # type: ignore[arg-type]
    assert build.worker is proc and build.pid == 4242 and build.status == "running"
    build.close_worker_io()
    assert log.closed and proc.stdin.closed
    assert (build.evidence_dir / "events.jsonl").read_bytes() == b'{"type": "log"}\n'
