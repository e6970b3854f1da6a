"""The protocol is declared once (trtls.core.events, trtls.core.wire) and its documents are generated from it:
docs/protocol.md's tables, docs/protocol.schema.json and the extension's TypeScript types. This fails when one of
them is not what `python -m trtls.schema.protocol` writes (CI also runs it with --check)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema

from trtls.core import events, wire
from trtls.schema import protocol

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "tests" / "data" / "trt-rtx-traces" / "large_events.jsonl"  # a real `large` build's --json stream


def test_every_generated_file_is_what_the_models_give() -> None:
    assert protocol.drifted() == [], "run .venv/bin/python -m trtls.schema.protocol and commit the result"


def test_check_mode_fails_on_a_stale_table(tmp_path: Path, monkeypatch) -> None:
    """--check is not a formality: a doc whose table lost a row is reported, and the run exits 1."""
    stale = tmp_path / "protocol.md"
    stale.write_text(protocol.DOC_FILE.read_text().replace("| `phase_finish` |", "| `phase_end` |"))
    monkeypatch.setattr(protocol, "DOC_FILE", stale)
    assert protocol.drifted() == [stale]
    assert protocol.main(["--check"]) == 1


def test_check_mode_runs_as_ci_runs_it() -> None:
    r = subprocess.run([sys.executable, "-m", "trtls.schema.protocol", "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_the_schema_declares_every_event_and_every_reply_and_holds_real_events() -> None:
    schema = json.loads(protocol.SCHEMA_FILE.read_text())
    x = schema["x-trtls"]
    assert set(x["workerEvents"]) == set(events.EVENT_MODELS)
    assert set(x["commands"]) == set(wire.COMMAND_REPLIES)
    # a real TensorRT-RTX build's events validate against the generated schema, and a field it does not declare fails
    validators = {
        t: jsonschema.Draft202012Validator({**schema, "$ref": f"#/$defs/{m}"}) for t, m in x["workerEvents"].items()
    }
    lines = [json.loads(line) for line in TRACE.read_text().splitlines()]
    for ev in [e for e in lines if e["type"] not in ("step", "log")] + lines[::50]:
        validators[ev["type"]].validate(ev)
    errors = list(validators["phase_start"].iter_errors({**lines[0], "percent": 5}))
    assert errors and "percent" in errors[0].message, "an undeclared field fails the schema too"


def test_the_typescript_types_name_every_model_field() -> None:
    ts = protocol.TS_FILE.read_text()
    for model in (wire.BuildTree, wire.PhaseRow, wire.RunGatesReply, events.BuildStarted, events.PhaseFinish):
        assert f"export interface {model.__name__} {{" in ts
        for name in model.model_fields:
            assert f"  {name}" in ts, f"{model.__name__}.{name} is missing from protocol.ts"


def test_every_server_command_has_a_declared_reply_and_arguments() -> None:
    """A command the server registers but the protocol does not declare would reach the extension untyped."""
    import re

    source = "\n".join(p.read_text() for p in (ROOT / "server" / "trtls" / "lsp").glob("*.py"))
    registered = set(re.findall(r'command\("(trtls\.[A-Za-z]+)"\)', source))
    from trtls.lsp.triage_commands_table import COMMANDS  # registered by name (their modules load on first use)

    registered |= set(COMMANDS)
    assert registered and registered == set(wire.COMMAND_REPLIES) == set(protocol.COMMAND_ARGS)


def test_every_field_our_worker_and_transport_write_is_declared() -> None:
    """The supervisor refuses an undeclared field, so a field added where our worker (or the farm's transport) writes
    an event, and not to its model, would silently lose that line: every `emit("type", key=…)` / `_line("type",
    key=…)` keyword, and the node's `where_info()` (sent as `placed`), is a field of the event's model."""
    import ast

    builds = ROOT / "server" / "trtls" / "builds"
    undeclared, checked = [], 0
    for path in sorted(builds.rglob("*.py")):  # the worker child's, the supervisor's and the farm's
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or not node.args or not isinstance(node.args[0], ast.Constant):
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            model = events.EVENT_MODELS.get(node.args[0].value) if name in ("emit", "_line") else None
            if model is not None:
                checked += 1
                undeclared += [f"{path.name}: {node.args[0].value}.{k.arg}" for k in node.keywords
                               if k.arg is not None and k.arg not in model.model_fields]  # fmt: skip
    where = next(
        n for n in ast.walk(ast.parse((builds / "farm" / "node_worker.py").read_text()))
        if isinstance(n, ast.FunctionDef) and n.name == "where_info"
    )  # fmt: skip
    keys = [k.value for d in ast.walk(where) if isinstance(d, ast.Dict) for k in d.keys if isinstance(k, ast.Constant)]
    assert checked > 20 and keys, "the worker's emits and node_worker.where_info()'s dict were found"
    undeclared += [f"node_worker.where_info: placed.{k}" for k in keys if k not in events.Placed.model_fields]
    assert undeclared == [], "declare these in trtls.core.events (and regenerate): " + ", ".join(undeclared)


def test_the_cell_node_view_is_declared() -> None:
    """A cell's `node` (core.build_view.node_view, sent in trtls/buildTree) is a NodeView: both of its shapes — waiting
    for a node, and placed with every placement fact a node reports — validate against the wire model (extra fields
    are refused), and every key the placed view writes is declared."""
    from pathlib import Path as P

    from trtls.core.build_state import BuildState
    from trtls.core.build_view import node_view
    from trtls.core.events import Placed, Queued

    waiting = BuildState("c-1", "demo", P("/nowhere"), 1.0, cell="c", on_farm_node=True)
    waiting.fold(Queued(v=1, type="queued", t_ns=1))
    assert set(wire.NodeView.model_validate(node_view(waiting, now=2_000_000_001)).model_fields_set) == {"waitingS"}
    placed = BuildState("c-2", "demo", P("/nowhere"), 1.0, cell="c", on_farm_node=True)
    placed.fold(Placed.model_validate({"v": 1, "type": "placed", "t_ns": 2, **_placement_sample(Placed)}))
    view = node_view(placed)
    wire.NodeView.model_validate(view)
    assert view.keys() <= set(wire.NodeView.model_fields) and len(view) >= 8, view


def _placement_sample(model: type) -> dict:
    """A value of the right type for every field of a `placed` event (a node's report)."""
    sample: dict = {}
    for name, info in model.model_fields.items():
        if name in ("v", "type", "t_ns"):
            continue
        text = str(info.annotation)
        if "dict" in text:
            sample[name] = {"zone": "a"}
        elif "list" in text:
            sample[name] = ["0"]
        elif "bool" in text:
            sample[name] = True
        elif "float" in text or "int" in text:
            sample[name] = 1
        else:
            sample[name] = "x"
    return sample
