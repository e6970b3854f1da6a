"""Gate 1 — source and checkpoint.

Reads a checkpoint folder as data, never as code: nothing in it is imported, executed or unpickled,
and no path is followed out of it (a symlink that resolves outside the checkpoint rejects the route).
For a Hugging Face cache repo (`models--org--name/{refs,snapshots,blobs}`) the containment root is the
repo folder (snapshot files are symlinks into its `blobs/`), and the revision is resolved from the layout.

Checks (codes in docs/diagnostics-gates.md):
  TRT501 revision pinned to a 40-hex commit            hold (quick fix data: the commit the snapshot holds)
  TRT502 layout and identity (cache folder, id, commit) hold when unresolvable, reject when contradicting
  TRT503 every file stays inside the checkpoint         reject
  TRT504 config.json present and a JSON object          hold
  TRT505 model card present and parsed                  hold
  TRT506 licence present                                hold
  TRT507 licence in allowed_licenses                    reject
  TRT508 no remote code (auto_map, *.py, trust_remote_code)  hold, naming the files
  TRT509 no pickle weights unless allow_pickle          reject
  TRT510 weights present; safetensors headers sound; cache blobs match their names  hold / reject
  TRT511 tokenizer or processor files present           hold
  TRT512 file digests match trtls.lock.json             changed/removed → reject, added → hold, other revision → hold
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trtls.checkpoint.hashing import DigestCache, default_cache_path, hash_files
from trtls.core.atomic import atomic_write_text
from trtls.core.gate_result import GateCheck
from trtls.core.route import COMMIT, RouteModel

LOCK_NAME = "trtls.lock.json"
LOCK_FORMAT = "trtls.lock/1"
PICKLE_SUFFIXES = (".bin", ".pt", ".pkl", ".pth", ".ckpt", ".pickle")
WEIGHT_SUFFIXES = (".safetensors", ".gguf", ".onnx", ".msgpack", ".h5") + PICKLE_SUFFIXES
TOKENIZER_FILES = (
    "tokenizer.json",
    "tokenizer.model",
    "tokenizer_config.json",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "spiece.model",
    "sentencepiece.bpe.model",
)
PROCESSOR_FILES = (
    "preprocessor_config.json",
    "processor_config.json",
    "image_processor_config.json",
    "feature_extractor_config.json",
)
SKIP_DIRS = {".git", ".cache"}  # VCS data and huggingface local-dir download metadata are not checkpoint content
HEX64 = re.compile(r"^[0-9a-f]{64}$")
MAX_JSON = 64 * 1024 * 1024
MAX_SAFETENSORS_HEADER = 100 * 1024 * 1024
GIT_BLOB_CHECK_MAX = 16 * 1024 * 1024


@dataclass
class Layout:
    kind: str  # "hf_cache" | "folder"
    root: Path  # containment root (resolved)
    files_dir: Path | None  # the folder whose files are the checkpoint
    commit: str | None  # the commit the layout holds, when it says
    refs: dict[str, str] = field(default_factory=dict)
    problem: str | None = None
    problem_status: str = "hold"


@dataclass
class CheckpointFile:
    rel: str  # posix path inside the checkpoint
    real: Path  # resolved path (inside root)
    size: int
    blob: str | None = None  # cache blob name when the file is a symlink into blobs/


@dataclass
class Gate1Result:
    checks: list[GateCheck]
    layout: Layout | None
    files: dict[str, dict[str, Any]]  # rel → {sha256, size}
    record: dict[str, Any]  # what the route summary carries (id, revision, commit, licence, lock)


def _read_ref(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:
        return None
    return text if COMMIT.match(text) else None


def resolve_layout(path: Path, revision: str, model_id: str | None) -> Layout:
    """Where the checkpoint's files are, and which commit the layout says they are."""
    path = path.absolute()
    repo: Path | None = None
    snapshot: Path | None = None
    if (path / "snapshots").is_dir():
        repo = path
    elif path.parent.name == "snapshots" and (path.parent.parent / "refs").is_dir():
        repo, snapshot = path.parent.parent, path
    if repo is None:
        return Layout("folder", path.resolve(), path, None)
    root = repo.resolve()
    refs: dict[str, str] = {}
    refs_dir = repo / "refs"
    if refs_dir.is_dir():
        for ref in sorted(refs_dir.rglob("*")):
            if ref.is_file() and not ref.is_symlink():
                commit = _read_ref(ref)
                if commit:
                    refs[ref.relative_to(refs_dir).as_posix()] = commit
    layout = Layout("hf_cache", root, None, None, refs)
    if model_id is not None:
        expected = "models--" + model_id.replace("/", "--")
        if repo.name != expected:
            layout.problem, layout.problem_status = (
                f"checkpoint id '{model_id}' does not match the cache folder '{repo.name}' (expected '{expected}')",
                "reject",
            )
            return layout
    if snapshot is not None:
        layout.commit = snapshot.name if COMMIT.match(snapshot.name) else None
        layout.files_dir = snapshot
        if COMMIT.match(revision) and revision != snapshot.name:
            layout.problem, layout.problem_status = (
                f"the snapshot folder holds commit {snapshot.name}, not the pinned revision {revision}",
                "reject",
            )
        return layout
    commit = revision if COMMIT.match(revision) else refs.get(revision)
    snapshots = sorted(p.name for p in (repo / "snapshots").iterdir() if p.is_dir())
    if commit is None:
        layout.problem = (
            f"revision '{revision}' is neither a commit nor a ref of this cache (refs: {', '.join(refs) or 'none'})"
        )
        if len(snapshots) == 1 and COMMIT.match(snapshots[0]):
            layout.commit = snapshots[0]  # the only snapshot: still offer it as the pin
        return layout
    layout.commit = commit
    if commit not in snapshots:
        layout.problem = f"commit {commit} is not in the cache (snapshots: {', '.join(snapshots) or 'none'})"
        return layout
    layout.files_dir = repo / "snapshots" / commit
    return layout


