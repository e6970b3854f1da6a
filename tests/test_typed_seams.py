"""The seams between the faces and the layers below them are typed (issue 28, item 5): no function in the language
server's face (server/trtls/lsp/) or the application layer (server/trtls/app/) takes or returns `Any`, and no state
they hold (`self._supervisor`, a run's dataclass field) is declared `Any`, so mypy sees the contract at every handler:
`ls.supervisor` is a Supervisor, `ls.runs` the RunRegistry, a handler's `args` its model in trtls.lsp.command_args
and its return its reply in trtls.core.wire.

Two things are let through, each for a stated reason:
- `dict[str, Any]`: JSON that has no model of its own (a job, a build's overrides, a builder probe), as read from
  disk or built for it, and the wire's `EvidenceReply.summary`, which trtls.showEvidence makes in one place
  (lsp.run_kinds.evidence) from the record's model. Every kind of run answers its evidence record typed
  (builds.supervisor.runs.Run.record, a `RunRecord`: see test_a_run_answers_its_record_typed): a build's and a
  matrix's summary.json is a `Summary` (core.summary_record), a gates run's verdict a `GatesRunRecord`
  (core.gates_run_record), a reduction's result.json and a divergence search's record a `ReductionResult` and a
  `DivergenceResult` (core.triage_records; the app layer's triage runs return and keep them:
  tests/triage/test_typed_results.py). The results the application layer hands the faces carry the `Summary` too (a
  reuse, a rollback, a matrix's served and restored cells), never the dict. One reader still takes that record as a
  dict: `app.unchanged`'s reuse on the terminal's fast path, which imports no pydantic by design. The builds orphan
  recovery completed reach `lsp.build_commands.recover` as `RecoveredBuild` rows (builds.supervisor.orphans), read
  from running.json's model (builds.supervisor.running_state).
- `ALLOWED` below: the raw argument of a command as lsprotocol declares it (`ExecuteCommandParams.arguments:
  Sequence[LSPAny]`), before its model validates it; pygls structures it by this very annotation (cattrs has no
  hook for `object`); and the client's initializationOptions, LSPAny likewise until parsed."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

SERVER = Path(__file__).resolve().parents[1] / "server" / "trtls"
SEAMS = sorted([*(SERVER / "lsp").glob("*.py"), *(SERVER / "app").glob("*.py")])
UNTYPED = {"Any", "LSPAny"}

# (file under server/trtls, function, parameter or "return") → why it is untyped
ALLOWED = {
    ("lsp/server.py", "run", "args"): "the raw command argument pygls hands over (lsprotocol's LSPAny)",
    ("lsp/command_args.py", "parse_args", "raw"): "that raw argument, validated here into its model",
    ("lsp/language_server.py", "(attribute)", "self.raw_init_options"): "the client's initializationOptions as "
    "lsprotocol declares them (LSPAny), parsed into InitOptions on first use",
}


def _json_record(node: ast.expr) -> bool:
    """`dict[str, Any]` (see the module doc)."""
    return (
        isinstance(node, ast.Subscript)
        and ast.unparse(node.value) == "dict"
        and ast.unparse(node.slice) in ("str, Any", "(str, Any)")
    )


def _untyped(annotation: ast.expr) -> bool:
    """Whether `Any` (or lsprotocol's LSPAny) appears in the annotation outside a `dict[str, Any]` JSON record."""
    if _json_record(annotation):
        return False
    if isinstance(annotation, ast.Name) and annotation.id in UNTYPED:
        return True
    if isinstance(annotation, ast.Attribute) and annotation.attr in UNTYPED:
        return True
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):  # a quoted annotation
        return _untyped(ast.parse(annotation.value, mode="eval").body)
    return any(_untyped(child) for child in ast.iter_child_nodes(annotation) if isinstance(child, ast.expr))


