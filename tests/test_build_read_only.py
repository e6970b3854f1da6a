"""Outside the supervisor a Build is read-only (issue 28, item 4): how a build runs (its cancel grace, the notes its
evidence carries) is passed into `Supervisor.start` (through trtls.app.request_build), never written on the Build
by a face afterwards. Found on the source: no module outside server/trtls/builds/supervisor/ assigns an attribute
of a Build, assigns into one of its fields, or mutates a field in place (`build.notes.append`). Subscribing to its
events (`build.listeners.append`) is how a face follows a build, and stays allowed.

A Build is recognised by name, as the code spells it: a variable called `build`, a parameter annotated `Build`, a
name bound from an expression ending in `.build` (`started.build`, `self.build`), or such an attribute itself."""

from __future__ import annotations

import ast
import re
from pathlib import Path

SERVER = Path(__file__).resolve().parents[1] / "server" / "trtls"
OWNER = "builds/supervisor/"
MUTATORS = {"append", "extend", "insert", "update", "pop", "clear", "remove", "add", "setdefault", "discard"}
SUBSCRIBING = {"listeners"}


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


def build_writes(source: str, where: str) -> list[str]:
    """`where:line: what` for each write to a Build in `source`."""
    out = []
    for fn in ast.walk(ast.parse(source)):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        names = _build_names(fn)
        for node in ast.walk(fn):
            for t in _targets(node):
                inner = t.value if isinstance(t, ast.Subscript) else t
                if isinstance(inner, ast.Attribute) and _is_build(inner.value, names):
                    out.append((t.lineno, f"{ast.unparse(t)} = …"))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in MUTATORS:
                owner = node.func.value
                if isinstance(owner, ast.Attribute) and owner.attr not in SUBSCRIBING and _is_build(owner.value, names):
                    out.append((node.lineno, f"{ast.unparse(node.func)}(…)"))
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

def on_cell(ls, b: Build | None, ev) -> None:
    b.status, ok = "x", True
    b.placement["node"] = 1

def elsewhere(self, result):
    started = result.build
    self.build.cell = "c"
    started.environment.update({})
    result.outcome = "built"
"""
    assert [line.split(": ", 1)[1] for line in build_writes(before, "x.py")] == [
        "build.grace_s = …",
        "build.notes.append(…)",
        "b.status = …",
        "b.placement['node'] = …",
        "self.build.cell = …",
        "started.environment.update(…)",
    ]
