"""The one path policy: every file a recipe makes trtls write, and why a write is refused (located findings).

What a recipe writes: each engine's `output`, its timing cache (mode `read_write`), every matrix cell's output,
each route's `bundle` and (a route with no engine) its exported `onnx`, and the evidence folder `.trtls/`. Each
is placed with `core.paths.place` (folders resolved, a final symlink not followed) and refused when it

* leaves the recipe folder (`..`, an absolute path) — TRT117, unless the recipe's `allow_outside` names it or a
  folder holding it (the opt-in is per path, and every build's evidence records the writes it allowed);
* goes through a symlink: a symlinked file (never written through, opted in or not), or a symlinked folder that
  leads out of the recipe folder — TRT118;
* would overwrite what trtls reads or owns: the recipe, the lock file, any engine's ONNX model (precision variants
  included), a plugin library, a timing cache, a route's inputs or checkpoint, another write of the recipe, or
  anything under `.trtls/` — TRT109 (external data files are added by `trtls.onnx_files.profile_checks`, which reads
  the models).

`trtls check`, `trtls build` (exit 2 before any worker), the language server (diagnostics; no Build lens on an
error) and the farm driver load the recipe through `load_recipe`, which runs this for engine and evidence writes; a
route's writes are judged by `trtls route build` (`route_write_findings`), the one command that makes them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trtls.core.findings import Finding, Origin, Severity, TomlPath
from trtls.core.paths import BUNDLE_SBOM_SUFFIX, BUNDLE_SIDECAR_SUFFIX, inside, lexically_inside, place, real
from trtls.fs.read import engine_output_refusal

if TYPE_CHECKING:
    from trtls.core.recipe import LoadedRecipe, RecipeFile

STATE_DIR = ".trtls"  # trtls's own records: evidence, history, locks, quarantine
STATE_SUBDIRS = ("runs", "routes", "locks", "quarantine", "precision", "reduce", "engines")  # under .trtls/
LOCK_FILE = "trtls.lock.json"  # `trtls route lock`'s checkpoint digests (checkpoint.lock.LOCK_NAME)
LEDGER_FILE = "trtls.promotions.jsonl"  # the promotion ledger (gates.lifecycle.ledger.LEDGER_NAME)


def _f(code: str, msg: str, path: TomlPath, severity: Severity = Severity.error, **data: Any) -> Finding:
    return Finding(code, severity, msg, tuple(path), Origin.recipe, True, data)


@dataclass(frozen=True)
class Write:
    """One file (or, for `.trtls`, folder) the recipe makes trtls write."""

    where: TomlPath  # the key that names it
    relative: str
    what: str  # "the output of engine 'demo'", for messages
    kind: str  # output | cache | cell | bundle | export | state
    folder: bool = False


@dataclass
class WritePlan:
    """Every write of a recipe and every file those writes must leave alone, placed."""

    root: Path  # the recipe folder, real
    writes: list[tuple[Write, Path]] = field(default_factory=list)
    protected: dict[Path, str] = field(default_factory=dict)  # placed and real path → what it is
    protected_folders: dict[Path, str] = field(default_factory=dict)  # nothing may be written under these
    allowed: list[tuple[int, Path]] = field(default_factory=list)  # allow_outside index → placed path
    findings: list[Finding] = field(default_factory=list)


def _place(loaded: LoadedRecipe, relative: str) -> Path | None:
    try:
        return place(loaded.base_dir, relative)
    except (ValueError, OSError):
        return None


def _protect(plan: WritePlan, loaded: LoadedRecipe, relative: Any, what: str, folder: bool = False) -> None:
    if not isinstance(relative, str) or not relative:
        return
    placed = _place(loaded, relative)
    if placed is None:
        return
    target = plan.protected_folders if folder else plan.protected
    for p in {placed, real(placed)}:
        target.setdefault(p, what)


def recipe_writes(loaded: LoadedRecipe, recipe: RecipeFile, routes: bool = True) -> list[Write]:
    """Every write the recipe names, in file order (cells from `core.farm.expand`); `routes`: with the routes'."""
    from trtls.core.farm import expand

    out: list[Write] = [Write((), STATE_DIR, "the evidence folder .trtls", "state", True)]
    for sub in STATE_SUBDIRS:  # a symlink planted one level down leads the evidence out just the same
        out.append(Write((), f"{STATE_DIR}/{sub}", f"the evidence folder .trtls/{sub}", "state", True))
    for name, eng in recipe.engines.items():
        base: TomlPath = ("engines", name)
        out.append(Write(base + ("output",), eng.output, f"the output of engine '{name}'", "output"))
        if eng.timing_cache is not None and eng.timing_cache.mode == "read_write":
            where = base + ("timing_cache", "path")
            out.append(Write(where, eng.timing_cache.path, f"the timing cache of engine '{name}'", "cache"))
        if eng.matrix is not None:
            try:
                cells = expand(name, eng.matrix, eng.run_on)
            except (KeyError, ValueError, IndexError, AttributeError, TypeError):
                cells = []  # a malformed template: TRT170 from the farm checks
            for cell in cells:
                what = f"the output of cell '{cell.name}' of engine '{name}'"
                out.append(Write(base + ("matrix", "output"), cell.output, what, "cell"))
    for rname, raw in recipe.routes.items() if routes else ():
        if not isinstance(raw, dict):
            continue
        base = ("routes", rname)
        if isinstance(raw.get("bundle"), str):
            out.append(Write(base + ("bundle",), raw["bundle"], f"the bundle of route '{rname}'", "bundle"))
        # a route from an export (no checkpoint) reads its ONNX as shipped: it writes it never
        if raw.get("engine") is None and "checkpoint" in raw and isinstance(raw.get("onnx"), str):
            out.append(Write(base + ("onnx",), raw["onnx"], f"the ONNX model route '{rname}' exports", "export"))
        engine = recipe.engines.get(raw["engine"]) if isinstance(raw.get("engine"), str) else None
        if engine is not None:  # `trtls route build` exports the checkpoint to the engine's own ONNX path
            what = f"the ONNX model of engine '{raw['engine']}'"
            out.append(Write(base + ("engine",), engine.onnx, what, "export"))
        if isinstance(raw.get("previous_bundle"), str):  # the route copies the bundle it replaces there
            what = f"the previous bundle of route '{rname}'"
            out.append(Write(base + ("previous_bundle",), raw["previous_bundle"], what, "bundle"))
    return out