def untyped_signatures(path: Path) -> list[tuple[str, str, str, int]]:
    """(file, function, parameter or "return", line) for every `Any` in a signature of `path`."""
    found = []
    where = path.relative_to(SERVER).as_posix() if path.is_relative_to(SERVER) else path.name
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        a = node.args
        params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *([a.vararg] if a.vararg else []),
                  *([a.kwarg] if a.kwarg else [])]  # fmt: skip
        annotated = [(p.arg, p.annotation) for p in params if p.annotation is not None]
        if node.returns is not None:
            annotated.append(("return", node.returns))
        found += [(where, node.name, name, node.lineno) for name, ann in annotated if _untyped(ann)]
    for node in ast.walk(tree):  # the state a seam holds: `self._supervisor: …`, a run's dataclass fields
        if isinstance(node, ast.AnnAssign) and _untyped(node.annotation):
            found.append((where, "(attribute)", ast.unparse(node.target), node.lineno))
    return found


def test_no_seam_takes_or_returns_any() -> None:
    found = [f for path in SEAMS for f in untyped_signatures(path)]
    bad = [f"{file}:{line}: {fn}({name})" for file, fn, name, line in found if (file, fn, name) not in ALLOWED]
    assert not bad, "Any in a signature at the seams (give it its real type):\n" + "\n".join(bad)
    stale = set(ALLOWED) - {(file, fn, name) for file, fn, name, _ in found}
    assert not stale, f"allowed but no longer untyped (remove from ALLOWED): {sorted(stale)}"


def test_results_carry_the_summary_not_a_dict() -> None:
    """No field of a result the application layer hands the faces (app/results.py, app/rollback.py) is a JSON dict:
    the evidence record it carries is a `Summary`, so a face reads `summary.buildId`, not `summary["buildId"]`."""
    found = []
    for path in (SERVER / "app" / "results.py", SERVER / "app" / "rollback.py"):
        for cls in (n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.ClassDef)):
            for field in (n for n in cls.body if isinstance(n, ast.AnnAssign)):
                if any(_json_record(n) for n in ast.walk(field.annotation) if isinstance(n, ast.expr)):
                    found.append(f"{path.name}:{field.lineno}: {cls.name}.{ast.unparse(field.target)}")
    assert not found, "a result holding a dict (give it its model):\n" + "\n".join(found)


RUNS = SERVER / "builds" / "supervisor" / "runs.py"
RECORD_MODELS = {"Summary", "GatesRunRecord", "ReductionResult", "DivergenceResult"}


def _protocol_members(tree: ast.Module, protocol: str) -> dict[str, ast.expr]:
    """A protocol class's members: name → the annotation it answers (a property's return, an attribute's type)."""
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == protocol)
    members: dict[str, ast.expr] = {}
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.returns is not None:
            members[node.name] = node.returns
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            members[node.target.id] = node.annotation
    return members


def test_a_run_answers_its_record_typed() -> None:
    """What every kind of run answers (builds.supervisor.runs.Run, and BuildRun over it) holds no JSON dict and no
    `Any`: its evidence record is `record: RunRecord | None`, the union of the record models, so a face reads
    `run.record.outcome`, never `run.summary["outcome"]`; the wire's JSON is made from it (lsp.run_kinds.evidence)."""
    tree = ast.parse(RUNS.read_text())
    bad = [
        f"{protocol}.{name}: {ast.unparse(annotation)}"
        for protocol in ("Run", "BuildRun")
        for name, annotation in _protocol_members(tree, protocol).items()
        if _untyped(annotation) or any(_json_record(n) for n in ast.walk(annotation) if isinstance(n, ast.expr))
    ]
    assert not bad, "a run answers JSON or Any (give it its model):\n" + "\n".join(bad)
    members = _protocol_members(tree, "Run")
    assert "summary" not in members, "the record is `record`, its model; the JSON is made from it for the wire"
    assert ast.unparse(members["record"]) == "RunRecord | None"
    alias = next(
        n.value
        for n in ast.walk(tree)
        if isinstance(n, ast.AnnAssign) and ast.unparse(n.target) == "RunRecord" and n.value is not None
    )
    assert {n.id for n in ast.walk(alias) if isinstance(n, ast.Name)} == RECORD_MODELS
    makers = sorted(
        path.relative_to(SERVER).as_posix()
        for path in SERVER.rglob("*.py")
        if "EvidenceReply" in (text := path.read_text())
        and any(
            isinstance(n, ast.Call) and ast.unparse(n.func).endswith("EvidenceReply") for n in ast.walk(ast.parse(text))
        )
    )
    assert makers == ["lsp/run_kinds.py"], "the wire's record is made from the model in one place (run_kinds.evidence)"


