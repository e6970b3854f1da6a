"""Outside the supervisor a Build is read-only (issue 28, item 4): how a build runs (its cancel grace, the notes its
evidence carries) is passed into `Supervisor.start` (through trtls.app.request_build), never written on the Build
by a face afterwards. Found on the source: no module outside server/trtls/builds/supervisor/ assigns an attribute
of a Build, assigns into one of its fields, mutates a field in place (`build.notes.append`), or folds an event into it
(`build.fold`). Subscribing to its events (`build.listeners.append`) is how a face follows a build, and stays allowed.

Inside the supervisor too, a build's state (core/build_state.py) changes only in `BuildState.fold`: the second half.

A Build is recognised by name, as the code spells it: a variable called `build`, a parameter annotated `Build`, a
name bound from an expression ending in `.build` (`started.build`, `self.build`), or such an attribute itself."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

SERVER = Path(__file__).resolve().parents[1] / "server" / "trtls"
OWNER = "builds/supervisor/"
MUTATORS = {"append", "extend", "insert", "update", "pop", "clear", "remove", "add", "setdefault", "discard"}
SUBSCRIBING = {"listeners"}
FOLDING = {"fold", "refuse_line"}  # Build's doors into its state (core/build_state.py)
# the store's end of a build amends its evidence record (the key, why rebuilt, the store's record): a new `Recorded`
# folded by builds/avoidance/lookup.after_build, the one fold outside the supervisor
STORE = "builds/avoidance/"


def _build_names(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    names = {"build"}
    a = fn.args
    for p in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
        if p.annotation is not None and re.search(r"\bBuild\b", ast.unparse(p.annotation)):
            names.add(p.arg)
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and ast.unparse(node.value).endswith(".build"):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _is_build(node: ast.expr, names: set[str]) -> bool:
    return (isinstance(node, ast.Name) and node.id in names) or (
        isinstance(node, ast.Attribute) and node.attr == "build"
    )


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        found = list(node.targets)
    elif isinstance(node, ast.AugAssign | ast.AnnAssign):
        found = [node.target]
    else:
        return []
    flat = []
    while found:
        t = found.pop()
        if isinstance(t, ast.Tuple | ast.List):
            found.extend(t.elts)
        else:
            flat.append(t)
    return flat


def _functions(source: str) -> Iterator[tuple[ast.FunctionDef | ast.AsyncFunctionDef, set[str]]]:
    """Each function in `source`, with the names it calls a Build by."""
    for fn in ast.walk(ast.parse(source)):
        if isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            yield fn, _build_names(fn)


def _store_amends(call: ast.Call, where: str) -> bool:
    """`build.fold(Recorded(…))` in the store's modules: its amendment of the record."""
    folded = call.args[0] if len(call.args) == 1 else None
    return (
        where.startswith(STORE)
        and isinstance(folded, ast.Call)
        and isinstance(folded.func, ast.Name)
        and folded.func.id == "Recorded"
    )


def build_writes(source: str, where: str) -> list[str]:
    """`where:line: what` for each write to a Build in `source`."""
    out = []
    for fn, names in _functions(source):
        for node in ast.walk(fn):
            for t in _targets(node):
                inner = t.value if isinstance(t, ast.Subscript) else t
                if isinstance(inner, ast.Attribute) and _is_build(inner.value, names):
                    out.append((t.lineno, f"{ast.unparse(t)} = …"))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
                owner = node.func.value
                if isinstance(owner, ast.Attribute) and owner.attr not in SUBSCRIBING and _is_build(owner.value, names):
                    out.append((node.lineno, f"{ast.unparse(node.func)}(…)"))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in FOLDING:
                if _is_build(node.func.value, names) and not _store_amends(node, where):
                    out.append((node.lineno, f"{ast.unparse(node.func)}(…)"))  # the supervisor's to fold
    return [f"{where}:{line}: {what}" for line, what in sorted(set(out))]


