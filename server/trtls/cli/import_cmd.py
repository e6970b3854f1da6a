"""`trtls import trtexec [--name N] [--write RECIPE [--replace]] [--legacy-precision] -- <trtexec arguments>`.

Prints the `[engines.NAME]` table equivalent to a trtexec command line, or writes it into a recipe: atomically,
keeping every other line of the file, and only when the result loads (a recipe the importer would break is never
written). Exit 0 done, 2 bad input (no --onnx, a malformed shape, an engine of that name already in the recipe
without --replace).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path
from typing import Any

from trtls.cli.common import finding_text, report_command_error, report_error, report_finding
from trtls.cli.exits import EXIT_BAD_INPUT, EXIT_OK
from trtls.cli.usage import USAGE, JsonErrors, emit_error

COMMAND = "import trtexec"

# a schema error in the table we wrote would be our bug, a bad profile or engine name the command line's, an output or
# cache over the model or the recipe (TRT109) its too: never write such a recipe
REFUSE_CODES = {"TRT100", "TRT101", "TRT102", "TRT103", "TRT105", "TRT106", "TRT108", "TRT109"}


def register(subparsers: Any) -> None:
    imp = subparsers.add_parser(
        "import",
        help="turn another tool's build command into a recipe table",
        epilog="exit codes: 0 done, 2 bad input",
    )
    tools = imp.add_subparsers(dest="tool", required=True)
    t = tools.add_parser(
        "trtexec",
        help="the [engines.NAME] table equivalent to a trtexec command line (after --)",
        epilog="example: trtls import trtexec -- --onnx=model.onnx --saveEngine=model.engine --fp16 "
        "--minShapes=x:1x3x224x224 --optShapes=x:8x3x224x224 --maxShapes=x:32x3x224x224. "
        "Exit codes: 0 done, 2 bad input.",
    )
    t.add_argument("--name", help="engine name (default: the ONNX file's stem)")
    t.add_argument("--write", metavar="RECIPE", help="add the table to this trtls.toml (or folder) instead of stdout")
    t.add_argument("--replace", action="store_true", help="with --write: replace an engine of the same name")
    t.add_argument(
        "--legacy-precision",
        action="store_true",
        help="keep --fp16/--bf16/--int8/--fp8 as TensorRT 10.x legacy_flags instead of the AutoCast step",
    )
    t.add_argument(
        "--json",
        action="store_true",
        help="print the result as one JSON object ({type: imported, engine, toml} or {type: written, engine, file}); "
        "an error as one JSON error record (code, message, file, line, col) — on stdout, the text on stderr",
    )
    t.add_argument("trtexec_args", nargs=argparse.REMAINDER, help="trtexec's arguments, after --")
    t.set_defaults(func=cmd_import_trtexec)


def cmd_import_trtexec(args: argparse.Namespace) -> int:
    from trtls.importers.trtexec import ImportError_, import_trtexec

    argv = list(args.trtexec_args)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        report_command_error(COMMAND, USAGE, "give trtexec's arguments after --")
        return EXIT_BAD_INPUT
    if args.write is not None and not args.write.strip():  # was taken for no --write: printed, exit 0
        report_command_error(COMMAND, USAGE, "--write names no file (give a recipe or its folder)")
        return EXIT_BAD_INPUT
    try:
        imported = import_trtexec(argv, args.name, args.legacy_precision)
    except ImportError_ as exc:  # a trtexec argument trtls cannot take: the command's words are wrong
        report_command_error(COMMAND, USAGE, str(exc))
        return EXIT_BAD_INPUT
    if not args.write:  # judged as --write judges it: a table a recipe would refuse is never printed as done
        from trtls.core.recipe import load_recipe

        result = load_recipe(Path.cwd() / "trtls.toml", imported.toml())
        broken = [f for f in result.findings if f.code == "TRT100" or _ours(f, imported.name)]
        for f in broken:  # of the table printed, not of a file: no place but the key (its TOML path)
            print(f"trtls import trtexec: {finding_text(f, ' (nothing printed)')}", file=sys.stderr)
            emit_error(f.code, f.message + " (nothing printed)", key=".".join(map(str, f.path)) or None)
        if broken:
            return EXIT_BAD_INPUT
        if args.json:
            _print_json({"type": "imported", "engine": imported.name, "toml": imported.toml()})
        else:
            sys.stdout.write(imported.toml())
        return EXIT_OK
    return _write(imported, args)


def _write(imported: Any, args: argparse.Namespace) -> int:
    from trtls.core.recipe import load_recipe
    from trtls.core.recipe_file import RecipeTooLarge, read_recipe_bytes

    path = Path(args.write)
    path = path / "trtls.toml" if path.is_dir() else path
    _rebase_paths(imported, Path.cwd(), path.resolve().parent)
    try:
        raw = read_recipe_bytes(path) if os.path.lexists(path) else b""  # bounded, a regular file only
        old = raw.decode("utf-8")
    except (OSError, ValueError) as exc:  # RecipeTooLarge and a non-UTF-8 file are ValueErrors
        code = "TRT125" if isinstance(exc, RecipeTooLarge) else "TRT104"  # the code `trtls check` says it with
        why = getattr(exc, "strerror", None) or exc
        report_error(code, f"cannot read the recipe: {why} (nothing written)", str(path))
        return EXIT_BAD_INPUT
    existing = load_recipe(path, old) if old else None
    if existing is not None and _refused_as_not_a_recipe(existing):
        return EXIT_BAD_INPUT
    if existing is not None and imported.name in (existing.data.get("engines") or {}):
        if not args.replace:
            _report_on_engine(
                existing, imported.name, f"engine '{imported.name}' already exists; use --replace or --name"
            )
            return EXIT_BAD_INPUT
        removed = remove_engine_tables(old, imported.name)
        if removed is None or not removed_only(old, removed, imported.name):
            how = "is not written as its own" if removed is None else "cannot be told from the rest of the file by its"
            _report_on_engine(
                existing,
                imported.name,
                f"engine '{imported.name}' {how} [engines.{imported.name}] tables; edit it by hand",
            )
            return EXIT_BAD_INPUT
        old = removed
    newline = "\r\n" if "\r\n" in old else "\n"  # a CRLF recipe stays CRLF: no file of mixed line endings
    table = imported.toml().replace("\n", newline)
    text = (old.rstrip("\r\n") + newline * 2 if old.strip() else "") + table
    result = load_recipe(path, text)
    ours = [f for f in result.findings if f.path[:2] == ("engines", imported.name)]
    broken = [f for f in result.findings if f.code == "TRT100" or _ours(f, imported.name)]
    if broken:
        for f in broken:
            report_finding(result, f, " (nothing written)")
        return EXIT_BAD_INPUT
    try:  # the user's own recipe, rewritten on request: through the door, never through a symlink
        from trtls.fs import Kind, atomic_write_text

        # replaced only while it holds what was read: an edit made meanwhile (another import, an editor) is kept
        atomic_write_text(path, text, kind=Kind.generated, within=os.path.realpath(path.parent), unchanged=raw)
    except OSError as exc:
        from trtls.cli.output import refusal

        code, why = refusal(exc, "TOML")
        report_error(code, why, str(path))
        return EXIT_BAD_INPUT
    print(f"{path}: wrote [engines.{imported.name}]", file=sys.stderr)
    for f in ours:  # e.g. the model is not there yet, a dynamic input with no profile: the user should know
        report_finding(result, f)
    if args.json:
        _print_json({"type": "written", "engine": imported.name, "file": str(path)})
    return EXIT_OK


def _print_json(record: dict[str, Any]) -> None:
    import json

    print(json.dumps(record), file=JsonErrors.out or sys.stdout, flush=True)


def _ours(finding: Any, name: str) -> bool:
    """Whether a finding refuses the imported table: an error of its own tables a recipe would not load with."""
    return finding.code in REFUSE_CODES and finding.path[:2] == ("engines", name)


def _refused_as_not_a_recipe(existing: Any) -> bool:
    """Whether an existing file is not a trtls recipe this import may add to; if so, why is said, located (a key of
    someone else's file is printed: the console escapes it). A file with a TOML syntax error, or with a top-level key
    no recipe has (a pyproject.toml's `[project]`, another tool's config), is someone else's file: `--write` adds
    tables to a recipe only, never to whatever TOML it is pointed at."""
    for f in existing.findings:
        if f.code == "TRT100":
            _report_at(existing, f, "TRT100", "the recipe has a TOML syntax error; fix it first (nothing written)")
            return True
    for f in existing.findings:
        if f.code == "TRT101" and len(f.path) == 1:
            _report_at(
                existing,
                f,
                "TRT101",
                f"'{f.path[0]}' is not a key of a trtls recipe: {existing.path} is not a trtls recipe, and --write "
                "adds to a recipe (or a new file) only (nothing written)",
            )
            return True
    if not existing.data and Path(existing.path).suffix != ".toml":
        # comments alone parse as an empty TOML document: a shell script's `# deploy notes`, a NOTES file
        report_error(
            "TRT101",
            "holds no table of a trtls recipe and is not a .toml file: not a trtls recipe, and --write adds to a "
            "recipe (or a new file) only (nothing written)",
            str(existing.path),
        )
        return True
    return False


def _report_at(existing: Any, f: Any, code: str, message: str) -> None:
    """`message` under `code`, placed where the finding `f` stands in `existing` (`file:line:col`)."""
    rng = existing.source_map.range(f.path, f.on_value)
    report_error(code, message, str(existing.path), rng.start_line + 1, rng.start_col + 1)


def _report_on_engine(existing: Any, name: str, message: str) -> None:
    """Why `--write` leaves the recipe's engine `name` alone, placed on its `[engines.NAME]` table: the command's
    words (`--replace`, `--name`) decide, so its code is the command line's (`USAGE`, TRT420)."""
    rng = existing.source_map.range(("engines", name))
    report_error(USAGE, f"{message} (nothing written)", str(existing.path), rng.start_line + 1, rng.start_col + 1)


def _rebase_paths(imported: Any, cwd: Path, recipe_dir: Path) -> None:
    """trtexec's paths are relative to where it ran; a recipe's are relative to the recipe."""

    def rebase(p: str) -> str:
        if os.path.isabs(p):
            return p
        return os.path.relpath(cwd / p, recipe_dir)

    for key in ("onnx", "output", "timing_cache"):
        if key in imported.engine:
            imported.engine[key] = rebase(imported.engine[key])
    for key, paths in imported.plugins.items():
        imported.plugins[key] = [rebase(p) for p in paths]


def removed_only(old: str, removed: str, name: str) -> bool:
    """Whether `removed` holds exactly what `old` holds but engine `name`: a line that only looks like its header
    (inside a multi-line string) must not take the lines after it away."""
    import tomllib

    def without(data: dict[str, Any]) -> dict[str, Any]:
        engines = {k: v for k, v in (data.get("engines") or {}).items() if k != name}
        return {k: v for k, v in data.items() if k != "engines"} | ({"engines": engines} if engines else {})

    try:
        after = tomllib.loads(removed)
        return name not in (after.get("engines") or {}) and without(after) == without(tomllib.loads(old))
    except tomllib.TOMLDecodeError:
        return False


_HEADER = re.compile(r"^\s*\[\[?\s*(?P<name>[^\]]+?)\s*\]\]?\s*(#.*)?$")


def remove_engine_tables(text: str, name: str) -> str | None:
    """The recipe text without the `[engines.NAME]`, `[engines.NAME.*]` and `[[engines.NAME.*]]` tables (and the
    comment lines right above them). None when the engine is not written as tables of its own."""
    from trtls.importers.trtexec import _key

    prefixes = {f"engines.{name}", f"engines.{_key(name)}"}
    lines = text.splitlines(keepends=True)
    keep: list[str] = []
    inside = found = False
    for line in lines:
        m = _HEADER.match(line)
        if m is not None:
            header = re.sub(r"\s*\.\s*", ".", m.group("name"))
            inside = any(header == p or header.startswith(p + ".") for p in prefixes)
            if inside:
                found = True
                while keep and keep[-1].lstrip().startswith("#"):  # its leading comments go with it
                    keep.pop()
        if not inside:
            keep.append(line)
    return "".join(keep) if found else None