def _protected_reads(plan: WritePlan, loaded: LoadedRecipe, recipe: RecipeFile) -> None:
    plan.protected.setdefault(loaded.path, "the recipe")
    plan.protected.setdefault(real(loaded.path), "the recipe")
    _protect(plan, loaded, "trtls.toml", "the folder's recipe trtls.toml")
    _protect(plan, loaded, LOCK_FILE, "the lock file")
    _protect(plan, loaded, LEDGER_FILE, "the promotion ledger")
    _protect(plan, loaded, STATE_DIR, "trtls's own records (.trtls)", folder=True)
    for name, eng in recipe.engines.items():
        _protect(plan, loaded, eng.onnx, f"the ONNX model of engine '{name}'")
        if eng.timing_cache is not None:
            _protect(plan, loaded, eng.timing_cache.path, f"the timing cache of engine '{name}'")
        for lib in (*eng.plugins.libraries, *eng.plugins.serialize):
            _protect(plan, loaded, lib, f"a plugin library of engine '{name}'")
        for variant, onnx in ((eng.matrix.precision or {}) if eng.matrix else {}).items():
            _protect(plan, loaded, onnx, f"the ONNX model of precision '{variant}' of engine '{name}'")
    for rname, raw in recipe.routes.items():
        if not isinstance(raw, dict):
            continue
        for key in ("reference_inputs", "canary_inputs", "previous_bundle"):
            _protect(plan, loaded, raw.get(key), f"the {key.replace('_', ' ')} of route '{rname}'")
        for key in ("bundle", "previous_bundle"):  # the records a route build writes beside each bundle, gate 3 reads
            bundle = raw.get(key)
            if isinstance(bundle, str) and bundle:
                what = f"the {key.replace('_', ' ')} of route '{rname}'"
                _protect(plan, loaded, bundle + BUNDLE_SIDECAR_SUFFIX, f"the sidecar record of {what}")
                _protect(plan, loaded, bundle + BUNDLE_SBOM_SUFFIX, f"the SBOM of {what}")
        sets = raw.get("reference_inputs")
        for set_name, rel in sets.items() if isinstance(sets, dict) else ():  # a table of named input sets
            _protect(plan, loaded, rel, f"the reference inputs (set '{set_name}') of route '{rname}'")
        for key, sub in (("golden_outputs", "path"), ("checkpoint", "path")):
            table = raw.get(key)
            if isinstance(table, dict):
                _protect(
                    plan, loaded, table.get(sub), f"the {key.replace('_', ' ')} of route '{rname}'", key == "checkpoint"
                )


