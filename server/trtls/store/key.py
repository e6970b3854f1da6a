"""The engine key: one sha256 over every byte the builder reads and every input that can change the plan.

Computed from a worker job (`builds.supervisor.job.worker_job`: exactly what the worker would get) WITHOUT importing
TensorRT: the builder module is found with `importlib.util.find_spec` (which does not run the package) and its
version is read from the installed distributions' `*.dist-info` folder names beside it.

What the key covers (its *parts*, kept in every store entry so two keys can be compared by name):
- `files`: the ONNX file's bytes, every external-data file any tensor it holds names (initializers, sparse
  initializers, tensor attributes of nodes, in every subgraph and function), each plugin library and each plugin to
  serialize — by content (sha256), through the stat-keyed digest cache (`checkpoint.hashing`), so an
  unchanged 500 MB model is stat'ed, not read;
- `settings`: the requested builder settings (the same inputs on the same builder version give the same effective
  settings); `profiles`; `precision`: the AutoCast settings and, when a conversion runs, ModelOpt's version;
- `plugins`: the creator names a build requires; `builder`: module name and version (+ its distributions) and the
  sha256 of each native library it loads (`libraries`: through a per-user digest cache, a stat each on a warm one);
- `target`: compute capabilities, hardware compatibility level, and the device when a driver reports one;
- `format` (this key's layout) and `protocol` (the worker protocol version).

Not covered, on purpose: paths (a moved model is the same model; paths are kept beside the key for messages only),
the output path, the engine's name, and the timing cache (it picks among tactics that are all valid for the key;
an engine built with a warm cache is as correct as one built cold)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trtls import fs
from trtls.checkpoint.hashing import DigestCache, hash_files
from trtls.core.paths import real
from trtls.core.protocol import PROTOCOL_VERSION, stable_json
from trtls.core.vocabulary import BUILDER_MODULES
from trtls.fs import Kind, parse_json, read_text
from trtls.store.layout import library_files, version_sources

KEY_FORMAT = "trtls.engine-key/1"
KEY_TEXT = re.compile(r"[0-9a-f]{64}")  # a key, and so a name in the store (entries/<key>, locks/<key>.lock)
INDEX_LIMIT = 16 * 1024 * 1024  # `.trtls/onnx-external.json`: a few KiB per model in practice
# the modules a preference may load, in the order the worker tries them (builds.worker.adapter.load_builder_module)
BUILDER_CANDIDATES = {"auto": BUILDER_MODULES, **{m: (m,) for m in BUILDER_MODULES}}
VERSION_LINE = re.compile(r"^__version__\s*=\s*[\"']([^\"'\s]{1,64})[\"']", re.M)  # a builder's own version line
VERSION_SOURCE_LIMIT = 1 << 20
CTIME_SLACK_NS = 20_000_000  # a ctime is the kernel's coarse clock: up to a tick (1-10 ms) behind time.time()


class KeyUnavailable(Exception):
    """The key cannot be computed (a file is missing, no builder installed): the build goes ahead unkeyed."""


def is_key(value: object) -> bool:
    """Whether `value` is an engine key: 64 lowercase hex digits. A key read from a record (a known-good record, a
    fast-path memo, a rollback's `--to`) becomes a path in the store only when it is one (`../../elsewhere` never)."""
    return isinstance(value, str) and KEY_TEXT.fullmatch(value) is not None


@dataclass(frozen=True)
class EngineKey:
    hex: str
    parts: dict[str, Any]  # identity (hashed) + `paths` (not hashed: for messages)
    notes: list[str] = field(default_factory=list, compare=False)  # what the key could not cache (evidence)
    # the stat of every file the key hashed, taken before it was hashed (`inputs_changed`): not part of the key
    read_stats: dict[str, list[int] | None] = field(default_factory=dict, compare=False)
    hashed_at: float | None = field(default=None, compare=False)  # when they were taken (epoch seconds)

    @property
    def short(self) -> str:
        return self.hex[:12]


def builder_identity(preference: str, cache: DigestCache | None = None) -> dict[str, Any]:
    """The module a build would import, its version and the sha256 of each native library it loads, found without
    importing it (auto: tensorrt first, as `builds.worker.adapter.load_builder_module` does). The module's file and its
    libraries' paths are kept beside the key (`paths`), not in it: the same builder bytes in another venv are the same
    builder, and a store shared by machines whose venvs differ must match their engines."""
    name, site = _builder_found(preference)
    dists = _distributions_beside(site, name)
    versions = sorted({v for v in dists.values()}) or _version_in_source(site, name)
    return {
        "module": name,
        "version": versions[0] if len(versions) == 1 else versions,
        "distributions": dists,
        "libraries": _library_digests(site, name, cache),
    }


def _builder_found(preference: str) -> tuple[str, Path]:
    """(module, the folder it is found in) of the builder `preference` would import."""
    for name in BUILDER_CANDIDATES.get(preference, (preference,)):
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None and spec.submodule_search_locations:
            return name, Path(next(iter(spec.submodule_search_locations))).parent
    raise KeyUnavailable(f"no builder module ({preference}) is installed")


def _library_digests(site: Path, module: str, fallback: DigestCache | None) -> dict[str, str]:
    """`{"<package>/<library>": sha256}` of the builder's native libraries (store.layout.library_files): a library
    replaced in place at the same version (a patched build, a copied tree) is another builder, and its engines are
    others. Through a per-user digest cache (`builder-digests.json` in trtls's cache folder, this account's own): one
    stat a library on every key, the hash once per library file (~0.4 s for TensorRT-RTX's 234 MB) on this host. An
    account with no cache folder (HOME unset or not a folder: a CI runner, a service) uses `fallback`, the recipe's."""
    from trtls.core.paths import user_cache_dir

    files = library_files(site, module)
    if not files:
        return {}
    folder = user_cache_dir()
    within = next((f for f in (folder, folder.parent) if f.is_dir()), None)  # saved only inside an existing one
    shas = _digests(files, DigestCache(folder / "builder-digests.json", within=within) if within else fallback)
    return {f"{p.parent.name}/{p.name}": shas[p] for p in files}


def _version_in_source(site: Path, module: str) -> list[str]:
    """`[version]` from the `__version__ = "…"` line of the builder's own code, for a builder found with no
    `*.dist-info` beside it (a package tree copied onto PYTHONPATH): without it every version of such a builder had one
    key (`version: []`), and an engine of another TensorRT was served as up to date (issue 32 item 2)."""
    for path in version_sources(site, module):
        try:
            found = VERSION_LINE.search(read_text(path, limit=VERSION_SOURCE_LIMIT, follow=True, errors="replace"))
        except OSError:
            continue
        if found is not None:
            return [found.group(1)]
    return []


def _distributions_beside(site: Path, module: str) -> dict[str, str]:
    """`{distribution: version}` for the dist-info folders next to the module whose names start with it
    (`tensorrt_rtx_cu13`, `tensorrt_rtx_cu13_bindings`, `…_libs`: the bindings and libraries are what build)."""
    out: dict[str, str] = {}
    prefix = module.replace("-", "_").lower()
    try:
        names = os.listdir(site)
    except OSError:
        return out
    for entry in names:
        if not entry.endswith(".dist-info"):
            continue
        stem = entry[: -len(".dist-info")]
        dist, _, version = stem.rpartition("-")
        norm = dist.replace("-", "_").replace(".", "_").lower()
        if norm == prefix or norm.startswith(prefix + "_"):
            out[dist] = version
    return out


def _modelopt_version() -> str | None:
    from importlib import metadata

    for dist in ("nvidia-modelopt", "nvidia_modelopt"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


class ExternalIndex:
    """The external-data locations of an ONNX file, by the file's sha256 (`.trtls/onnx-external.json`): with a
    warm digest cache the model is not opened at all. Only a cache: a record that cannot be read (a symlink, a
    FIFO, too large) is ignored, and one that cannot be written (a full disk, a symlink planted there) is not
    written and said in `notes` — the key is the same either way."""

    def __init__(self, path: Path | None):
        self.path = path
        self.entries: dict[str, list[str]] = {}
        self.dirty = False
        self.notes: list[str] = []
        if path is not None:
            try:
                data = parse_json(read_text(path, limit=INDEX_LIMIT, follow=False, owned=True))  # as the digests
                if isinstance(data, dict):
                    self.entries = {k: v for k, v in data.items() if isinstance(v, list)}
            except FileNotFoundError:
                pass
            except (OSError, ValueError) as exc:
                self.notes.append(f"{path} was not read ({_why(exc)}): the model was read instead")

    def locations(self, onnx: Path, sha: str) -> list[str]:
        # keyed by the reader's version too: a record an older reader wrote (top-graph initializers only) is never
        # taken for one that saw every tensor a model can reference (issue 32: a stale engine)
        from trtls.onnx_files.external_data import READER_VERSION

        sha = f"v{READER_VERSION}:{sha}"
        if sha in self.entries:
            return self.entries[sha]
        from trtls.onnx_files.onnx_reader import NotOnnx, read_model_inputs

        try:
            found = sorted({e.location for e in read_model_inputs(onnx).external})
        except (NotOnnx, OSError) as exc:
            raise KeyUnavailable(f"cannot read {onnx}: {exc}") from exc
        self.entries[sha] = found
        self.dirty = True
        return found

    def save(self) -> None:
        if self.path is None or not self.dirty:
            return
        within = self.path.parent.parent  # the recipe's folder: `.trtls` itself is judged (never a link leading out)
        try:
            fs.ensure_folder(self.path.parent, within=within)
            text = json.dumps(self.entries, sort_keys=True) + "\n"
            fs.atomic_write_text(self.path, text, kind=Kind.cache, within=within)
            self.dirty = False
        except OSError as exc:
            self.notes.append(f"{self.path} was not written ({_why(exc)}); the key does not depend on it")


def _why(exc: BaseException) -> str:
    return str(exc.strerror or exc) if isinstance(exc, OSError) else str(exc)


def _digests(paths: list[Path], cache: DigestCache | None) -> dict[Path, str]:
    """sha256 of each file, by the path given. A model and its external data may be links (the Hugging Face cache:
    `weights.bin -> ../blobs/<sha>`): the builder reads where they lead, so that file is hashed. A digest cache that
    cannot be saved (a full disk, a link planted at it) costs a re-hash, never the key."""
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise KeyUnavailable(f"{missing[0]} is missing")
    targets = {p: real(p) for p in paths}
    files = sorted(set(targets.values()))
    try:
        found = hash_files(files, cache)
    except OSError:
        try:
            found = hash_files(files, None)
        except OSError as exc:
            raise KeyUnavailable(f"cannot read {exc.filename or paths[0]}: {exc.strerror or exc}") from exc
    return {p: found[t].sha256 for p, t in targets.items()}


def engine_key(job: dict[str, Any], state_dir: Path | None, device: dict[str, Any] | None = None) -> EngineKey:
    """The key of the engine `job` would build. `state_dir` (the recipe's `.trtls`) holds the digest cache;
    `device` is the CUDA driver's device record (`builds.cuda.cuda_driver()`), when one answered; one that says the
    driver did not answer (`driver_unanswered`) keys nothing (KeyUnavailable)."""
    if device is not None and device.get("driver_unanswered"):
        # a device nobody could ask (a cuInit that hangs, builds/cuda.py): an engine keyed without it could be served
        # where another device answers as none does; nothing is keyed, so nothing is stored or served under it
        raise KeyUnavailable(str(device["driver_unanswered"]))
    cache = DigestCache(state_dir / "digests.json") if state_dir is not None else None
    externals = ExternalIndex(state_dir / "onnx-external.json" if state_dir is not None else None)
    onnx = Path(job["onnx"]).absolute()
    hashed_at, read_stats = time.time(), {str(onnx): stat_key(onnx)}
    onnx_sha = _digests([onnx], cache)[onnx]
    ext_paths = [(loc, (onnx.parent / loc).absolute()) for loc in externals.locations(onnx, onnx_sha)]
    externals.save()
    plugins = job.get("plugins") or {}
    libs = [Path(p).absolute() for p in plugins.get("libraries") or []]
    serialize = [Path(p).absolute() for p in plugins.get("serialize") or []]
    read_stats.update((str(p), stat_key(p)) for p in [p for _, p in ext_paths] + libs + serialize)
    shas = _digests([p for _, p in ext_paths] + libs + serialize, cache) if ext_paths or libs or serialize else {}
    settings = dict(job.get("settings") or {})
    precision = {k: v for k, v in (job.get("precision") or {}).items() if k != "cache_dir"}
    if precision.get("convert"):
        precision["modelopt"] = _modelopt_version()
    dev = device or {}
    preference = str(job.get("builder_module") or "auto")
    module, site = _builder_found(preference)
    libraries = library_files(site, module)
    read_stats.update((str(p), stat_key(p)) for p in libraries)  # one replaced while it builds: not published
    identity = {
        "format": KEY_FORMAT,
        "protocol": PROTOCOL_VERSION,
        "files": {
            "onnx": onnx_sha,
            "external": {loc: shas[p] for loc, p in ext_paths},
            "plugin_libraries": [shas[p] for p in libs],
            "plugin_serialize": [shas[p] for p in serialize],
        },
        "settings": settings,
        "profiles": job.get("profiles") or [],
        "precision": precision,
        "plugins": {k: v for k, v in plugins.items() if k not in ("libraries", "serialize")},
        "builder": builder_identity(preference, cache),
        "target": {
            "computeCapabilities": settings.get("compute_capabilities") or "builder default",
            "hardwareCompatibilityLevel": settings.get("hardware_compatibility_level") or "builder default",
            "device": dev.get("device_name"),
            "deviceComputeCapability": dev.get("compute_capability"),
        },
    }
    digest = hashlib.sha256(stable_json(identity).encode()).hexdigest()
    paths = {
        "onnx": str(onnx),
        "external": {loc: str(p) for loc, p in ext_paths},
        "plugin_libraries": [str(p) for p in libs],
        "plugin_serialize": [str(p) for p in serialize],
        "builder": str(site / module / "__init__.py"),
        "builder_libraries": [str(p) for p in libraries],
    }
    return EngineKey(digest, {**identity, "paths": paths}, externals.notes, read_stats, hashed_at)


def stat_key(path: Path | str) -> list[int] | None:
    """What says a file changed: size, mtime, inode and ctime (which no one can set back); None when it is gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ino, st.st_ctime_ns]


def inputs_changed(key: EngineKey | None, started_at: object) -> str | None:
    """Why an engine built for `key` must not be published under it, or None: a file the key hashed changed after it
    was hashed (the builder may have read either version), or — for a build that started before the key was taken (a
    job sent to its worker ahead of the check, `started_at` in epoch seconds) — had changed after the build started
    (the builder may have read the bytes from before that change). A file's ctime comes from the kernel's coarse
    clock, up to a tick behind `time.time()`: the slack."""
    if key is None:
        return None
    ahead = isinstance(started_at, (int, float)) and key.hashed_at is not None and started_at < key.hashed_at
    since = int(started_at * 1e9) - CTIME_SLACK_NS if ahead and isinstance(started_at, (int, float)) else None
    for path, seen in key.read_stats.items():
        if stat_key(path) != seen or (seen is not None and since is not None and seen[3] >= since):
            return (
                f"not stored: {path} changed while the engine was built (the builder may have read other bytes than"
                f" the key hashed); the engine is at the output but is not published under key {key.short}"
            )
    return None


def key_of_parts(parts: dict[str, Any]) -> str:
    """Recompute a key from stored parts (an entry whose recorded key is not this is refused)."""
    return hashlib.sha256(stable_json({k: v for k, v in parts.items() if k != "paths"}).encode()).hexdigest()


def file_sha256(path: Path, state_dir: Path | None) -> str | None:
    """One file's sha256 through the digest cache (None when it is missing): is the output the engine we built?"""
    path = Path(path).absolute()
    if not path.is_file():
        return None
    cache = DigestCache(state_dir / "digests.json") if state_dir is not None else None
    return _digests([path], cache)[path]
