"""Editor features over the recipe schema: code lens, completion, quick fixes (the hover: lsp/hover.py).

Everything here is derived from the pydantic models (descriptions, enum values, field names), so a
new recipe key gets hover and completion without touching this file. Completion works on raw text
(a half-typed line is not valid TOML, so it cannot rely on the parser).
"""

from __future__ import annotations

import re
import typing
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from lsprotocol import types as lsp
from pydantic import BaseModel

from trtls.builds.supervisor import retry as retry_table
from trtls.core.recipe import LoadedRecipe, RecipeFile
from trtls.core.route import RouteModel
from trtls.core.validation import model_in
from trtls.gates.lifecycle.notes import last_gates_lens, promotion_lens

if TYPE_CHECKING:
    from trtls.onnx_files.onnx_reader import ModelInputs

HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?")
KEY_BEFORE_EQ = re.compile(r"^\s*([A-Za-z0-9_.\"'-]+)\s*=\s*(.*)$")


def model_for_table(table: tuple) -> type[BaseModel] | None:
    """The model whose fields are the keys of `table` (e.g. ('engines','demo','builder') → BuilderSettings)."""
    model: type[BaseModel] | None
    if len(table) >= 2 and table[0] == "routes":
        model = RouteModel
        rest = table[2:]
    else:
        model, rest = RecipeFile, table
        if len(table) >= 2 and table[0] == "engines":
            from trtls.core.recipe import EngineRecipe

            model, rest = EngineRecipe, table[2:]
    for part in rest:
        if model is None or isinstance(part, int):
            continue
        fields = model.model_fields
        if part not in fields:
            return None
        model = model_in(fields[part].annotation)
    return model


def enum_values(annotation: object) -> list[str]:
    if typing.get_origin(annotation) is typing.Literal:
        return [str(a) for a in typing.get_args(annotation)]
    out: list[str] = []
    for arg in typing.get_args(annotation):
        out.extend(enum_values(arg))
    return out


def type_name(annotation: object) -> str:
    return str(annotation).replace("typing.", "").replace("<class '", "").replace("'>", "")


def table_at_text(lines: list[str], line: int) -> tuple:
    counts: dict[tuple, int] = {}
    current: tuple = ()
    for i, text in enumerate(lines[: line + 1]):
        m = HEADER.match(text)
        if not m:
            continue
        path = tuple(p.strip().strip('"') for p in m.group(2).split("."))
        if m.group(1) == "[[":
            idx = counts.get(path, 0)
            if i < line or i == line:
                counts[path] = idx + 1
            current = path + (idx,)
        else:
            current = path
    return current


# -- code lens ---------------------------------------------------------------------------------
def code_lenses(
    loaded: LoadedRecipe,
    uri: str,
    running: dict[str, str],
    last: dict[str, str],
    recorded: Callable[[Path], dict[str, str]] | None = None,
) -> list[lsp.CodeLens]:
    """▶ Build Engine (■ Stop while it builds, Evidence after) over each engine; ▶ Run Gates over routes. `last`:
    each engine's last build made in this editor session; the recipe's recorded runs add, and win for, the engines
    they hold when they started later (a build from a terminal or from before this server started). `recorded`:
    where they come from — the server's last reading (lsp/recorded_runs.py, read off the event loop); by default
    they are read now (`latest_runs`)."""
    from trtls.builds.avoidance.freshness import build_lens_title  # the engine store's verdict (docs/store.md)
    from trtls.core.loads_on import engine_loads_on  # where the engine will load (issue 33)
    from trtls.report.capability_lens import latest_runs, newest_runs

    last = newest_runs(last, (recorded or latest_runs)(loaded.path))
    out: list[lsp.CodeLens] = []
    for line, path in loaded.source_map.tables:
        rng = lsp.Range(lsp.Position(line, 0), lsp.Position(line, 0))
        if len(path) == 2 and path[0] == "engines":
            engine = str(path[1])
            if engine in running:
                out.append(
                    lsp.CodeLens(
                        rng,
                        lsp.Command(
                            "■ Stop",
                            "trtls.cancelBuild",
                            arguments=[{"buildId": running[engine], "source": "ide_stop"}],
                        ),
                    )
                )
            else:
                out.append(
                    lsp.CodeLens(
                        rng,
                        lsp.Command(
                            build_lens_title(loaded, engine),  # ✓ up to date · … / ▶ Build Engine · what changed
                            "trtls.buildEngine",
                            arguments=[{"uri": uri, "engine": engine}],
                        ),
                    )
                )
            eng = loaded.recipe.engines.get(engine) if loaded.recipe is not None else None
            loads = engine_loads_on(eng) if eng is not None else None
            if loads is not None and loads.module is not None:  # before the build: where it will load (title only)
                out.append(lsp.CodeLens(rng, lsp.Command(f"loads on {loads.text()}", "")))
            if eng is not None and eng.matrix is not None:
                out.append(
                    lsp.CodeLens(
                        rng,
                        lsp.Command("▶ Build Matrix", "trtls.buildMatrix", arguments=[{"uri": uri, "engine": engine}]),
                    )
                )
            if engine in last:
                out.append(
                    lsp.CodeLens(
                        rng, lsp.Command("Evidence", "trtls.showEvidence", arguments=[{"buildId": last[engine]}])
                    )
                )
                from trtls.report.capability_lens import capability_lens_title  # what TensorRT said, as recorded

                said = capability_lens_title(loaded.path, last[engine])
                if said is not None:
                    out.append(lsp.CodeLens(rng, lsp.Command(said, "")))
        elif len(path) == 2 and path[0] == "routes":
            out.append(
                lsp.CodeLens(
                    rng, lsp.Command("▶ Run Gates", "trtls.runGates", arguments=[{"uri": uri, "route": str(path[1])}])
                )
            )
            # the last decision and the promoted state (docs/gates.md): titles, not commands
            for title in (last_gates_lens(loaded, str(path[1])), promotion_lens(loaded, str(path[1]))):
                if title is not None:
                    out.append(lsp.CodeLens(rng, lsp.Command(title, "")))
    return out


