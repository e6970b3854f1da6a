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

from trtls.cli.common import finding_line, finding_text
from trtls.cli.exits import EXIT_BAD_INPUT, EXIT_OK

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
    t.add_argument("trtexec_args", nargs=argparse.REMAINDER, help="trtexec's arguments, after --")
    t.set_defaults(func=cmd_import_trtexec)


def cmd_import_trtexec(args: argparse.Namespace) -> int:
    from trtls.importers.trtexec import ImportError_, import_trtexec

    argv = list(args.trtexec_args)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("trtls import trtexec: give trtexec's arguments after --", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.write is not None and not args.write.strip():  # was taken for no --write: printed, exit 0
        print("trtls import trtexec: --write names no file (give a recipe or its folder)", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        imported = import_trtexec(argv, args.name, args.legacy_precision)
    except ImportError_ as exc:
        print(f"trtls import trtexec: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if not args.write:  # judged as --write judges it: a table a recipe would refuse is never printed as done
        from trtls.core.recipe import load_recipe

        result = load_recipe(Path.cwd() / "trtls.toml", imported.toml())
        broken = [f for f in result.findings if f.code == "TRT100" or _ours(f, imported.name)]
        for f in broken:
            print(f"trtls import trtexec: {finding_text(f, ' (nothing printed)')}", file=sys.stderr)
        if broken:
            return EXIT_BAD_INPUT
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
        print(
            f"{path}: {code} cannot read the recipe: {getattr(exc, 'strerror', None) or exc} (nothing written)",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    existing = load_recipe(path, old) if old else None
    refused = _not_a_recipe(existing) if existing is not None else None
    if refused is not None:
        from trtls.core.terminal_text import terminal_safe

        print(terminal_safe(refused), file=sys.stderr)  # a key of someone else's file is printed: no escape in it
        return EXIT_BAD_INPUT
    if existing is not None and imported.name in (existing.data.get("engines") or {}):
        if not args.replace:
            print(
                f"{path}: engine '{imported.name}' already exists; use --replace or --name (nothing written)",
                file=sys.stderr,
            )
            return EXIT_BAD_INPUT
        removed = remove_engine_tables(old, imported.name)
        if removed is None or not removed_only(old, removed, imported.name):
            how = "is not written as its own" if removed is None else "cannot be told from the rest of the file by its"
            print(
                f"{path}: engine '{imported.name}' {how} [engines.{imported.name}] tables; edit it by hand "
                "(nothing written)",
                file=sys.stderr,
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
            print(finding_line(result, f, " (nothing written)"), file=sys.stderr)
        return EXIT_BAD_INPUT
    try:  # the user's own recipe, rewritten on request: through the door, never through a symlink
        from trtls.fs import Kind, atomic_write_text

        # replaced only while it holds what was read: an edit made meanwhile (another import, an editor) is kept
        atomic_write_text(path, text, kind=Kind.generated, within=os.path.realpath(path.parent), unchanged=raw)
    except OSError as exc:
        from trtls.cli.output import refusal

        code, why = refusal(exc, "TOML")
        print(f"{path}: {code} {why}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(f"{path}: wrote [engines.{imported.name}]", file=sys.stderr)
    for f in ours:  # e.g. the model is not there yet, a dynamic input with no profile: the user should know
        print(finding_line(result, f), file=sys.stderr)
    return EXIT_OK


def _ours(finding: Any, name: str) -> bool:
    """Whether a finding refuses the imported table: an error of its own tables a recipe would not load with."""
    return finding.code in REFUSE_CODES and finding.path[:2] == ("engines", name)


def _not_a_recipe(existing: Any) -> str | None:
    """Why an existing file is not a trtls recipe this import may add to, located, or None. A file with a TOML
    syntax error, or with a top-level key no recipe has (a pyproject.toml's `[project]`, another tool's config),
    is someone else's file: `--write` adds tables to a recipe only, never to whatever TOML it is pointed at."""
    for f in existing.findings:
        if f.code == "TRT100":
            return f"{existing.location(f)}: TRT100 the recipe has a TOML syntax error; fix it first (nothing written)"
    for f in existing.findings:
        if f.code == "TRT101" and len(f.path) == 1:
            return (
                f"{existing.location(f)}: TRT101 '{f.path[0]}' is not a key of a trtls recipe: {existing.path} is "
                "not a trtls recipe, and --write adds to a recipe (or a new file) only (nothing written)"
            )
    if not existing.data and Path(existing.path).suffix != ".toml":
        # comments alone parse as an empty TOML document: a shell script's `# deploy notes`, a NOTES file
        return (
            f"{existing.path}: TRT101 holds no table of a trtls recipe and is not a .toml file: not a trtls recipe, "
            "and --write adds to a recipe (or a new file) only (nothing written)"
        )
    return None


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