def test_each_kind_of_run_holds_its_model(tmp_path: Path) -> None:
    """The runs answer the models the protocol names (mypy checks each against `Run`; this, that the names are the
    classes the faces get): a finished gates run, reduction, matrix and restored build."""
    from trtls.app.triage_runs import RecordedRun
    from trtls.builds.supervisor.matrix import MatrixBuild
    from trtls.builds.supervisor.runs import RestoredRun
    from trtls.core.gates_run_record import GatesRunRecord
    from trtls.core.summary_record import Summary
    from trtls.lsp.gates_command import GatesRun

    gates = GatesRun("g", "r", tmp_path / "trtls.toml", record=GatesRunRecord(decision=None, outcome="failed"))
    assert gates.status == "failed" and not gates.running
    assert gates.record is not None and gates.record.record() == {"decision": None, "outcome": "failed"}
    restored = RestoredRun(Summary.written({"buildId": "b", "outcome": "reused"}), tmp_path / "trtls.toml")
    assert restored.record.outcome == "reused"
    matrix = MatrixBuild("m", "e", tmp_path / "trtls.toml", [])
    assert matrix.record is None and matrix.summary is None and matrix.running
    matrix._finish()  # no cell ran: its record is written all the same
    assert isinstance(matrix.record, Summary) and matrix.record.kind == "matrix" and matrix.status == "cancelled"
    written = (matrix.evidence_dir / "summary.json").read_text()
    assert written == json.dumps(matrix.summary, indent=2), "the JSON answered is the file, byte for byte"
    assert "record" in vars(RecordedRun)  # a triage run's `record` is its `result` (tests/triage/test_typed_results)


def test_the_rule_sees_what_it_forbids(tmp_path: Path) -> None:
    """The scan itself: each spelling of Any is found, a JSON record is not."""
    sample = tmp_path / "sample.py"
    text = (
        "from typing import Any\n"
        "def a(ls: Any) -> None: ...\n"
        "def b(x: list[Any]) -> 'Any | None': ...\n"
        "async def c(x: lsp.LSPAny = None) -> typing.Any: ...\n"
        "def d(record: dict[str, Any]) -> dict[str, Any] | None: ...\n"
        "def e(table: dict[str, list[Any]]) -> None: ...\n"
        "class Run:\n    red: Any\n    summary: dict[str, Any] | None = None\n"
    )
    sample.write_text(text)
    found = {(fn, name) for _, fn, name, _ in untyped_signatures(sample)}
    assert found == {("a", "ls"), ("b", "x"), ("b", "return"), ("c", "x"), ("c", "return"), ("e", "table"),
                     ("(attribute)", "red")}  # fmt: skip


def test_every_command_handler_declares_its_argument_model() -> None:
    """A handler's `args` names its model in trtls.lsp.command_args (the server validates the raw argument into it
    by that name), and a handler registered by name before its module is imported (lsp/triage_commands_table.py)
    is given the same model its handler declares."""
    from trtls.lsp import command_args, rollback_command, server, triage_command, triage_commands_table

    handlers = [server.build_engine, server.build_matrix, server.cancel_build, server.list_builds,
                server.show_evidence, server.build_report, server.list_targets, server.run_gates, server.lock_route,
                server.allow_license, server.print_debug_information]  # fmt: skip
    for handler in handlers:
        assert command_args.typed_args(server.declared_args(handler)), handler.__name__
    modules = {"triage_command": triage_command, "rollback_command": rollback_command}
    for name, (module, function, args_model) in triage_commands_table.COMMANDS.items():
        handler = getattr(modules[module], function)
        assert server.declared_args(handler) == args_model, name
        assert command_args.typed_args(args_model), name


def test_a_handler_without_its_model_is_refused_at_registration() -> None:
    from trtls.lsp import server

    def untyped(ls: object, args: object) -> None: ...

    untyped.__annotations__["args"] = "dict[str, object]"
    with pytest.raises(TypeError, match="one model of trtls.lsp.command_args"):
        server.command("trtls.test.untyped")(untyped)  # type: ignore[type-var]