# -- completion --------------------------------------------------------------------------------
def completions(
    text: str, line: int, col: int, model_of: Callable[[str], ModelInputs | None] | None = None
) -> list[lsp.CompletionItem]:
    """`model_of(engine)` gives the engine's ModelInputs (or None): its input names are offered in profiles."""
    lines = text.splitlines() or [""]
    current = lines[line][:col] if line < len(lines) else ""
    inputs = _input_items(lines, line, col, model_of) if model_of is not None else []
    if re.match(r"^\s*inputs\.", current) or (re.match(r"^\s*input\s*=", current) and inputs):
        return inputs  # after `inputs.` or as the shorthand's `input = ` value: only the model's names fit
    table = table_at_text(lines, line)
    if current.lstrip().startswith("["):
        return [lsp.CompletionItem(label=t, kind=lsp.CompletionItemKind.Module) for t in ("engines.", "routes.")]
    model = model_for_table(table)
    if model is None:
        return []
    m = KEY_BEFORE_EQ.match(current)
    if m:  # value position: enum values of that key
        info = model.model_fields.get(m.group(1).strip())
        if info is None:
            return []
        return [
            lsp.CompletionItem(label=f'"{v}"', kind=lsp.CompletionItemKind.EnumMember, documentation=info.description)
            for v in enum_values(info.annotation)
        ]
    present = set()
    start = max((i for i in range(line + 1) if HEADER.match(lines[i])), default=-1)
    for other in lines[start + 1 :]:
        if HEADER.match(other):
            break
        km = KEY_BEFORE_EQ.match(other)
        if km:
            present.add(km.group(1).strip())
    items = list(inputs)
    for name, info in model.model_fields.items():
        if name in present:
            continue
        items.append(
            lsp.CompletionItem(
                label=name,
                kind=lsp.CompletionItemKind.Property,
                detail=type_name(info.annotation),
                documentation=info.description,
                insert_text=f"{name} = ",
            )
        )
    return items


def _input_items(
    lines: list[str], line: int, col: int, model_of: Callable[[str], ModelInputs | None]
) -> list[lsp.CompletionItem]:
    from trtls.onnx_files.assist import input_completions, profile_at

    where = profile_at(lines, line)
    model = model_of(where[0]) if where is not None else None
    if where is None or model is None:
        return []
    return [
        lsp.CompletionItem(
            label=c.label,
            kind=lsp.CompletionItemKind.Field,
            detail=c.detail,
            documentation=c.documentation,
            insert_text=c.insert_text,
            sort_text="0" + c.label,  # the model's inputs before the schema's keys
        )
        for c in input_completions(model, lines, line, col, where[1])
    ]