def write_plan(
    loaded: LoadedRecipe, recipe: RecipeFile, extra_protected: dict[Path, str] | None = None, routes: bool = False
) -> WritePlan:
    """Place every write and every protected file; the findings of writes that cannot be placed at all."""
    plan = WritePlan(real(loaded.base_dir))
    for i, entry in enumerate(recipe.allow_outside):
        placed = _place(loaded, entry)
        if placed is None:
            plan.findings.append(_f("TRT102", "path contains a NUL character", ("allow_outside", i)))
        else:
            plan.allowed.append((i, real(placed)))
    _protected_reads(plan, loaded, recipe)
    for p, what in (extra_protected or {}).items():
        plan.protected.setdefault(p, what)
    for w in recipe_writes(loaded, recipe, routes):
        placed = _place(loaded, w.relative) if w.relative else None
        if placed is None:
            why = "is empty" if not w.relative else "contains a NUL character"
            plan.findings.append(_f("TRT102", f"{w.what}: the path {why}", w.where))
            continue
        shell = _UNEXPANDED.search(w.relative)
        if shell is not None:
            plan.findings.append(
                _f(
                    "TRT102",
                    f"{w.what}: {shell.group(2)!r} is not expanded in a recipe (no shell reads it): the path names a "
                    f"file or folder called {shell.group(2)!r} in the recipe folder (a later `rm -rf {shell.group(2)}` "
                    "would take your home instead); write the folder out, or a path relative to the recipe",
                    w.where,
                )
            )
            continue
        plan.writes.append((w, placed))
    return plan


# a first component a shell would have expanded: `~`, `~user`, `$HOME`, `${VAR}` (trtls expands none of them)
_UNEXPANDED = re.compile(r"^(\./)*((~[A-Za-z0-9_.-]*)|(\$\{?[A-Za-z_][A-Za-z0-9_]*\}?))(/|$)")


def write_policy_findings(
    loaded: LoadedRecipe, recipe: RecipeFile, extra_protected: dict[Path, str] | None = None, routes: bool = False
) -> list[Finding]:
    """Every refused write of the recipe, located on the key that names it (one finding per key). Route writes
    (`routes`) are judged by the command that makes them (`route_write_findings`): `trtls gates` only reads a
    route's bundle, and refuses a bundle out of the folder with its own verdict (gate 3, TRT709)."""
    plan = write_plan(loaded, recipe, extra_protected, routes=True)
    out = list(plan.findings)
    used: set[int] = set()
    seen: dict[Path, Write] = {}
    located: set[TomlPath] = set()
    for w, placed in plan.writes:
        if w.where in located:
            continue  # one finding per key: a matrix template that fails for one cell fails for all of them
        finding = _judge(loaded, plan, w, placed, seen, used)
        if finding is not None and not routes and w.where[:1] == ("routes",):
            continue  # judged when the route is built (but its allow_outside use still counts)
        if finding is not None:
            out.append(finding)
            located.add(w.where)
        elif not w.folder:
            seen.setdefault(placed, w)
    for i, allowed in plan.allowed:
        if i not in used:
            what = "is inside the recipe folder" if inside(allowed, plan.root) else "matches no write of this recipe"
            out.append(
                _f(
                    "TRT121",
                    f"allow_outside entry {recipe.allow_outside[i]!r} {what}: it allows nothing",
                    ("allow_outside", i),
                    Severity.warning,
                )
            )
    return out


def route_write_findings(loaded: LoadedRecipe, route_name: str) -> list[Finding]:
    """The refused writes of one route (its bundle, previous bundle, exported ONNX), judged against every write and
    every protected file of the recipe: `trtls route build` refuses the route with these (nothing written)."""
    recipe = loaded.validated_file()  # a route build may start from a recipe whose only error is a missing ONNX
    if recipe is None:
        return []
    found = write_policy_findings(loaded, recipe, routes=True)
    return [f for f in found if tuple(f.path[:2]) == ("routes", route_name) and f.severity == Severity.error]


def clash_findings(loaded: LoadedRecipe, recipe: RecipeFile, protected: dict[Path, str]) -> list[Finding]:
    """Writes of the recipe that land on one of `protected` (files found by reading the models: external data)."""
    out: list[Finding] = []
    for w, placed in write_plan(loaded, recipe).writes:
        what = protected.get(placed) or protected.get(real(placed))
        if what is not None and not w.folder:
            out.append(_f("TRT109", f"{w.what} would overwrite {what}: {placed}", w.where, resolved=str(placed)))
    return out


