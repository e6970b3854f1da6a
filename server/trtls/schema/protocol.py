"""Generate the protocol's documents from its models: `python -m trtls.schema.protocol` (`--check`: exit 1 on drift).

One declaration (trtls.core.worker_job: the job a worker receives; trtls.core.events: the worker's events and
control; trtls.core.wire: the language server's notifications and command replies; trtls.lsp.command_args: the
commands' arguments), three generated files, the way lsprotocol is generated from the LSP meta-model:

- docs/protocol.schema.json — JSON Schema (2020-12) of every model, with `x-trtls` naming which is which;
- extension/src/generated/protocol.ts — the extension's TypeScript types, generated from that schema, and every
  vocabulary of trtls.core.vocabulary as a `const` array with its type (the extension parses the server's words
  against these arrays, so a word added to the vocabulary reaches it by regeneration);
- the tables of docs/protocol.md, between `<!-- generated:NAME -->` and `<!-- /generated:NAME -->`.

A field's meaning is the comment beside it in the model (read from the source), so the models stay the one place
to write it. tests/test_protocol_generated.py and .ci/run fail when a generated file is not what this writes.
"""

from __future__ import annotations

import inspect
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from trtls.core import events, wire, worker_job
from trtls.fs import Kind, atomic_write_text, ensure_folder, read_text
from trtls.lsp import command_args
from trtls.schema.protocol_ts import build_ts, ts_type

ROOT = Path(__file__).resolve().parents[3]
SCHEMA_FILE = ROOT / "docs" / "protocol.schema.json"
TS_FILE = ROOT / "extension" / "src" / "generated" / "protocol.ts"
DOC_FILE = ROOT / "docs" / "protocol.md"
COMMON_EVENT_FIELDS = ("v", "type", "t_ns")

FARM_EVENTS = ("queued", "placed")
WORKER_EVENTS = [m for t, m in events.EVENT_MODELS.items() if t not in FARM_EVENTS]
FARM_MODELS = [events.EVENT_MODELS[t] for t in FARM_EVENTS]
JOB_MODELS: list[type[BaseModel]] = [
    worker_job.WorkerJob,
    worker_job.JobTimingCache,
    worker_job.JobProfile,
    worker_job.JobShapes,
    worker_job.JobPrecision,
    worker_job.JobPlugins,
    worker_job.JobFaults,
    worker_job.JobStall,
]
WIRE_MODELS: list[type[BaseModel]] = [
    wire.BuildTree,
    wire.MatrixTree,
    wire.PhaseRow,
    wire.NodeView,
    wire.CellRow,
    wire.MatrixProgress,
    wire.ProgressEnd,
]
# the models a command reply holds (or is one of), each with its own table under the commands'
REPLY_PARTS: list[type[BaseModel]] = [
    wire.BuildEngineReply,
    wire.MatrixCellPlan,
    wire.ReusedCell,
    wire.ListedBuild,
    wire.GateCheck,
]
COMMAND_ARGS: dict[str, type[BaseModel]] = {
    "trtls.buildEngine": command_args.BuildEngineArgs,
    "trtls.buildMatrix": command_args.BuildMatrixArgs,
    "trtls.cancelBuild": command_args.CancelBuildArgs,
    "trtls.listBuilds": command_args.EmptyArgs,
    "trtls.showEvidence": command_args.BuildIdArgs,
    "trtls.buildReport": command_args.BuildIdArgs,
    "trtls.listTargets": command_args.UriArgs,
    "trtls.runGates": command_args.RunGatesArgs,
    "trtls.lockRoute": command_args.LockRouteArgs,
    "trtls.allowLicense": command_args.AllowLicenseArgs,
    "trtls.printDebugInformation": command_args.EmptyArgs,
    "trtls.reduceEngine": command_args.ReduceEngineArgs,
    "trtls.findDivergence": command_args.FindDivergenceArgs,
    "trtls.buildMinimal": command_args.BuildMinimalArgs,
    "trtls.showDocument": command_args.ShowDocumentArgs,
    "trtls.rollbackEngine": command_args.RollbackEngineArgs,
}


