"""The fast path's memo (`.trtls/engines/<name>.hit.json`): what an engine's key was computed from the last time —
the recipe file's sha256, the stat (size, mtime_ns, inode) of every file the key read, the builder's distribution
folders and the stat of each native library it loads, the device, the store settings, the environment variables that
choose the store, the trtls modules that turn a recipe into a job — and that job itself. `look` answers from it before
anything but the door is imported: "the memo does not hold" (the full path computes the key), "a known miss" (the store
has no entry folder for the key: the CLI starts its worker now and sends the job ahead, builds/supervisor/
speculation.py), or "maybe a hit" (builds/avoidance/reuse.fast_hit serves it, with the store's modules). Standard
library and the door only: it runs first in `trtls build`."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from trtls import __version__
from trtls.builds import cuda
from trtls.core.paths import real
from trtls.fs import parse_json, read_text

MEMO_FORMAT = "trtls.fast-hit/1"
# the modules whose code turns a recipe into the job the key hashes, and those that list the files it reads (the
# model's external data: a memo from a reader that missed one never stats it): changed code, no fast path
KEY_CODE = (
    *("core/recipe.py", "core/build_config.py", "core/profiles.py", "builds/supervisor/build.py", "store/key.py"),
    *("onnx_files/onnx_reader.py", "onnx_files/protobuf_wire.py", "onnx_files/external_data.py"),
)
ENV_KEYS = ("TRTLS_STORE", "TRTLS_STORE_TRUST", "TRTLS_STORE_KEY_FILE", "XDG_CACHE_HOME", "HOME")
MAX_MEMO_BYTES = 1 << 20  # a memo: a few stats and digests
HEX = frozenset("0123456789abcdef")


def _stat(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns]  # ctime: an in-place rewrite, mtime put back


def _code_stats() -> list[list[int] | None]:
    pkg = Path(__file__).resolve().parents[2]
    return [_stat(str(pkg / rel)) for rel in KEY_CODE]


def _version_stats(site: str | None, module: Any) -> list[list[int] | None]:
    """The stat of the files a builder with no `*.dist-info` says its version in (store.layout.version_sources): a
    tree swapped in place on PYTHONPATH keeps its folder names, not these."""
    from trtls.store.layout import version_sources

    return [_stat(str(p)) for p in version_sources(Path(site), str(module))] if site else []


def _library_stats(site: str | None, module: Any) -> list[list[Any]]:
    """The name and stat of each native library the builder loads (store.layout.library_files, listed again): one
    replaced in place at the same version is another builder (the key hashes them), and so is one added."""
    from trtls.store.layout import library_files

    return [[str(p), _stat(str(p))] for p in library_files(Path(site), str(module))] if site else []


def _builder_dirs(site: str | None) -> list[str]:
    try:
        return sorted(n for n in os.listdir(site) if n.startswith("tensorrt")) if site else []
    except OSError:
        return []


def _sha_of(path: Path) -> str | None:
    """The recipe's sha256 (`recipe_snapshot`: hashed once per version of the file; a FIFO or a device is never
    read); None when it cannot be read."""
    from trtls.core.recipe_file import recipe_snapshot

    try:
        return recipe_snapshot(path).sha256
    except (OSError, ValueError):
        return None


def memo_path(state_dir: Path, history: str) -> Path:
    return state_dir / "engines" / f"{history}.hit.json"


def built_here_before(recipe: Path, engine: str) -> bool:
    """Whether `engine` was built or served here before: its memo is there, holding or not. One that no longer holds
    says that something the key reads changed since (an edit), and a lookup after an edit mostly misses; with no memo
    at all (a fresh clone, a team's store) a hit is as likely (cli/store_lookup._note_changed)."""
    return os.path.lexists(memo_path(recipe.parent / ".trtls", engine))


def job_memo_path(state_dir: Path, history: str) -> Path:
    """A --no-store build's memo: its job, for the next unchanged --no-store run (no store, no key to serve)."""
    return state_dir / "engines" / f"{history}.job.json"


def _builder_site(module: Any) -> str | None:
    import importlib.util

    try:
        spec = importlib.util.find_spec(str(module))
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(Path(next(iter(spec.submodule_search_locations))).parent)


def _ahead(job: dict[str, Any] | None, module: Any) -> list[str] | None:
    """The builder modules the job's preference tries before `module` (auto: full TensorRT before TensorRT-RTX,
    store.key.BUILDER_CANDIDATES): none of them was found when the key was computed, and if one is found now (a full
    TensorRT put on PYTHONPATH) the key names another builder. None: the preference did not choose `module`."""
    from trtls.store.key import BUILDER_CANDIDATES

    preference = str((job or {}).get("builder_module") or "auto")
    names = BUILDER_CANDIDATES.get(preference, (preference,))
    return list(names[: names.index(module)]) if module in names else None


def write_memo(
    recipe: Path,
    history: str,
    key: str,
    parts: dict[str, Any],
    output: Path,
    store: Any,
    device: dict[str, Any],
    job: dict[str, Any] | None = None,
) -> None:
    """Remember what the key of `history` was computed from (never raises: a memo is only a shortcut), and the job
    it was computed from: a known miss sends it to the worker ahead of the check (builds/supervisor/speculation.py).
    `store` None: a --no-store build's memo (`job_memo_path`), which only `look_job` reads."""
    from trtls.builds.avoidance.recipe_view import recipe_view
    from trtls.builds.cuda import device_fingerprint
    from trtls.builds.roots import write_record
    from trtls.builds.supervisor.speculation import job_to_remember

    site = _builder_site((parts.get("builder") or {}).get("module"))
    p = parts.get("paths") or {}
    files = [
        p.get("onnx"),
        *(p.get("external") or {}).values(),
        *(p.get("plugin_libraries") or []),
        *(p.get("plugin_serialize") or []),
    ]
    memo = {
        "format": MEMO_FORMAT,
        "trtls": __version__,
        "python": sys.executable,
        "prefix": sys.prefix,
        "recipeSha256": _sha_of(recipe),
        "recipeView": recipe_view(recipe, history),  # an edit outside the engine's view still sends its job ahead
        "env": {k: os.environ.get(k) for k in ENV_KEYS},
        "files": {f: _stat(f) for f in files if isinstance(f, str)},
        "code": _code_stats(),
        "builderModule": (parts.get("builder") or {}).get("module"),
        "builderAhead": _ahead(job, (parts.get("builder") or {}).get("module")),
        "builderSite": site,
        "builderDirs": _builder_dirs(site),
        "builderSources": _version_stats(site, (parts.get("builder") or {}).get("module")),
        "builderLibraries": _library_stats(site, (parts.get("builder") or {}).get("module")),
        "device": device,
        "deviceFingerprint": device_fingerprint(),  # what the driver's files said beside `device` (`_same_device`)
        "key": key,
        "job": job_to_remember(job),
        "output": str(output),
        "store": None
        if store is None
        else {
            "path": str(store.root),
            "mode": store.mode,
            "maxSize": store.max_size,
            "trust": store.trust,
            "recipeDir": str(store.recipe_dir) if store.recipe_dir else None,
            "signingKeyFile": str(store.signing_key_file) if store.signing_key_file else None,
        },
    }
    state = recipe.parent / ".trtls"
    try:
        path = memo_path(state, history) if store is not None else job_memo_path(state, history)
        write_record(path, json.dumps(memo, default=str) + "\n")
    except OSError:
        pass


def _same_device(memo: dict[str, Any]) -> bool:
    """The device the key was computed with is this one: when the driver's own files answer and are those read beside
    the memo's device (builds.cuda.device_fingerprint), it is, without a cuInit; otherwise the driver is asked (a
    process's first cuInit: ~0.2 s on a GPU host)."""
    from trtls.builds.cuda import cuda_driver, device_fingerprint

    fingerprint = device_fingerprint()
    if fingerprint is not None and fingerprint == memo.get("deviceFingerprint"):
        return True
    return bool(parse_json(json.dumps(cuda_driver(), default=str)) == memo.get("device"))


def remembered_device(state_dir: Path, history: str | None) -> dict[str, Any] | None:
    """Device 0 as the last build of `history` found it (its store memo, else its --no-store memo; None: no engine's
    own, as for a matrix whose cells each have theirs — only the account's probe below), when the driver's
    own files still say what they said beside it (builds.cuda.device_fingerprint); None when they do not, or cannot
    tell, or no memo says it: then only the driver can (`cuda_driver()`). It spares a build's supervisor its cuInit —
    ~0.19 s of CPU on an H200 host, and ~60 ms more at the process's exit, when the driver unmaps what cuInit mapped
    (`benchmarks/probe_cuda_exit.py`, 2026-12-04) — by the rule the fast path already decides a hit with
    (`_same_device`). Never raises: a memo is only a shortcut."""
    from trtls.builds.cuda import device_fingerprint

    fingerprint = device_fingerprint()
    if fingerprint is None:
        return None
    own = () if history is None else (memo_path(state_dir, history), job_memo_path(state_dir, history))
    for path in (*own, account_device_path()):
        try:
            # owned: the device is keyed as said here, so only this account's own memo may say it (reuse.own_memo)
            memo = parse_json(read_text(path, limit=MAX_MEMO_BYTES, owned=True))
        except (OSError, ValueError):
            continue
        device = memo.get("device") if isinstance(memo, dict) else None
        if memo.get("deviceFingerprint") == fingerprint and cuda.answered(device):
            return device
    return None


def account_device_path() -> Path:
    """Device 0 as this account's last cuInit on this host found it, beside the driver fingerprint read with it
    (`$XDG_CACHE_HOME/trtls/device.json`): a project's first build — a fresh checkout, a CI job's clone, a memo
    removed — takes its key's device from here instead of a cuInit, while the driver's files say what they said."""
    from trtls.core.paths import user_cache_dir

    return user_cache_dir() / "device.json"


def key_device(state_dir: Path, history: str) -> dict[str, Any]:
    """The device a build's key covers: as its last build, or this account's last driver probe on this host, found
    it (`remembered_device`), else the driver's answer — then kept for the account's next first build."""
    from trtls.builds.cuda import cuda_driver, device_fingerprint

    remembered = remembered_device(state_dir, history)
    if remembered is not None:
        return remembered
    device = cuda_driver()
    fingerprint = device_fingerprint()  # read after the probe: a driver changed in between is seen next time
    if fingerprint is not None and cuda.answered(device):
        _remember_for_account({"deviceFingerprint": fingerprint, "device": device})
    return device


def _remember_for_account(memo: dict[str, Any]) -> None:
    """Writes `account_device_path()` through the door, inside an existing cache folder or home only (as the shared
    output locks are: builds/supervisor/output_lock.py). Never raises: it is only a shortcut."""
    from trtls.fs import Kind, atomic_write_text, ensure_folder

    path = account_device_path()
    cache = path.parent.parent  # ~/.cache, or $XDG_CACHE_HOME
    root = next((f for f in (cache, cache.parent) if f.is_dir()), None)
    if root is None:
        return
    try:
        ensure_folder(path.parent, within=root)
        atomic_write_text(path, json.dumps(memo, default=str) + "\n", kind=Kind.cache, within=root)
    except OSError:
        pass


def _memo_holds(memo: dict[str, Any], recipe: Path, engine: str, *, edited: bool = False) -> bool:
    """Everything the key was computed from is as it was, but the device (`_same_device`, asked last). `edited`: the
    recipe's bytes may differ where the engine's view of it does not (builds/avoidance/recipe_view.py): its job, so
    its key, is then the memo's, though nothing may be served before the edited recipe is checked (`Looked.edited`)."""
    return (
        memo.get("format") == MEMO_FORMAT
        and memo.get("trtls") == __version__
        # the same interpreter by another name (.venv/bin/python, python3, a symlink) in the same environment: one
        # realpath and one sys.prefix (a venv's python resolves to its base interpreter but has its own site-packages)
        and isinstance(memo.get("python"), str)
        and os.path.realpath(memo["python"]) == os.path.realpath(sys.executable)
        and memo.get("prefix") == sys.prefix
        and memo.get("env") == {k: os.environ.get(k) for k in ENV_KEYS}
        and memo.get("code") == _code_stats()
        and all(_stat(f) == s and s is not None for f, s in (memo.get("files") or {"": None}).items())
        # the builder as it is found NOW (sys.path, PYTHONPATH): another site is another builder (issue 32)
        and "builderModule" in memo
        # a module the preference tries first (auto: full TensorRT) found now would be the builder: another key
        and isinstance(memo.get("builderAhead"), list)
        and not any(_builder_site(name) for name in memo["builderAhead"])
        and memo.get("builderSite") == _builder_site(memo["builderModule"])
        and memo.get("builderDirs") == _builder_dirs(memo.get("builderSite"))
        and memo.get("builderSources") == _version_stats(memo.get("builderSite"), memo["builderModule"])
        and memo.get("builderLibraries") == _library_stats(memo.get("builderSite"), memo["builderModule"])
        and (memo.get("recipeSha256") == _sha_of(recipe) or (edited and _same_view(memo, recipe, engine)))
    )


def _same_view(memo: dict[str, Any], recipe: Path, engine: str) -> bool:
    from trtls.builds.avoidance.recipe_view import recipe_view

    view = memo.get("recipeView")
    return isinstance(view, str) and view == recipe_view(recipe, engine)


class Looked(NamedTuple):
    """What the memo says of an engine before the store's modules load: `memo` (None: it does not hold, or there is
    none), whether the store has no entry for its key (`missing`: a known miss) and whether it holds only because the
    recipe was edited outside the engine's view (`edited`: nothing may be served before the edit is checked). A
    NamedTuple, not a dataclass: `dataclasses` (with `inspect`, `ast`, `dis`, `tokenize`: ~6 ms here) was the largest
    import on the fast path before a known miss starts its worker, and before a hit is restored."""

    memo: dict[str, Any] | None
    missing: bool = False
    edited: bool = False

    @property
    def job(self) -> dict[str, Any] | None:
        job = (self.memo or {}).get("job")
        return job if isinstance(job, dict) else None


def look(recipe: Path, engine: str, *, edited: bool = False) -> Looked:
    """The memo of `engine`'s last build, if everything its key read is unchanged but the device; and whether the store
    it names has no entry folder for that key (`store.layout.entry_folder`: a known miss, before the device is asked —
    a hit asks it, in reuse.fast_hit). `edited`: also when the recipe was edited only outside the engine's view
    (`_memo_holds`): the key is the memo's, for it is computed from the job. Never raises: a memo is only a shortcut."""
    from trtls.store.layout import entry_folder

    memo = _holding_memo(recipe, engine, memo_path, edited=edited)
    if memo is None:
        return Looked(None)
    store, key = memo.get("store"), memo.get("key")
    if not isinstance(store, dict) or "trust" not in store or not isinstance(store.get("path"), str):
        return Looked(None)  # a memo from before trust was remembered: the full path opens the store as configured
    if not isinstance(key, str) or len(key) != 64 or not set(key) <= HEX:
        return Looked(None)  # not a key trtls wrote: the full path computes the key itself
    missing = not os.path.lexists(entry_folder(Path(store["path"]), key))
    return Looked(memo, missing, edited and memo.get("recipeSha256") != _sha_of(recipe))


def memo_output(memo: dict[str, Any], recipe: Path) -> Path | None:
    """The output the memo names, when the recipe's write policy still allows it as the memo left it, else None (the
    full path loads the recipe and judges it, located: TRT109, TRT118). A fast path never writes where the recipe's
    check would not (issue 27): the output lies in the recipe's folder with no symlinked folder on the way (a folder
    swapped for a link to the models since the build), is not under `.trtls`, and is neither the recipe nor a file
    the key read (a forged or damaged memo naming the recipe or the model), by path or by inode (a hard link)."""
    try:
        output = Path(os.path.normpath(str(memo["output"])))
        folder = Path(os.path.abspath(recipe.parent))
        rel = output.relative_to(folder)
        if not rel.parts or rel.parts[0] in (".trtls", "..") or rel.name in ("", ".", ".."):
            return None
        if real(output.parent) != real(folder) / rel.parent:
            return None  # a symlinked folder below the recipe's (or an output allow_outside let out)
        read = [recipe, folder / "trtls.toml", *(Path(f) for f in memo.get("files") or {})]
        now = _identity(output)  # followed: a link at the output's name to the model is the model
        if now is not None and now in {_identity(f) for f in read}:
            return None  # an output that does not exist yet is none of them: they all exist while the memo holds
    except (KeyError, TypeError, ValueError):
        return None
    return output


def _identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the file `path` leads to, or None when there is none: one file by any of its names."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def look_job(recipe: Path, engine: str) -> dict[str, Any] | None:
    """For a build certain to build (`--no-store`, `--rebuild`): the job of the engine's last build when everything
    its key read is unchanged, or the recipe was edited only outside the engine's view (`_memo_holds`, `edited`) —
    from its --no-store memo, else its store memo (the same job) — to send ahead of the check; None when neither
    holds or it kept no job. The device is not asked: a job names none."""
    for path in (job_memo_path, memo_path):
        memo = _holding_memo(recipe, engine, path, edited=True)
        job = (memo or {}).get("job")
        if isinstance(job, dict):
            return job
    return None


def _holding_memo(
    recipe: Path, engine: str, path_of: Callable[[Path, str], Path], *, edited: bool = False
) -> dict[str, Any] | None:
    """The memo at `path_of(.trtls, engine)` when it holds (`_memo_holds`, `edited` as there), else None; never
    raises."""
    state = recipe.parent / ".trtls"
    try:
        if state.is_symlink() or any((state / "runs").glob("*/running.json")):
            return None  # a build whose supervisor died (or one running): the full path recovers or waits
    except OSError:
        return None  # `.trtls` swapped or gone while looking: the full path says it, located
    if os.path.lexists(state / "engines" / f"{engine}.pin.json"):
        return None  # a rollback's pin (store.known_good.Pin): the full path serves it, or lifts it
    try:
        memo = parse_json(read_text(path_of(state, engine), limit=MAX_MEMO_BYTES))  # never through a link
    except (OSError, ValueError):
        return None
    return memo if isinstance(memo, dict) and _memo_holds(memo, recipe, engine, edited=edited) else None
