"""The route build's view of its checkpoint: every file hashed the way gate 1 hashes it, and the files the build
reads taken through one `O_NOFOLLOW` descriptor whose bytes must match their recorded digest."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from trtls.checkpoint.hashing import DigestCache, default_cache_path, hash_files
from trtls.checkpoint.layout import Layout, list_files, resolve_layout
from trtls.core.recipe import LoadedRecipe
from trtls.core.route import COMMIT, RouteModel
from trtls.fs import TooLarge, parse_json, read_bytes
from trtls.route.errors import RouteBuildError

MAX_EMBED = 64 * 1024 * 1024  # config.json / tokenizer.json read into memory at most this large


@dataclass
class CheckpointState:
    """What the checkpoint is right now: layout, per-file digests and gate 1's files digest."""

    layout: Layout
    commit: str | None  # what gate 1 records as `commit`
    files: dict[str, dict[str, Any]]  # rel → {sha256, size}  (gate 1's `current`)
    real: dict[str, Path]  # rel → resolved path inside the checkpoint
    files_digest: str  # = gate 1 record["files_digest"]


def files_digest(files: Mapping[str, Mapping[str, Any]]) -> str:
    """The digest gate 1 records as `files_digest` (sha256 of the sorted {rel: {sha256, size}} JSON)."""
    return hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()


def read_checkpoint(loaded: LoadedRecipe, route: RouteModel, *, use_digest_cache: bool = True) -> CheckpointState:
    """Hash the route's checkpoint the way gate 1 does; RouteBuildError when gate 1 could not accept its layout."""
    ck = route.source_checkpoint()
    where = ("checkpoint", "path")
    if not loaded.resolve(ck.path).is_dir():
        raise RouteBuildError(f"checkpoint folder not found: {loaded.resolve(ck.path)}", where)
    layout = resolve_layout(Path(loaded.base_dir) / ck.path, ck.revision, ck.id)
    if layout.problem is not None or layout.files_dir is None:
        raise RouteBuildError(f"checkpoint layout: {layout.problem or 'no files folder'}", ("checkpoint",))
    files, refused = list_files(layout)
    if refused:
        raise RouteBuildError(
            "checkpoint entries refused (never followed): " + "; ".join(f"{r}: {why}" for r, why in refused), where
        )
    cache = DigestCache(default_cache_path(loaded.base_dir)) if use_digest_cache else None
    digests = hash_files([f.real for f in files], cache)
    current = {f.rel: {"sha256": digests[f.real.absolute()].sha256, "size": f.size} for f in files}
    commit = layout.commit or (ck.revision if COMMIT.match(ck.revision) else None)
    return CheckpointState(layout, commit, current, {f.rel: f.real for f in files}, files_digest(current))


def read_verified(state: CheckpointState, rel: str, limit: int) -> bytes:
    """A checkpoint file's bytes, read through one descriptor that does not follow a symlink, matching its digest."""
    try:
        data = read_bytes(state.real[rel], limit=limit, follow=False)
    except TooLarge:
        raise RouteBuildError(f"checkpoint file {rel} is larger than {limit} bytes") from None
    except OSError as exc:  # a FIFO, a device or a symlink put there since the checkpoint was listed
        raise RouteBuildError(f"checkpoint file {rel}: {exc.strerror or exc}", ("checkpoint", "path")) from None
    if hashlib.sha256(data).hexdigest() != state.files[rel]["sha256"]:
        raise RouteBuildError(f"checkpoint file {rel} changed while the route was being built; run again")
    return data


def checkpoint_licence(state: CheckpointState) -> str | None:
    """The licence the checkpoint's model card declares, for the SBOM (None when there is no card or it does not
    parse: gate 1 judges the licence)."""
    card = next((r for r in ("README.md", "readme.md") if r in state.files), None)
    if card is None:
        return None
    try:
        from huggingface_hub import ModelCard  # optional third-party (the `gates` extra)

        data = ModelCard(read_verified(state, card, MAX_EMBED).decode("utf-8")).data.to_dict()
    except Exception:
        return None
    raw = data.get("license")
    if isinstance(raw, list):
        raw = ", ".join(map(str, raw))
    return str(raw) if raw else None


class RouteInputs(NamedTuple):
    """What every route reads from its checkpoint before exporting: the hashed checkpoint, config.json (bytes and
    parsed) and tokenizer.json's bytes (None when the checkpoint has none)."""

    state: CheckpointState
    config: dict[str, Any]
    config_bytes: bytes
    tokenizer_bytes: bytes | None


def read_route_inputs(loaded: LoadedRecipe, route: RouteModel, *, use_digest_cache: bool) -> RouteInputs:
    """Hash the checkpoint and read config.json (required: model_type chooses the exporter) and tokenizer.json,
    each matching its digest; RouteBuildError when config.json is missing or is not a JSON object."""
    state = read_checkpoint(loaded, route, use_digest_cache=use_digest_cache)
    if "config.json" not in state.files:
        raise RouteBuildError("checkpoint has no config.json (model_type chooses the exporter)", ("checkpoint", "path"))
    config_bytes = read_verified(state, "config.json", MAX_EMBED)
    try:
        config = parse_json(config_bytes)
    except ValueError as exc:
        raise RouteBuildError(f"config.json does not parse: {exc}") from None
    if not isinstance(config, dict):
        raise RouteBuildError("config.json is not a JSON object")
    tokenizer_bytes = read_verified(state, "tokenizer.json", MAX_EMBED) if "tokenizer.json" in state.files else None
    return RouteInputs(state, config, config_bytes, tokenizer_bytes)


# Files a deployment reads beside the weights (tokenizer settings, sentence-transformers modules and pooling): the
# bundle carries each one the checkpoint has, as a section named by its path ('/' → '__': a section name is never a
# path), byte for byte as hashed.
DEPLOYMENT_FILES = (
    "tokenizer_config.json",
    "special_tokens_map.json",
    "vocab.txt",
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
    "1_Pooling/config.json",
)


def deployment_sections(state: CheckpointState) -> dict[str, bytes]:
    """Section name → verified bytes of every DEPLOYMENT_FILES entry the checkpoint has."""
    return {
        rel.replace("/", "__"): read_verified(state, rel, MAX_EMBED) for rel in DEPLOYMENT_FILES if rel in state.files
    }


def model_identity(route: RouteModel, config: dict[str, Any], route_name: str) -> dict[str, str]:
    """The bundle header's model_id, model_type and family, from the route's checkpoint id and config.json."""
    return {
        "model_id": route.source_checkpoint().id or str(config.get("_name_or_path") or route_name),
        "model_type": str(config.get("model_type")),
        "family": str((config.get("architectures") or [config.get("model_type")])[0]),
    }


def checkpoint_provenance(route: RouteModel, route_name: str, state: CheckpointState) -> dict[str, Any]:
    """The provenance fields that name the route and the checkpoint it was built from (id, revision, commit, files)."""
    return {
        "route": route_name,
        "checkpoint_id": route.source_checkpoint().id,
        "checkpoint_revision": route.source_checkpoint().revision,
        "checkpoint_commit": state.commit,
        "checkpoint_files_sha256": state.files_digest,
        "checkpoint_files": {rel: f["sha256"] for rel, f in sorted(state.files.items())},
    }