# -- quick fixes -------------------------------------------------------------------------------
def code_actions(uri: str, text: str, diagnostics: list[lsp.Diagnostic]) -> list[lsp.CodeAction]:
    out: list[lsp.CodeAction] = []
    lines = text.splitlines()
    for d in diagnostics:
        data = d.data if isinstance(d.data, dict) else {}
        code = str(d.code)
        fix = data.get("fix")
        if isinstance(fix, dict) and isinstance(fix.get("edits"), list):  # text edits computed with the finding
            edits = [
                lsp.TextEdit(
                    lsp.Range(lsp.Position(e["range"][0], e["range"][1]), lsp.Position(e["range"][2], e["range"][3])),
                    e["newText"],
                )
                for e in fix["edits"]
            ]
            out.append(
                lsp.CodeAction(
                    title=str(fix.get("title", "Fix")),
                    kind=lsp.CodeActionKind.QuickFix,
                    diagnostics=[d],
                    edit=lsp.WorkspaceEdit(changes={uri: edits}),
                    is_preferred=True,
                )
            )
            continue
        if code == "TRT101":  # unknown key: rename to the close match, or remove the line
            if data.get("suggestion"):
                out.append(
                    _edit(f"Rename to '{data['suggestion']}'", uri, d, d.range, data["suggestion"], preferred=True)
                )
            line = d.range.start.line
            own_line = line < len(lines) and lines[line][: d.range.start.character].strip() == ""
            if (
                own_line and "=" in lines[line] and not lines[line].lstrip().startswith("[")
            ):  # never inside an inline table
                whole = lsp.Range(lsp.Position(line, 0), lsp.Position(line + 1, 0))
                out.append(_edit(f"Remove unknown key '{data.get('key')}'", uri, d, whole, ""))
        elif code == "TRT106" and data.get("suggestion"):
            out.append(
                _edit(
                    f'Replace with "{data["suggestion"]}"', uri, d, d.range, f'"{data["suggestion"]}"', preferred=True
                )
            )
        elif code == "TRT205":
            engine = data.get("engine")
            advised = retry_table.RETRY_FOR_POLICY.get(str(data.get("retryPolicy")))
            for retry in retry_table.RETRY_KINDS:
                title = retry_table.RETRY_TITLES[retry]
                cmd = lsp.Command(
                    title, "trtls.buildEngine", arguments=[{"uri": uri, "engine": engine, "retry": retry}]
                )
                preferred = retry == advised
                out.append(
                    lsp.CodeAction(
                        title=title,
                        kind=lsp.CodeActionKind.QuickFix,
                        diagnostics=[d],
                        command=cmd,
                        is_preferred=preferred,
                    )
                )
        elif code == "TRT501" and isinstance(data.get("quick_fix"), dict):  # pin the revision to the snapshot's commit
            fix = data["quick_fix"]
            out.append(_edit(fix["title"], uri, d, d.range, f'"{fix["replace_value"]}"', preferred=True))
        elif code == "TRT507" and data.get("license") and _route(data):  # asks for confirmation before editing
            cmd = lsp.Command(
                f"Allow licence '{data['license']}' for this route…",
                "trtls.allowLicense",
                arguments=[{"uri": uri, "route": _route(data), "license": data["license"]}],
            )
            out.append(lsp.CodeAction(title=cmd.title, kind=lsp.CodeActionKind.QuickFix, diagnostics=[d], command=cmd))
        elif code == "TRT512" and _route(data):  # missing or drifted lock: `trtls route lock`, after review
            cmd = lsp.Command(
                "Lock the checkpoint files as they are now (trtls route lock, after review)…",
                "trtls.lockRoute",
                arguments=[{"uri": uri, "route": _route(data)}],
            )
            out.append(lsp.CodeAction(title=cmd.title, kind=lsp.CodeActionKind.QuickFix, diagnostics=[d], command=cmd))
    return out


def _route(data: dict) -> str | None:
    path = data.get("path") or []
    return str(path[1]) if len(path) >= 2 and path[0] == "routes" else None


def _edit(
    title: str, uri: str, d: lsp.Diagnostic, rng: lsp.Range, new_text: str, preferred: bool = False
) -> lsp.CodeAction:
    return lsp.CodeAction(
        title=title,
        kind=lsp.CodeActionKind.QuickFix,
        diagnostics=[d],
        edit=lsp.WorkspaceEdit(changes={uri: [lsp.TextEdit(rng, new_text)]}),
        is_preferred=preferred,
    )
