"""Every `-o FILE` of the command line (`check`, `gates`, `accept`, `report`, `trace`, `schema`) and the pictures'
default files: one writer, one rule (issue 27, item 4).

A report file is written through the door (`fs.write_report`): atomically, inside the file's own real folder, never
through a symlink, and replacing an existing file only when it is empty or is a report trtls wrote and no one changed
since (`fs.report_ledger`: never `LICENSE` or `package.json` because they are text or JSON). Before that, a file the
recipe protects is refused by name, whatever its content: the recipe, the folder's `trtls.toml`, the lock file, every
model and input the recipe reads, and anything under `.trtls/` (`core.write_policy`'s protected set) — of the recipe
the command loaded and of the recipe in the file's own folder, and anything under any folder's `.trtls/` (another
project's records), and any bundle's sidecar (`*.trtls.json`), SBOM (`*.cdx.json`) or promotion ledger by its name
wherever it lies — and anything in trtls's own caches: the engine store a recipe uses (its `[store] path`,
`$TRTLS_STORE`) and the per-user cache folder (`~/.cache/trtls`: the default store, the farm's state), whose
`entry.json` a `--format json` report would replace. A refusal is one located line (`FILE: CODE why`) and exit 2;
nothing is written.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

from trtls.cli.common import report_error
from trtls.cli.exits import EXIT_BAD_INPUT
from trtls.core.paths import UnsafeWrite, inside, place, real
from trtls.core.write_policy import STATE_DIR


def write_output(
    target: str | Path, data: str | bytes, *, fmt: str, recipes: tuple[Path | None, ...] = (), judged: bool = True
) -> int | None:
    """Write a report; None when written, else EXIT_BAD_INPUT after one located error line. `recipes`: the recipes
    the command loaded (their protected files are refused); `judged=False` for a file trtls chose itself (a
    picture's default place under `.trtls/runs/<id>/`, inside `recipes[0]`'s folder)."""
    path = Path(target)
    if path.name in ("", ".", ".."):
        report_error("TRT412", "-o names a folder, not a file (nothing written)", str(target))
        return EXIT_BAD_INPUT
    if judged:
        clash = protected_by(path, recipes)
        if clash is not None:
            report_error(
                "TRT109",
                f"is {clash}: a report is never written over a file trtls reads or owns (choose another path; "
                "nothing written)",
                str(target),
            )
            return EXIT_BAD_INPUT
    from trtls.fs import write_report

    within = real(path.parent if str(path.parent) else ".")
    if not judged and recipes and recipes[0] is not None:
        # the picture's default place under the recipe's .trtls/: it must stay in the recipe's real folder when it
        # is written (a .trtls/runs/<id> swapped for a symlink is refused); a run folder named directly is its own
        folder = Path(os.path.abspath(recipes[0])).parent
        if inside(Path(os.path.abspath(path)), folder):
            within = real(folder)
    try:
        write_report(path, data, within=within)
    except OSError as exc:
        code, why = refusal(exc, fmt)
        report_error(code, why, str(target))
        return EXIT_BAD_INPUT
    return None


def refusal(exc: OSError, fmt: str) -> tuple[str, str]:
    """(code, one line) of a write the door refused or the system failed."""
    why = exc.strerror or str(exc)
    if exc.errno == errno.ELOOP:
        return "TRT118", f"{why} (nothing written)"
    if exc.errno == errno.EEXIST:
        return "TRT412", (
            f"already exists and is not a {fmt} report trtls wrote (or it changed since); it is not replaced (remove "
            "it yourself or choose another path; nothing written)"
        )
    if exc.errno == errno.ESTALE and isinstance(exc, UnsafeWrite):  # the file changed while it was edited
        return "TRT412", why
    if exc.errno in (errno.EISDIR, errno.EINVAL) or (isinstance(exc, UnsafeWrite) and exc.errno == errno.EACCES):
        return "TRT412", f"{why} (nothing written)"  # a folder, a FIFO, a read-only file: not replaced
    if exc.errno == errno.ENOENT:
        return "TRT405", "its folder does not exist (nothing written)"
    return "TRT405", f"cannot be written: {why} (nothing written)"


def protected_by(target: Path, recipes: tuple[Path | None, ...]) -> str | None:
    """What `target` is to a recipe that protects it ("the recipe", "the ONNX model of engine 'demo'", ...), or
    None. Judged by the placed path (folders resolved) and by the real path (a link to a protected file)."""
    try:
        placed = place(Path.cwd(), target)
    except (OSError, ValueError):
        return None
    candidates = {placed, real(placed)}
    own = placed.parent / "trtls.toml"
    seen: set[Path] = set()
    for recipe in (*recipes, own):
        if recipe is None:
            continue
        recipe = real(recipe)
        if recipe in seen or not recipe.is_file():
            continue
        seen.add(recipe)
        files, folders = _protected(recipe)
        folders = {**folders, **_stores(recipe)}
        for c in candidates:
            if c in files:
                return files[c]
            for folder, what in folders.items():
                if inside(c, folder):
                    return f"inside {what}"
    for c in candidates:
        for folder, what in _own_caches().items():
            if inside(c, folder):
                return f"inside {what}"
        if STATE_DIR in c.parent.parts:  # any project's records: `.trtls/history.json` of a recipe not loaded here
            return f"inside trtls's own records ({STATE_DIR})"
        owned = _owned_by_name(c.name)  # any project's bundle records and ledger, by their names alone
        if owned is not None:
            return owned
    return None


def _owned_by_name(name: str) -> str | None:
    """What a file named `name` is to trtls wherever it lies: a bundle's sidecar record or SBOM, or a promotion
    ledger — another project's too (a recipe not loaded here protects its own by path, not these by name)."""
    from trtls.core.paths import BUNDLE_SBOM_SUFFIX, BUNDLE_SIDECAR_SUFFIX
    from trtls.core.write_policy import LEDGER_FILE

    if name.endswith(BUNDLE_SIDECAR_SUFFIX):
        return "a bundle's sidecar record (by its name)"
    if name.endswith(BUNDLE_SBOM_SUFFIX):
        return "a bundle's SBOM (by its name)"
    if name == LEDGER_FILE:
        return "a promotion ledger (by its name)"
    return None


