"""Every code a CLI JSON error record can carry is registered (`trtls.core.codes`), with its page under docs/codes/.

The records of `trtls route …` and `trtls import trtexec` carried codes no registry knew — `route_build`, `bundle`,
`os_error`, `lock`, and the `usage` every command's bad argument carried — so a script could not look one up, and
`tests/test_codes.py` (which reads `TRTnnn` literals) never saw them. The set is read from the source, not listed
here: every call of a function that prints an error record (`cli/usage.emit_error`, and each function of the CLI that
hands its own `code` parameter on to one — `report_error`, `report_command_error`, …) and the code it passes — a
literal, a module's constant, the literals a local variable is assigned from (`_coded(text, default)`, a choice of
two codes), or a typed object's own code (`finding.code`: its literals are `tests/test_codes.py`'s)."""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from pathlib import Path

from trtls.core.codes import CODES

ROOT = Path(__file__).resolve().parents[1]
CLI = ROOT / "server" / "trtls" / "cli"
OWN_CODE = re.compile(r"code|error_?[cC]ode|errorCode")  # `f.code`, `result.errorCode`, `run.error_code`


def _modules() -> dict[str, ast.Module]:
    return {f"trtls.cli.{p.stem}": ast.parse(p.read_text(encoding="utf-8")) for p in sorted(CLI.glob("*.py"))}


def _functions(tree: ast.AST) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def _params(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[str]:
    return [a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)]


def _callee(call: ast.Call) -> str | None:
    f = call.func
    return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None


def _code_arg(call: ast.Call, position: int, name: str) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return call.args[position] if len(call.args) > position else None


def _emitters(modules: dict[str, ast.Module]) -> dict[str, tuple[int, str]]:
    """Function name → (position, name) of its code parameter: `emit_error`, and every CLI function that passes a
    parameter of its own as the code of one (found until no more are)."""
    emitters = {"emit_error": (0, "code")}
    while True:
        found = dict(emitters)
        for tree in modules.values():
            for fn in _functions(tree):
                params = _params(fn)
                for call in (n for n in ast.walk(fn) if isinstance(n, ast.Call)):
                    spec = emitters.get(_callee(call) or "")
                    arg = _code_arg(call, *spec) if spec else None
                    if isinstance(arg, ast.Name) and arg.id in params and fn.name not in found:
                        position = params.index(arg.id) - (1 if params and params[0] == "self" else 0)
                        found[fn.name] = (position, arg.id)
        if found == emitters:
            return emitters
        emitters = found


Fn = ast.FunctionDef | ast.AsyncFunctionDef


class Reader:
    """Reads which codes an expression of the CLI's source can be: literals, module constants, local variables (what
    they are assigned from, a tuple's element), the returns of a CLI function called (its parameters bound to the
    call's arguments); a typed object's own `.code` and a code cut from text at run time (`text.partition(" ")`,
    `re.match(...).group(1)`) are not literals of this package: nothing to read here."""

    def __init__(self, modules: dict[str, ast.Module]) -> None:
        self.defs: dict[str, list[tuple[Fn, str]]] = {}
        for module, tree in modules.items():
            for fn in _functions(tree):
                self.defs.setdefault(fn.name, []).append((fn, module))

    def codes(self, expr: ast.expr, ctx: Ctx, index: int | None = None) -> set[str]:
        """The codes `expr` (element `index` of it, for a tuple) can be, in `ctx`."""
        if isinstance(expr, ast.Tuple) and index is not None:
            return self.codes(expr.elts[index], ctx)
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str) and index is None:
            return {expr.value}
        if isinstance(expr, ast.BoolOp):
            return set().union(*(self.codes(v, ctx, index) for v in expr.values))
        if isinstance(expr, ast.IfExp):
            return self.codes(expr.body, ctx, index) | self.codes(expr.orelse, ctx, index)
        if isinstance(expr, ast.Attribute) and index is None:
            assert OWN_CODE.fullmatch(expr.attr), f"{ctx.where}: a code read from .{expr.attr}"
            return set()  # a finding's, a gate check's, an error's own code: registered where it is written
        if isinstance(expr, ast.Call):
            return self._returns(expr, ctx, index)
        if isinstance(expr, ast.Name):
            return self._name(expr.id, ctx, index)
        raise AssertionError(f"{ctx.where}: a code this test cannot read: {ast.unparse(expr)}")

    def _name(self, name: str, ctx: Ctx, index: int | None) -> set[str]:
        if name in ctx.bound:  # a parameter of a function read for its caller: the caller's argument
            arg, caller = ctx.bound[name]
            return self.codes(arg, caller, index)
        sources = _assigned(ctx.fn, name)
        if sources:
            return set().union(*(self.codes(value, ctx, at if at is not None else index) for value, at in sources))
        value = getattr(importlib.import_module(ctx.module), name)  # a module's constant (`USAGE`), here or imported
        assert isinstance(value, str) and index is None, f"{ctx.where}: {name} is not a code"
        return {value}

    def _returns(self, call: ast.Call, ctx: Ctx, index: int | None) -> set[str]:
        """What a call of a CLI function returns (element `index`); a call of anything else reads text at run time."""
        out: set[str] = set()
        for fn, module in self.defs.get(_callee(call) or "", []):
            params = _params(fn)
            bound = {p: (a, ctx) for p, a in zip(params, call.args, strict=False)}
            bound.update({kw.arg: (kw.value, ctx) for kw in call.keywords if kw.arg})
            inner = Ctx(fn, module, ctx.where, bound)
            for ret in (n for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None):
                out |= self.codes(ret.value, inner, index)
        return out


class Ctx:
    def __init__(self, fn: Fn, module: str, where: str, bound: dict[str, tuple[ast.expr, Ctx]] | None = None) -> None:
        self.fn, self.module, self.where, self.bound = fn, module, where, bound or {}


def _assigned(fn: ast.AST, name: str) -> list[tuple[ast.expr, int | None]]:
    """What `name` is assigned from in `fn`: (the right-hand side, the element it takes of a tuple or None)."""
    out: list[tuple[ast.expr, int | None]] = []
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id == name:
                    out.append((node.value, None))
                elif isinstance(target, ast.Tuple):
                    out += [
                        (node.value, i) for i, t in enumerate(target.elts) if isinstance(t, ast.Name) and t.id == name
                    ]
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            if node.value is not None:
                out.append((node.value, None))
    return out


def record_codes() -> dict[str, set[str]]:
    """Every code a CLI error record can carry → where it is passed (`module:line`)."""
    modules = _modules()
    emitters = _emitters(modules)
    reader = Reader(modules)
    out: dict[str, set[str]] = {}
    for module, tree in modules.items():
        for fn in _functions(tree):
            for call in (n for n in ast.walk(fn) if isinstance(n, ast.Call)):
                spec = emitters.get(_callee(call) or "")
                arg = _code_arg(call, *spec) if spec else None
                if arg is None or (isinstance(arg, ast.Name) and arg.id in _params(fn)):
                    continue  # not a record, or a wrapper handing its caller's code on (its callers are read)
                where = f"{module}:{call.lineno}"
                for code in reader.codes(arg, Ctx(fn, module, where)):
                    out.setdefault(code, set()).add(where)
    return out


def test_every_code_a_cli_error_record_can_carry_is_registered() -> None:
    codes = record_codes()
    assert {"TRT104", "TRT107", "TRT412", "TRT420", "TRT421", "TRT512", "TRT953"} <= set(codes), sorted(codes)
    assert {code: sorted(at) for code, at in codes.items() if code not in CODES} == {}