def field_comments(cls: type[BaseModel]) -> dict[str, str]:
    """`name: type = default  # meaning` → {name: meaning}, from the class and its bases' source."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not (isinstance(klass, type) and issubclass(klass, BaseModel)) or klass is BaseModel:
            continue
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        pending: list[str] = []  # a comment on the line(s) above a field also describes it
        for line in source.splitlines()[1:]:
            if m := re.match(r"^    #\s?(.*)$", line):
                pending.append(m.group(1).strip())
                continue
            m = re.match(r"^    (\w+): [^#]*?(?:#\s*(.*))?$", line)
            if m and not m.group(1).startswith("_") and m.group(1) != "model_config":
                text = " ".join([*pending, m.group(2) or ""]).strip()
                if text:
                    out[m.group(1)] = text.removeprefix("noqa").strip()
            pending = []
    return out


def all_models() -> list[type[BaseModel]]:
    seen: list[type[BaseModel]] = []
    listed: list[type[BaseModel]] = [
        *JOB_MODELS,
        *WORKER_EVENTS,
        *FARM_MODELS,
        events.CancelControl,
        events.CommitControl,
        events.StartControl,
        *WIRE_MODELS,
    ]
    for m in [*listed, *wire.COMMAND_REPLIES.values(), *COMMAND_ARGS.values()]:
        if m not in seen:
            seen.append(m)
    return seen


def build_schema() -> dict[str, Any]:
    models = all_models()
    _, schema = models_json_schema([(m, "validation") for m in models], ref_template="#/$defs/{model}")
    defs: dict[str, Any] = schema["$defs"]
    by_name = {m.__name__: m for m in models}
    for module in (worker_job, events, wire):  # the models only nested in others (GatesVerdict, ListedBuild …) too
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, BaseModel) and value.__module__ == module.__name__:
                by_name.setdefault(value.__name__, value)
    for name, d in defs.items():
        comments = field_comments(by_name[name]) if name in by_name else {}
        for prop, p in d.get("properties", {}).items():
            p.pop("title", None)
            if prop in comments:
                p["description"] = comments[prop]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://raw.githubusercontent.com/trtls/trtls/main/docs/protocol.schema.json",
        "title": f"trtls protocol ({events.PROTOCOL} worker events, language server notifications and replies)",
        "description": "Generated by `python -m trtls.schema.protocol` from trtls.core.worker_job, trtls.core.events "
        "and trtls.core.wire.",
        "x-trtls": {
            "protocol": events.PROTOCOL,
            "protocolVersion": events.PROTOCOL_VERSION,
            "job": worker_job.WorkerJob.__name__,
            "workerEvents": {t: m.__name__ for t, m in events.EVENT_MODELS.items()},
            "control": {
                "cancel": events.CancelControl.__name__,
                "commit": events.CommitControl.__name__,
                "start": events.StartControl.__name__,
            },
            "notifications": {k: [m.__name__ for m in v] for k, v in wire.NOTIFICATIONS.items()},
            "commands": {
                c: {"arguments": COMMAND_ARGS[c].__name__, "reply": r.__name__} for c, r in wire.COMMAND_REPLIES.items()
            },
        },
        "$defs": dict(sorted(defs.items())),
    }


# -- docs/protocol.md -------------------------------------------------------------------------------------------------
def md(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def fields_list(schema: dict[str, Any], name: str, skip: tuple[str, ...] = ()) -> str:
    d = schema["$defs"][name]
    if "properties" not in d:  # a union of models (a reply that is one of two)
        return md(ts_type(d))
    required = set(d.get("required", []))
    parts = []
    for prop, p in d.get("properties", {}).items():
        if prop not in skip:
            parts.append(f"`{prop}{'' if prop in required else '?'}`: {ts_type(p)}")
    return md(", ".join(parts))


def events_table(schema: dict[str, Any], models: Sequence[type[BaseModel]]) -> str:
    rows = ["| type | fields | notes |", "|---|---|---|"]
    for m in models:
        t = m.model_fields["type"].annotation.__args__[0]  # type: ignore[union-attr]
        d = schema["$defs"][m.__name__]["properties"]
        meanings = [
            f"`{k}`: {p['description']}" for k, p in d.items() if "description" in p and k not in COMMON_EVENT_FIELDS
        ]
        notes = md(" ".join([m.__doc__ or "", *meanings]))
        rows.append(f"| `{t}` | {fields_list(schema, m.__name__, COMMON_EVENT_FIELDS)} | {notes} |")
    return "\n".join(rows)


def model_table(schema: dict[str, Any], name: str) -> str:
    d = schema["$defs"][name]
    required = set(d.get("required", []))
    rows = [f"**{name}** — {md(d.get('description', ''))}", "", "| field | type | meaning |", "|---|---|---|"]
    for prop, p in d.get("properties", {}).items():
        rows.append(
            f"| `{prop}{'' if prop in required else '?'}` | {md(ts_type(p))} | {md(p.get('description', ''))} |"
        )
    return "\n".join(rows)


def commands_table(schema: dict[str, Any]) -> str:
    rows = ["| command | arguments | reply |", "|---|---|---|"]
    for c, io in schema["x-trtls"]["commands"].items():
        rows.append(f"| `{c}` | {fields_list(schema, io['arguments']) or '—'} | {fields_list(schema, io['reply'])} |")
    return "\n".join(rows)


def doc_tables(schema: dict[str, Any]) -> dict[str, str]:
    return {
        "events": events_table(schema, WORKER_EVENTS),
        "failure": model_table(schema, "Failure"),
        "build-records": "\n\n".join(
            model_table(schema, m) for m in ("BuildEnvironment", "BuildTarget", "NetworkTyping")
        ),
        "farm-events": events_table(schema, FARM_MODELS),
        "job": "\n\n".join(model_table(schema, m.__name__) for m in JOB_MODELS),
        "control": fields_list(schema, "CancelControl"),
        "commit-control": fields_list(schema, "CommitControl"),
        "start-control": fields_list(schema, "StartControl"),
        "notifications": "\n\n".join(model_table(schema, m.__name__) for m in WIRE_MODELS),
        "commands": commands_table(schema),
        "verdict": model_table(schema, "GatesVerdict"),
        "reply-models": "\n\n".join(model_table(schema, m.__name__) for m in REPLY_PARTS),
    }


def render_doc(text: str, tables: dict[str, str]) -> str:
    for name, table in tables.items():
        begin, end = f"<!-- generated:{name} -->\n", f"<!-- /generated:{name} -->"
        a, b = text.find(begin), text.find(end)
        if a < 0 or b < a:
            raise SystemExit(f"{DOC_FILE}: no {begin.strip()} … {end} markers")
        text = text[: a + len(begin)] + table + "\n" + text[b:]
    return text


def generated() -> dict[Path, str]:
    schema = build_schema()
    return {
        SCHEMA_FILE: json.dumps(schema, indent=2, ensure_ascii=False) + "\n",
        TS_FILE: build_ts(schema),
        DOC_FILE: render_doc(_read(DOC_FILE), doc_tables(schema)),
    }


def drifted() -> list[Path]:
    """The generated files whose content is not what the models give."""
    return [p for p, text in generated().items() if not p.is_file() or _read(p) != text]


def _read(path: Path) -> str:
    """A document of this repository (package data: followed, unbounded)."""
    return read_text(path, limit=None, follow=True)


def main(argv: list[str] | None = None) -> int:
    check = "--check" in (argv if argv is not None else sys.argv[1:])
    if check:
        stale = drifted()
        for p in stale:
            print(f"{p} is out of date: run python -m trtls.schema.protocol", file=sys.stderr)
        return 1 if stale else 0
    for p, text in generated().items():
        ensure_folder(p.parent, within=ROOT)
        atomic_write_text(p, text, kind=Kind.generated, within=ROOT)
        print(f"wrote {p.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