def _own_caches() -> dict[Path, str]:
    """trtls's own per-user cache folder (the default engine store, the farm's state) and `$TRTLS_STORE`, placed and
    real."""
    from trtls.core.paths import user_cache_dir
    from trtls.core.store_table import env_store_root

    found = {user_cache_dir(): "trtls's own cache folder (the engine store, the farm's state)"}
    named = env_store_root()
    if named is not None:
        found[named] = "the engine store ($TRTLS_STORE)"
    return {**found, **{real(p): what for p, what in found.items()}}


def _stores(recipe: Path) -> dict[Path, str]:
    """The engine store the recipe's builds use (its `[store] path`), placed and real; none when it is off or the
    recipe does not load."""
    from trtls.core.recipe import load_recipe
    from trtls.store.config import store_config

    loaded = load_recipe(recipe)
    if loaded.recipe is None:
        return {}
    config = store_config(loaded.recipe.store, loaded.base_dir)
    if config is None:
        return {}
    return {config.path: "the engine store", real(config.path): "the engine store"}


def _protected(recipe: Path) -> tuple[dict[Path, str], dict[Path, str]]:
    """The recipe's protected files and folders (`core.write_policy`); for a recipe that does not load, the ones
    named by the folder's layout and its raw `engines.*.onnx`."""
    from trtls.core.recipe import load_recipe
    from trtls.core.write_policy import LOCK_FILE, STATE_DIR, write_plan

    loaded = load_recipe(recipe)
    if loaded.recipe is not None:
        plan = write_plan(loaded, loaded.recipe)
        return plan.protected, plan.protected_folders
    folder = recipe.parent
    files = {recipe: "the recipe", folder / "trtls.toml": "the folder's recipe trtls.toml"}
    files[folder / LOCK_FILE] = "the lock file"
    engines: Any = loaded.data.get("engines") if isinstance(loaded.data, dict) else None
    for name, table in engines.items() if isinstance(engines, dict) else ():
        onnx = table.get("onnx") if isinstance(table, dict) else None
        if isinstance(onnx, str) and onnx and "\0" not in onnx:
            files[place(folder, onnx)] = f"the ONNX model of engine '{name}'"
    files.update({real(p): what for p, what in list(files.items())})
    return files, {folder / STATE_DIR: "trtls's own records (.trtls)", real(folder / STATE_DIR): "trtls's own records"}