def test_no_module_outside_the_supervisor_writes_a_build() -> None:
    found = []
    for path in sorted(SERVER.rglob("*.py")):
        where = path.relative_to(SERVER).as_posix()
        if not where.startswith(OWNER):
            found += build_writes(path.read_text(encoding="utf-8"), where)
    assert not found, "pass it into Supervisor.start (or a method of the supervisor) instead:\n" + "\n".join(found)


def test_the_rule_sees_the_writes_it_forbids() -> None:
    """What the editor's build command did before: the grace and a retry's note written on the started Build."""
    before = """
async def start_build(ls, args):
    result = await request_build(ls.supervisor, loaded, args.engine)
    build = result.build
    build.grace_s = settings.cancel_grace_s
    build.notes.append("retry")
    build.listeners.append(relay)
    build.fold(Noted("retry"))

def on_cell(ls, b: Build | None, ev) -> None:
    b.status, ok = "x", True
    b.placement["node"] = 1
    b.fold(Recorded(summary))

def elsewhere(self, result):
    started = result.build
    self.build.cell = "c"
    started.environment.update({})
    result.outcome = "built"
"""
    assert [line.split(": ", 1)[1] for line in build_writes(before, "x.py")] == [
        "build.grace_s = …",
        "build.notes.append(…)",
        "build.fold(…)",
        "b.status = …",
        "b.placement['node'] = …",
        "b.fold(…)",
        "self.build.cell = …",
        "started.environment.update(…)",
    ]


# -- the state (core/build_state.py): one writer, BuildState.fold, for every module, the supervisor's included --------

FOLD_OWNER = ("core/build_state.py", "BuildState", {"fold", "_fold_worker"})
STATE_MUTATORS = MUTATORS | {"apply", "close_open"}  # and the phase tree's own writers


def _folded_fields() -> set[str]:
    from dataclasses import fields

    from trtls.core.build_state import BuildState

    return {f.name for f in fields(BuildState)} - GIVEN


def _folded_names() -> set[str]:
    """The folded fields by every name a writer could spell them: the state's, and the Build's for the same field
    (`build.summary` is the state's `record`)."""
    from trtls.builds.supervisor.build import Build, Folded

    return _folded_fields() | {name for name, value in vars(Build).items() if isinstance(value, Folded)}


GIVEN = {"build_id", "engine", "evidence_dir", "on_farm_node", "baselines_of"}  # the Build's own, given at its start


def _state_names(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    names = _build_names(fn) | {"state"}
    for p in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]:
        if p.annotation is not None and re.search(r"\bBuildState\b", ast.unparse(p.annotation)):
            names.add(p.arg)
    return names


def _holds_state(node: ast.expr, names: set[str], self_is_build: bool) -> bool:
    """A Build or a BuildState: by name, `….build`, `….state`, or `self` inside either class."""
    if isinstance(node, ast.Name):
        return node.id in names or (self_is_build and node.id == "self")
    return isinstance(node, ast.Attribute) and node.attr in ("build", "state")


def _field_of(node: ast.expr, names: set[str], self_is_build: bool, folded: set[str]) -> str | None:
    """The folded field `node` is (`build.notes`, `state.tree`, `build.token.t_ack_ns`, `build.summary[…]`), if any."""
    if isinstance(node, ast.Subscript):
        node = node.value
    if not isinstance(node, ast.Attribute):
        return None
    if node.attr in folded and _holds_state(node.value, names, self_is_build):
        return node.attr
    inner = node.value
    if isinstance(inner, ast.Attribute) and inner.attr == "token" and _holds_state(inner.value, names, self_is_build):
        return "token"
    return None