def _inside(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
        return True
    except ValueError:
        return False


def list_files(layout: Layout) -> tuple[list[CheckpointFile], list[tuple[str, str]]]:
    """Every regular file of the checkpoint, and the entries refused (rel, why). Never leaves `layout.root`."""
    assert layout.files_dir is not None
    base = layout.files_dir
    files: list[CheckpointFile] = []
    refused: list[tuple[str, str]] = []
    for dirpath, dirnames, filenames in os.walk(base, followlinks=False):
        d = Path(dirpath)
        keep = []
        for name in sorted(dirnames):
            rel = (d / name).relative_to(base).as_posix()
            if name in SKIP_DIRS and d == base:
                continue
            if (d / name).is_symlink():
                target = (d / name).resolve()
                refused.append(
                    (
                        rel,
                        f"symlinked folder → {target}"
                        + ("" if _inside(target, layout.root) else " (outside the checkpoint)"),
                    )
                )
                continue
            keep.append(name)
        dirnames[:] = keep
        for name in sorted(filenames):
            p = d / name
            rel = p.relative_to(base).as_posix()
            st = os.lstat(p)
            blob = None
            if stat.S_ISLNK(st.st_mode):
                target = p.resolve()
                if not _inside(target, layout.root):
                    refused.append((rel, f"symlink points outside the checkpoint → {target}"))
                    continue
                try:
                    st = os.stat(target)
                except OSError:
                    refused.append((rel, "dangling symlink"))
                    continue
                if target.parent.name == "blobs":
                    blob = target.name
                real = target
            else:
                real = p.resolve()
            if not stat.S_ISREG(st.st_mode):
                refused.append((rel, "not a regular file"))
                continue
            files.append(CheckpointFile(rel, real, st.st_size, blob))
    return files, refused


def _load_json(path: Path) -> Any:
    if path.stat().st_size > MAX_JSON:
        raise ValueError("larger than 64 MiB")
    return json.loads(path.read_text(encoding="utf-8"))


def safetensors_problem(path: Path) -> str | None:
    """Why a .safetensors file is malformed (header length, JSON, offsets vs file size), or None."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                return "shorter than the 8-byte header length"
            (n,) = struct.unpack("<Q", head)
            if n > MAX_SAFETENSORS_HEADER or 8 + n > size:
                return f"header length {n} runs past the file ({size} bytes)"
            header = json.loads(f.read(n).decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        return f"unreadable header: {exc}"
    if not isinstance(header, dict):
        return "header is not a JSON object"
    end = 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        offsets = info.get("data_offsets") if isinstance(info, dict) else None
        if not (
            isinstance(offsets, list)
            and len(offsets) == 2
            and all(isinstance(o, int) for o in offsets)
            and 0 <= offsets[0] <= offsets[1]
        ):
            return f"tensor '{name}' has no valid data_offsets"
        end = max(end, offsets[1])
    if 8 + n + end != size:
        return f"tensor data ends at byte {8 + n + end} but the file has {size} bytes"
    return None


def _git_blob_sha1(path: Path) -> str:
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _rp(name: str, *keys: str) -> tuple[str, ...]:
    return ("routes", name) + keys


def read_lock(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {"format": LOCK_FORMAT, "routes": {}}
    if not isinstance(data, dict) or not isinstance(data.get("routes"), dict):
        return {"format": LOCK_FORMAT, "routes": {}}
    return data


def write_lock_entry(path: Path, route_name: str, entry: dict[str, Any]) -> None:
    data = read_lock(path)
    data["format"] = LOCK_FORMAT
    data["routes"][route_name] = entry
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def check_checkpoint(
    loaded: Any,
    route_name: str,
    route: RouteModel,
    *,
    update_lock: bool = False,
    use_digest_cache: bool = True,
    cancel: Callable[[], bool] | None = None,
) -> Gate1Result:
    checks: list[GateCheck] = []
    ck = route.checkpoint
    record: dict[str, Any] = {"id": ck.id, "revision": ck.revision, "path": ck.path}

    def add(
        name: str, status: str, message: str, code: str, path: tuple, on_value: bool = True, **evidence: Any
    ) -> None:
        checks.append(GateCheck(1, name, status, message, code, path, on_value, evidence))  # type: ignore[arg-type]

    ck_path = loaded.resolve(ck.path) if hasattr(loaded, "resolve") else Path(ck.path)
    if not ck_path.is_dir():
        add(
            "layout",
            "reject",
            f"checkpoint folder not found: {ck_path}",
            "TRT502",
            _rp(route_name, "checkpoint", "path"),
        )
        return Gate1Result(checks, None, {}, record)
    layout = resolve_layout(Path(loaded.base_dir) / ck.path, ck.revision, ck.id)
    record.update(layout=layout.kind, commit=layout.commit)

    # -- revision
    if COMMIT.match(ck.revision):
        add(
            "revision_pinned",
            "pass",
            f"revision pinned to commit {ck.revision}",
            "TRT501",
            _rp(route_name, "checkpoint", "revision"),
        )
    else:
        fix = f"; the cache holds commit {layout.commit} for it" if layout.commit else ""
        add(
            "revision_pinned",
            "hold",
            f"revision '{ck.revision}' is not a pinned commit (40 hex digits): a branch moves{fix}",
            "TRT501",
            _rp(route_name, "checkpoint", "revision"),
            revision=ck.revision,
            commit=layout.commit,
            quick_fix=(
                {"title": f"Pin the revision to {layout.commit}", "replace_value": layout.commit}
                if layout.commit
                else None
            ),
        )
    if layout.problem is not None:
        add(
            "layout",
            layout.problem_status,
            layout.problem,
            "TRT502",
            _rp(route_name, "checkpoint"),
            False,
            kind=layout.kind,
            refs=layout.refs,
        )
    if layout.files_dir is None:
        return Gate1Result(checks, layout, {}, record)
    if layout.problem is None:
        where = (
            f"Hugging Face cache snapshot {layout.commit}"
            if layout.kind == "hf_cache"
            else "local folder (the revision cannot be verified against a layout; the lock file is its identity)"
        )
        add(
            "layout",
            "pass",
            where,
            "TRT502",
            _rp(route_name, "checkpoint", "path"),
            kind=layout.kind,
            commit=layout.commit,
        )

    files, refused = list_files(layout)
    by_rel = {f.rel: f for f in files}
    outside = [r for r in refused]
    if outside:
        add(
            "contained",
            "reject",
            "entries refused (never followed): " + "; ".join(f"{r}: {why}" for r, why in outside),
            "TRT503",
            _rp(route_name, "checkpoint", "path"),
            refused=[r for r, _ in outside],
        )
    else:
        add(
            "contained",
            "pass",
            f"{len(files)} files, all inside the checkpoint",
            "TRT503",
            _rp(route_name, "checkpoint", "path"),
        )

    # -- config.json
    config: Any = None
    if "config.json" in by_rel:
        try:
            config = _load_json(by_rel["config.json"].real)
        except (OSError, ValueError) as exc:
            add("config", "hold", f"config.json does not parse: {exc}", "TRT504", _rp(route_name, "checkpoint", "path"))
        else:
            if isinstance(config, dict):
                add(
                    "config",
                    "pass",
                    f"config.json: model_type {config.get('model_type')!r}",
                    "TRT504",
                    _rp(route_name, "checkpoint", "path"),
                    model_type=config.get("model_type"),
                )
            else:
                add(
                    "config",
                    "hold",
                    "config.json is not a JSON object",
                    "TRT504",
                    _rp(route_name, "checkpoint", "path"),
                )
                config = None
    else:
        add("config", "hold", "config.json is missing", "TRT504", _rp(route_name, "checkpoint", "path"))

    # -- model card and licence
    licence: str | None = None
    card_rel = next((r for r in ("README.md", "readme.md", "README.MD") if r in by_rel), None)
    if card_rel is None:
        add("model_card", "hold", "no model card (README.md)", "TRT505", _rp(route_name, "checkpoint", "path"))
    else:
        try:
            from huggingface_hub import ModelCard

            card = ModelCard.load(by_rel[card_rel].real)  # an existing local file: read, never downloaded
            data = card.data.to_dict() if card.data is not None else {}
        except Exception as exc:
            add(
                "model_card",
                "hold",
                f"model card does not parse: {exc}",
                "TRT505",
                _rp(route_name, "checkpoint", "path"),
            )
            data = None
        if data is not None:
            add(
                "model_card",
                "pass",
                f"model card {card_rel} parsed ({len(data)} metadata keys)",
                "TRT505",
                _rp(route_name, "checkpoint", "path"),
                metadata_keys=sorted(data),
            )
            raw = data.get("license")
            if isinstance(raw, list):
                raw = raw[0] if len(raw) == 1 else ", ".join(map(str, raw))
            if raw == "other" and data.get("license_name"):
                raw = str(data["license_name"])
            licence = str(raw) if raw else None
    record["license"] = licence
    record["intended_use"] = route.intended_use
    allowed = [a.lower() for a in route.allowed_licenses]
    if licence is None:
        add(
            "license",
            "hold",
            "the model card declares no licence (`license:` in its front matter)",
            "TRT506",
            _rp(route_name, "allowed_licenses"),
            allowed=route.allowed_licenses,
        )
    elif licence.lower() in allowed:
        add(
            "license",
            "pass",
            f"licence {licence} is allowed for: {route.intended_use}",
            "TRT507",
            _rp(route_name, "allowed_licenses"),
            license=licence,
        )
    else:
        add(
            "license",
            "reject",
            f"licence '{licence}' is not in allowed_licenses {route.allowed_licenses}",
            "TRT507",
            _rp(route_name, "allowed_licenses"),
            license=licence,
            allowed=route.allowed_licenses,
        )

    # -- remote code
    remote: list[str] = sorted(r for r in by_rel if r.endswith(".py"))
    for rel, f in by_rel.items():
        if (
            rel.endswith(".json")
            and f.size <= MAX_JSON
            and (rel == "config.json" or rel.endswith("_config.json") or rel == "config.json")
        ):
            try:
                obj = config if rel == "config.json" else _load_json(f.real)
            except (OSError, ValueError):
                continue
            if isinstance(obj, dict):
                if "auto_map" in obj:
                    remote.append(
                        f"{rel} (auto_map: {', '.join(sorted(map(str, obj['auto_map'])) if isinstance(obj['auto_map'], dict) else str(obj['auto_map']))})"
                    )
                if obj.get("trust_remote_code") is True:
                    remote.append(f"{rel} (trust_remote_code = true)")
    if remote:
        add(
            "remote_code",
            "hold",
            "remote code needs review (never imported or run): " + "; ".join(remote),
            "TRT508",
            _rp(route_name, "checkpoint", "path"),
            files=remote,
        )
    else:
        add(
            "remote_code",
            "pass",
            "no remote code (no *.py, no auto_map, no trust_remote_code)",
            "TRT508",
            _rp(route_name, "checkpoint", "path"),
        )

    # -- weights
    pickles = sorted(r for r in by_rel if r.lower().endswith(PICKLE_SUFFIXES))
    if pickles and not route.allow_pickle:
        add(
            "pickle",
            "reject",
            "pickle weights (can run code when loaded; never unpickled here): " + ", ".join(pickles),
            "TRT509",
            _rp(route_name, "allow_pickle"),
            False,
            files=pickles,
        )
    elif pickles:
        add(
            "pickle",
            "pass",
            "pickle weights allowed by allow_pickle = true (not unpickled here): " + ", ".join(pickles),
            "TRT509",
            _rp(route_name, "allow_pickle"),
            files=pickles,
        )
    else:
        add("pickle", "pass", "no pickle weights", "TRT509", _rp(route_name, "allow_pickle"))
    weights = sorted(r for r in by_rel if r.lower().endswith(WEIGHT_SUFFIXES))
    bad = [(r, p) for r in weights if r.endswith(".safetensors") for p in [safetensors_problem(by_rel[r].real)] if p]
    if bad:
        add(
            "weights",
            "reject",
            "malformed safetensors: " + "; ".join(f"{r}: {p}" for r, p in bad),
            "TRT510",
            _rp(route_name, "checkpoint", "path"),
            files=[r for r, _ in bad],
        )
    elif not weights:
        add("weights", "hold", "no weight files found", "TRT510", _rp(route_name, "checkpoint", "path"))

    # -- tokenizer / processor
    tok = sorted(r for r in by_rel if r.rsplit("/", 1)[-1] in TOKENIZER_FILES + PROCESSOR_FILES)
    broken = []
    for r in tok:
        if r.endswith(".json"):
            try:
                _load_json(by_rel[r].real)
            except (OSError, ValueError) as exc:
                broken.append(f"{r}: {exc}")
    if not tok:
        add(
            "tokenizer",
            "hold",
            "no tokenizer or processor files (tokenizer.json, tokenizer_config.json, preprocessor_config.json, …)",
            "TRT511",
            _rp(route_name, "checkpoint", "path"),
        )
    elif broken:
        add(
            "tokenizer",
            "hold",
            "tokenizer/processor files do not parse: " + "; ".join(broken),
            "TRT511",
            _rp(route_name, "checkpoint", "path"),
        )
    else:
        add(
            "tokenizer",
            "pass",
            "tokenizer/processor files: " + ", ".join(tok),
            "TRT511",
            _rp(route_name, "checkpoint", "path"),
            files=tok,
        )

    # -- digests, cache blobs, lock
    cache = DigestCache(default_cache_path(loaded.base_dir)) if use_digest_cache else None
    digests = hash_files([f.real for f in files], cache, cancel=cancel)
    current = {f.rel: {"sha256": digests[f.real.absolute()].sha256, "size": f.size} for f in files}
    blob_bad = []
    for f in files:
        if f.blob is None:
            continue
        sha = current[f.rel]["sha256"]
        if HEX64.match(f.blob) and f.blob != sha:
            blob_bad.append(f"{f.rel}: content sha256 {sha[:12]}… ≠ blob name {f.blob[:12]}…")
        elif COMMIT.match(f.blob) and f.size <= GIT_BLOB_CHECK_MAX and _git_blob_sha1(f.real) != f.blob:
            blob_bad.append(f"{f.rel}: content git-sha1 ≠ blob name {f.blob[:12]}…")
    if blob_bad:
        add(
            "weights",
            "reject",
            "cache blobs do not match their names (tampered or corrupt): " + "; ".join(blob_bad),
            "TRT510",
            _rp(route_name, "checkpoint", "path"),
            files=blob_bad,
        )
    elif weights and not bad:
        add(
            "weights",
            "pass",
            "weights: " + ", ".join(weights),
            "TRT510",
            _rp(route_name, "checkpoint", "path"),
            files=weights,
        )

    lock_path = Path(loaded.base_dir) / LOCK_NAME
    entry = read_lock(lock_path)["routes"].get(route_name)
    commit = layout.commit or (ck.revision if COMMIT.match(ck.revision) else None)
    new_entry = {
        "checkpoint": {"id": ck.id, "revision": ck.revision, "commit": commit, "path": ck.path},
        "files": current,
        "lockedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    lock_path_key = _rp(route_name, "checkpoint", "revision")
    record["files_digest"] = hashlib.sha256(json.dumps(current, sort_keys=True).encode()).hexdigest()
    record["lock"] = str(lock_path)
    if update_lock or (entry is None and commit is not None and not refused):
        write_lock_entry(lock_path, route_name, new_entry)
        add(
            "lock",
            "pass",
            f"{'re-locked' if entry else 'locked'} {len(current)} file digests in {LOCK_NAME}",
            "TRT512",
            lock_path_key,
            files=len(current),
        )
    elif entry is None:
        add("lock", "hold", "not locked: the revision is not pinned or files were refused", "TRT512", lock_path_key)
    else:
        old = entry.get("files", {}) if isinstance(entry.get("files"), dict) else {}
        changed = sorted(r for r in current if r in old and old[r].get("sha256") != current[r]["sha256"])
        removed = sorted(r for r in old if r not in current)
        added = sorted(r for r in current if r not in old)
        locked_commit = (entry.get("checkpoint") or {}).get("commit")
        drift = {"changed": changed, "removed": removed, "added": added}
        if locked_commit != commit:
            add(
                "lock",
                "hold",
                f"{LOCK_NAME} records commit {locked_commit}, the route now resolves {commit}: review, then `trtls gates --update-lock`",
                "TRT512",
                lock_path_key,
                locked=locked_commit,
                now=commit,
                **drift,
            )
        elif changed or removed:
            parts = [
                f"changed: {', '.join(changed)}" if changed else "",
                f"removed: {', '.join(removed)}" if removed else "",
                f"added: {', '.join(added)}" if added else "",
            ]
            add(
                "lock",
                "reject",
                "checkpoint differs from the lock at the same revision — " + "; ".join(p for p in parts if p),
                "TRT512",
                lock_path_key,
                **drift,
            )
        elif added:
            add(
                "lock",
                "hold",
                f"files not in the lock (review, then `trtls gates --update-lock`): {', '.join(added)}",
                "TRT512",
                lock_path_key,
                **drift,
            )
        else:
            add(
                "lock",
                "pass",
                f"all {len(current)} files match {LOCK_NAME}",
                "TRT512",
                lock_path_key,
                files=len(current),
            )
    return Gate1Result(checks, layout, current, record)