def _judge(
    loaded: LoadedRecipe, plan: WritePlan, w: Write, placed: Path, seen: dict[Path, Write], used: set[int]
) -> Finding | None:
    if w.folder:
        target = real(placed)
        if not inside(target, plan.root) and not _allowed(plan, target, used):
            return _f(
                "TRT118",
                f"{w.what} is a symlink to {target}, outside the recipe folder: trtls writes its "
                f"records only inside it (or list {w.relative!r} in allow_outside)",
                w.where,
            )
        return None
    if _is(placed, Path.is_symlink):
        return _f(
            "TRT118",
            f"{w.what} {placed} is a symlink (to {_link(placed)}): trtls never writes through a "
            "symlink; remove it or name the real file",
            w.where,
            resolved=str(placed),
        )
    if not inside(placed, plan.root):
        system = _system_place(placed, plan.root)
        if system is not None:
            return _f(
                "TRT117",
                f"{w.what} {placed} is {system}: no allow_outside entry lets trtls write there (choose a folder of "
                "your own)",
                w.where,
                resolved=str(placed),
            )
        if lexically_inside(loaded.base_dir, w.relative, Path(loaded.base_dir)) and not _allowed(plan, placed, used):
            return _f(
                "TRT118",
                f"{w.what} goes through a symlinked folder to {placed.parent}, outside the recipe "
                "folder (list that folder in allow_outside to allow it)",
                w.where,
                resolved=str(placed),
            )
        if not _allowed(plan, placed, used):
            return _f(
                "TRT117",
                f"{w.what} {placed} is outside the recipe folder {plan.root}: list it in allow_outside to allow it",
                w.where,
                resolved=str(placed),
            )
    if _is(placed, Path.is_dir):
        return _f("TRT109", f"{w.what} is a folder: {placed}", w.where)
    clash = _clash(plan, w, placed, seen)
    if clash is not None:
        return _f("TRT109", f"{w.what} would overwrite {clash}: {placed}", w.where, resolved=str(placed))
    why = engine_output_refusal(placed) if w.kind in ("output", "cell") else None  # the door's rule, said first
    if why is not None:
        return _f("TRT123", f"{w.what} {placed} {why}", w.where, resolved=str(placed))
    return None


def _clash(plan: WritePlan, w: Write, placed: Path, seen: dict[Path, Write]) -> str | None:
    what = plan.protected.get(placed)
    if what is not None and what != w.what:  # a read_write cache is protected from every write but its own
        return what
    for folder, what in plan.protected_folders.items():
        if inside(placed, folder):
            return what
    other = seen.get(placed)
    if other is None or other.what == w.what:
        return None
    if w.kind == "cell" and other.kind in ("cell", "output"):
        return None  # cells against cells and engines: TRT171, farm_checks
    if w.kind == other.kind and w.kind in ("bundle", "export"):
        return None  # routes may share a bundle or an export (a route that checks another's bundle): one at a time
    return f"{other.what} (also written there)"


def _system_place(placed: Path, root: Path) -> str | None:
    """Why a write outside the recipe folder lands where no recipe may write, whatever `allow_outside` says (one
    written `allow_outside = ["/"]` let `output = "/etc/hosts"` pass the check and replace the file): the file system's
    root itself, or a system folder (`/etc`, `/usr`, `/bin`, ... as `fs.store_root` names them for a store) the recipe
    folder is not in itself. None when it is not such a place."""
    from trtls.fs.store_root import SYSTEM

    target = real(placed)
    for folder in SYSTEM:
        if inside(target, folder) and not inside(root, folder):
            return f"in the system folder {folder}"
    if target.parent == Path(target.anchor):
        return "in the file system's root folder"
    return None


def _allowed(plan: WritePlan, placed: Path, used: set[int]) -> bool:
    for i, allowed in plan.allowed:
        if inside(placed, allowed):
            used.add(i)
            return True
    return False


def _is(path: Path, test: Any) -> bool:
    """`test(path)`, False when the system cannot even look (a name too long for a cell's filled template)."""
    try:
        return bool(test(path))
    except (OSError, ValueError):
        return False


def _link(path: Path) -> str:
    try:
        return os.readlink(path)
    except OSError:
        return "?"


def writes_outside(loaded: LoadedRecipe, recipe: RecipeFile) -> list[dict[str, Any]]:
    """The writes outside the recipe folder that `allow_outside` allowed (for the evidence): key, path, entry."""
    plan = write_plan(loaded, recipe)
    out: list[dict[str, Any]] = []
    for w, placed in plan.writes:
        target = real(placed) if w.folder else placed
        if inside(target, plan.root):
            continue
        entry = next((recipe.allow_outside[i] for i, a in plan.allowed if inside(target, a)), None)
        out.append({"key": ".".join(str(p) for p in w.where), "path": str(target), "allowedBy": entry})
    return out


def job_writes_outside(recipe_path: Path, job: dict[str, Any]) -> list[dict[str, str]]:
    """The files a build's job writes outside its recipe folder (for the evidence, `writesOutside`). The check let
    each one through only because `allow_outside` names it, so each entry says so."""
    root = real(Path(recipe_path).parent)
    cache = job.get("timing_cache") or {}
    out: list[dict[str, str]] = []
    for what, path in (("output", job.get("output")), ("timing_cache", cache.get("path"))):
        if what == "timing_cache" and cache.get("mode") != "read_write":
            continue
        if isinstance(path, str) and path and not inside(place(root, path), root):
            out.append({"what": what, "path": path, "allowedBy": "allow_outside"})
    return out