def state_writes(source: str, where: str, folded: set[str]) -> list[str]:
    """`where:line: what` for each write to a folded field (or into one, or to its cancel token) outside the fold."""
    out = []
    tree = ast.parse(source)
    for cls in [None, *(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef))]:
        body = tree.body if cls is None else cls.body
        self_is_build = cls is not None and cls.name in ("Build", "BuildState")
        fns = [n for n in body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        for fn in fns:
            owner, owner_cls, owner_fns = FOLD_OWNER
            if where == owner and cls is not None and cls.name == owner_cls and fn.name in owner_fns:
                continue
            names = _state_names(fn)
            for node in ast.walk(fn):
                for t in _targets(node):
                    if _field_of(t, names, self_is_build, folded):
                        out.append((t.lineno, f"{ast.unparse(t)} = …"))
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                    if node.func.attr in STATE_MUTATORS and _field_of(node.func.value, names, self_is_build, folded):
                        out.append((node.lineno, f"{ast.unparse(node.func)}(…)"))
    return [f"{where}:{line}: {what}" for line, what in sorted(set(out))]


def test_only_the_fold_writes_a_builds_state() -> None:
    """Every change to what a face reads of a build is an event folded by `BuildState.fold` (the worker's, or a fact
    the supervisor learned: core/build_state.py), the supervisor's own modules included."""
    folded = _folded_names()
    found = []
    for path in sorted(SERVER.rglob("*.py")):
        where = path.relative_to(SERVER).as_posix()
        found += state_writes(path.read_text(encoding="utf-8"), where, folded)
    assert not found, "fold an event instead (trtls.core.build_state):\n" + "\n".join(found)


def test_the_state_rule_sees_the_writes_it_forbids() -> None:
    """What the supervisor did before the state was split out (issue 28): each line wrote a folded field in place."""
    before = """
class Build:
    def worker_started(self, proc):
        self._proc, self.pid, self.status = proc, proc.pid, "running"

async def finish_build(build: Build, outcome, guard):
    build.tree.close_open("failed", 1)
    build.token.t_ack_ns = 5
    build.artifacts.extend([])
    build.summary["outputLock"] = {}
    build.notes.append("x")
    build.previous_engine_sha = "kept: the supervisor's own"
    build.stderr_tail.append("kept: the supervisor's own")

def refold(state: BuildState, ev):
    state.logs.append({})
    ev.error = "kept: not a build"
"""
    got = [line.split(": ", 1)[1] for line in state_writes(before, "x.py", _folded_names())]
    assert got == [
        "self.pid = …",
        "self.status = …",
        "build.tree.close_open(…)",
        "build.token.t_ack_ns = …",
        "build.artifacts.extend(…)",
        "build.summary['outputLock'] = …",
        "build.notes.append(…)",
        "state.logs.append(…)",
    ]


def test_a_builds_folded_fields_are_read_only_on_the_build(tmp_path: Path) -> None:
    """The fields of the state the supervisor reads through the Build are the state's own, and writing one there is
    refused (options go into the constructor; what happens is an event)."""
    import pytest

    from trtls.builds.supervisor.build import Build, Folded

    b = Build("e-1", "e", tmp_path / "trtls.toml", {"output": str(tmp_path / "e.engine")}, 5.0, ["w"], cell="c")
    shown = {name: value.field for name, value in vars(Build).items() if isinstance(value, Folded)}
    assert set(shown.values()) <= _folded_fields(), "a Build reads only its state's folded fields"
    assert not {"placement", "queued_ns", "refused_lines", "first_refusal"} & set(shown), "only a face read these"
    for name, field in sorted(shown.items()):
        assert getattr(b, name) is getattr(b.state, field)
        with pytest.raises(AttributeError, match="folded from its events"):
            setattr(b, name, getattr(b, name))
    assert (b.cell, b.grace_s, b.state.evidence_dir) == ("c", 5.0, b.evidence_dir)


# -- a face holds the state (issue 28): it reads `build.state`, never the Build's delegating attributes ---------------

FACES = ("cli/", "lsp/", "report/", "accept/")  # the acceptance harness drives and watches builds as a face
# what every kind of run answers (builds.supervisor.runs.Run, BuildRun): a face may read these of any run, a Build too
RUN_PROTOCOL = {"status", "outcome", "cell", "parent_id", "record", "running", "engine", "id", "evidence_dir"}


def _delegating() -> set[str]:
    """The Build's read-only views of its state: the folded fields and the view methods that take only the state."""
    from trtls.builds.supervisor.build import Build, Folded

    folded = {name for name, value in vars(Build).items() if isinstance(value, Folded)}
    return folded | {"elapsed_s", "shown_elapsed_s", "description", "node_view", "progress_message",
                     "outcome_message", "snapshot", "record"}  # fmt: skip


def delegated_reads(source: str, where: str, delegating: set[str]) -> list[str]:
    """`where:line: what` for each read of a Build's delegating attribute (`build.tree`, `b.progress_message`)."""
    out = []
    for fn, names in _functions(source):
        for node in ast.walk(fn):
            if isinstance(node, ast.Attribute) and node.attr in delegating and _is_build(node.value, names):
                out.append((node.lineno, ast.unparse(node)))
    return [f"{where}:{line}: {what}" for line, what in sorted(set(out))]


def test_no_face_reads_a_build_but_through_its_state() -> None:
    """The terminal, the language server, the reports and the acceptance harness read `build.state`
    (core.build_state) and render it with core.build_view, giving it `build.time_left`; what every kind of run answers
    (the registry's Run) stays readable."""
    shown = _delegating() - RUN_PROTOCOL
    found = []
    for path in sorted(SERVER.rglob("*.py")):
        where = path.relative_to(SERVER).as_posix()
        if where.startswith(FACES):
            found += delegated_reads(path.read_text(encoding="utf-8"), where, shown)
    assert not found, "read build.state (and core.build_view) instead:\n" + "\n".join(found)


def test_the_face_rule_sees_the_reads_it_forbids() -> None:
    """What the terminal's and the editor's views read before they held the state."""
    before = """
def cell_line(build: Build) -> str:
    if build.running:
        return f"{build.cell} {build.progress_message()} {build.state.outcome}"
    return build.outcome_message()

def tick(self):
    b: Build = self.build
    views = self.build.tree.view(now, self.build.baselines)
    return b.token.source, b.placement

def _end(self, b: Build):
    notify(b.snapshot(), b.summary, b.id)
"""
    got = [line.split(": ", 1)[1] for line in delegated_reads(before, "x.py", _delegating() - RUN_PROTOCOL)]
    assert got == [
        "build.progress_message",
        "build.outcome_message",
        "self.build.baselines",
        "self.build.tree",
        "b.snapshot",
        "b.summary",  # the record's JSON: a face reads the run's `record` (its model) or the state's
    ]


# -- the supervisor and the store read a build's record from its state (issue 28) --------------------------------------

RECORD_READERS = ("builds/", "app/", "route/", "triage/")


def test_the_supervisor_and_the_store_read_the_record_from_the_state() -> None:
    """`build.record` is what every kind of run answers (the registry's Run), `build.summary` its JSON: the
    supervisor's and the store's own modules read the record as the state holds it, `build.state.record` (the JSON, to
    amend and fold again) or `build.state.summary` (the Summary model), so the Build's answer and the state's model are
    not read as one."""
    found = []
    for path in sorted(SERVER.rglob("*.py")):
        where = path.relative_to(SERVER).as_posix()
        if where.startswith(RECORD_READERS):
            found += delegated_reads(path.read_text(encoding="utf-8"), where, {"summary", "record"})
    assert not found, "read build.state.record (or build.state.summary) instead:\n" + "\n".join(found)


def test_the_stores_amendment_is_the_one_fold_outside_the_supervisor() -> None:
    """`after_build` folds the amended record as a new `Recorded`; any other event folded there is refused."""
    source = """
def after_build(use, build: Build):
    build.fold(Recorded(summary))
    build.fold(Noted("x"))
"""
    assert [w.split(": ", 1)[1] for w in build_writes(source, "builds/avoidance/lookup.py")] == ["build.fold(…)"]
    assert len(build_writes(source, "lsp/build_commands.py")) == 2
