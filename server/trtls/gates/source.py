"""Gate 1 — source and checkpoint.

Reads a checkpoint folder as data, never as code: nothing in it is imported, executed or unpickled,
and no path is followed out of it (a symlink that resolves outside the checkpoint rejects the route).
For a Hugging Face cache repo (`models--org--name/{refs,snapshots,blobs}`) the containment root is the
repo folder (snapshot files are symlinks into its `blobs/`), and the revision is resolved from the layout.

Checks (docs/codes/gate-source.md):
  TRT501 revision pinned to a 40-hex commit            hold (quick fix data: the commit the snapshot holds)
  TRT502 layout and identity (cache folder, id, commit) hold when unresolvable, reject when contradicting
  TRT503 every file stays inside the checkpoint         reject
  TRT504 config.json present and a JSON object          hold
  TRT505 model card present and parsed                  hold
  TRT506 licence present                                hold
  TRT507 licence in allowed_licenses                    reject
  TRT508 no remote code (auto_map, *.py, trust_remote_code)  hold, naming the files
  TRT509 no pickle anywhere unless allow_pickle (by content: magic bytes, zip members, compressed streams, any name)
                                                        reject
  TRT510 weights present; safetensors headers sound; cache blobs match their names  hold / reject
  TRT511 tokenizer or processor files present           hold
  TRT512 file digests match trtls.lock.json             changed/removed → reject, added → hold, other revision → hold,
                                                        no entry → hold (`trtls route lock` writes it; gates never do)
  TRT513 the files are the pinned revision's            not_checked for a plain folder (it records no commit)
  TRT514 the tokenizer fits the model (gates.source_tokenizer): vocabulary vs embedding rows  reject; special tokens
                                                        vs config, max length vs position embeddings  hold
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trtls.checkpoint.content import (
    GIT_BLOB_CHECK_MAX,
    WEIGHT_SUFFIXES,
    git_blob_sha1,
)
from trtls.checkpoint.current import files_digest
from trtls.checkpoint.hashing import DigestCache, default_cache_path, hash_files
from trtls.checkpoint.layout import CheckpointFile, Layout, list_files, resolve_layout
from trtls.checkpoint.lock import LOCK_NAME, lock_drift, read_lock
from trtls.core.gate_result import GateCheck
from trtls.core.route import COMMIT, CheckpointRef, RouteModel
from trtls.gates.source_content import (
    PATH,
    SourceChecks,
    check_card_and_licence,
    check_config,
    check_pickle,
    check_remote_code,
    check_safetensors,
    check_tokenizer,
)
from trtls.gates.source_tokenizer import check_tokenizer_fits

__all__ = ["LOCK_NAME", "Gate1Result", "check_checkpoint", "resolve_layout"]

HEX64 = re.compile(r"^[0-9a-f]{64}$")


@dataclass
class Gate1Result:
    checks: list[GateCheck]
    layout: Layout | None
    files: dict[str, dict[str, Any]]  # rel → {sha256, size}
    record: dict[str, Any]  # what the route summary carries (id, revision, commit, licence, lock)


REVISION = ("checkpoint", "revision")


def check_checkpoint(
    loaded: Any,
    route_name: str,
    route: RouteModel,
    *,
    use_digest_cache: bool = True,
    cancel: Callable[[], bool] | None = None,
) -> Gate1Result:
    checks = SourceChecks(route_name)
    ck = route.source_checkpoint()
    record: dict[str, Any] = {"id": ck.id, "revision": ck.revision, "path": ck.path}
    ck_path = loaded.resolve(ck.path) if hasattr(loaded, "resolve") else Path(ck.path)
    if not ck_path.is_dir():
        checks.add("layout", "reject", f"checkpoint folder not found: {ck_path}", "TRT502", PATH)
        return Gate1Result(checks.items, None, {}, record)
    layout = resolve_layout(Path(loaded.base_dir) / ck.path, ck.revision, ck.id)
    record.update(layout=layout.kind, commit=layout.commit)
    _check_revision(checks, ck, layout)
    _check_revision_verified(checks, ck, layout)
    _check_layout(checks, layout)
    if layout.files_dir is None:
        return Gate1Result(checks.items, layout, {}, record)
    files, refused = list_files(layout)
    by_rel = {f.rel: f for f in files}
    _check_contained(checks, files, refused)
    config = check_config(checks, by_rel)
    record["license"] = check_card_and_licence(checks, by_rel, route)
    record["intended_use"] = route.intended_use
    check_remote_code(checks, by_rel, config)
    check_pickle(checks, by_rel, route.allow_pickle)
    weights = sorted(r for r in by_rel if r.lower().endswith(WEIGHT_SUFFIXES))
    malformed = check_safetensors(checks, by_rel, weights)
    check_tokenizer(checks, by_rel)
    check_tokenizer_fits(checks, by_rel, config, weights)
    cache = DigestCache(default_cache_path(loaded.base_dir)) if use_digest_cache else None
    digests = hash_files([f.real for f in files], cache, cancel=cancel)
    current = {f.rel: {"sha256": digests[f.real.absolute()].sha256, "size": f.size} for f in files}
    _check_blobs(checks, files, current, weights, malformed)
    commit = layout.commit or (ck.revision if COMMIT.match(ck.revision) else None)
    # what the lock and the bundle's provenance record (`route build` does the same); for a plain folder it is the
    # pinned revision as written, which TRT513 says is not verified
    record["commit"] = commit
    lock_path = Path(loaded.base_dir) / LOCK_NAME
    record["files_digest"] = files_digest(current)  # what a verdict rests on (`lifecycle.rested_on`): one definition
    record["lock"] = str(lock_path)
    _check_lock(checks, lock_path, commit, current)
    return Gate1Result(checks.items, layout, current, record)


def _check_revision(checks: SourceChecks, ck: CheckpointRef, layout: Layout) -> None:
    if COMMIT.match(ck.revision):
        checks.add("revision_pinned", "pass", f"revision pinned to commit {ck.revision}", "TRT501", REVISION)
        return
    fix = f"; the cache holds commit {layout.commit} for it" if layout.commit else ""
    checks.add(
        "revision_pinned",
        "hold",
        f"revision '{ck.revision}' is not a pinned commit (40 hex digits): a branch moves{fix}",
        "TRT501",
        REVISION,
        revision=ck.revision,
        commit=layout.commit,
        quick_fix=(
            {"title": f"Pin the revision to {layout.commit}", "replace_value": layout.commit} if layout.commit else None
        ),
    )


def _check_revision_verified(checks: SourceChecks, ck: CheckpointRef, layout: Layout) -> None:
    """TRT513: are the files the pinned revision's? A cache snapshot folder is named by its commit; a plain folder
    records none, so nothing was compared: not_checked (waivable when the lock alone identifies the files)."""
    if layout.problem is not None or layout.files_dir is None:
        return
    if layout.kind == "hf_cache":
        checks.add(
            "revision_verified",
            "pass",
            f"the cache's snapshot folder for the files is commit {layout.commit}",
            "TRT513",
            REVISION,
        )
        return
    checks.add(
        "revision_verified",
        "not_checked",
        f"a plain folder records no commit: nothing shows its files are revision {ck.revision} (use a Hugging Face "
        "cache snapshot, or waive 'revision_verified' with the reason the lock alone identifies these files)",
        "TRT513",
        REVISION,
    )


def _check_layout(checks: SourceChecks, layout: Layout) -> None:
    if layout.problem is not None:
        checks.add(
            "layout",
            layout.problem_status,
            layout.problem,
            "TRT502",
            ("checkpoint",),
            False,
            kind=layout.kind,
            refs=layout.refs,
        )
    elif layout.files_dir is not None:
        where = f"Hugging Face cache snapshot {layout.commit}" if layout.kind == "hf_cache" else "local folder"
        checks.add("layout", "pass", where, "TRT502", PATH, kind=layout.kind, commit=layout.commit)


def _check_contained(checks: SourceChecks, files: list[CheckpointFile], refused: list[tuple[str, str]]) -> None:
    if refused:
        checks.add(
            "contained",
            "reject",
            "entries refused (never followed): " + "; ".join(f"{r}: {why}" for r, why in refused),
            "TRT503",
            PATH,
            refused=[r for r, _ in refused],
        )
    else:
        checks.add("contained", "pass", f"{len(files)} files, all inside the checkpoint", "TRT503", PATH)


def _check_blobs(
    checks: SourceChecks,
    files: list[CheckpointFile],
    current: dict[str, dict[str, Any]],
    weights: list[str],
    malformed: bool,
) -> None:
    """Hugging Face cache blobs are named by their content's digest: a mismatch is tampering or corruption."""
    blob_bad = []
    for f in files:
        if f.blob is None:
            continue
        sha = current[f.rel]["sha256"]
        if HEX64.match(f.blob) and f.blob != sha:
            blob_bad.append(f"{f.rel}: content sha256 {sha[:12]}… ≠ blob name {f.blob[:12]}…")
        elif COMMIT.match(f.blob) and f.size <= GIT_BLOB_CHECK_MAX and git_blob_sha1(f.real) != f.blob:
            blob_bad.append(f"{f.rel}: content git-sha1 ≠ blob name {f.blob[:12]}…")
    if blob_bad:
        checks.add(
            "weights",
            "reject",
            "cache blobs do not match their names (tampered or corrupt): " + "; ".join(blob_bad),
            "TRT510",
            PATH,
            files=blob_bad,
        )
    elif weights and not malformed:
        checks.add("weights", "pass", "weights: " + ", ".join(weights), "TRT510", PATH, files=weights)


def _check_lock(checks: SourceChecks, lock_path: Path, commit: str | None, current: dict[str, dict[str, Any]]) -> None:
    """TRT512: the files against trtls.lock.json. Only `trtls route lock` writes it (after a review): a missing
    entry holds, with the command in the message and the quick fix — never trust on first use."""
    entry = read_lock(lock_path)["routes"].get(checks.route_name)
    relock = f"`trtls route lock --route {checks.route_name}`"
    if entry is None:
        checks.add(
            "lock",
            "hold",
            f"route {checks.route_name} is not locked: no entry in {LOCK_NAME}. Review the checkpoint, then run "
            f"{relock} (the gates only verify the lock, never write it)",
            "TRT512",
            REVISION,
            missing=True,
            command=f"trtls route lock --route {checks.route_name}",
        )
        return
    drift: dict[str, Any] = lock_drift(entry, current)  # evidence for the check
    changed, removed, added = drift["changed"], drift["removed"], drift["added"]
    locked_commit = (entry.get("checkpoint") or {}).get("commit")
    if locked_commit != commit:
        checks.add(
            "lock",
            "hold",
            f"{LOCK_NAME} records commit {locked_commit}, the route now resolves {commit}: review, then {relock}",
            "TRT512",
            REVISION,
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
        checks.add(
            "lock",
            "reject",
            "checkpoint differs from the lock at the same revision — " + "; ".join(p for p in parts if p),
            "TRT512",
            REVISION,
            **drift,
        )
    elif added:
        checks.add(
            "lock",
            "hold",
            f"files not in the lock (review, then {relock}): {', '.join(added)}",
            "TRT512",
            REVISION,
            **drift,
        )
    else:
        checks.add(
            "lock", "pass", f"all {len(current)} files match {LOCK_NAME}", "TRT512", REVISION, files=len(current)
        )


# What stops `trtls route build` before it reads a weight into an export: what gate 1 rejects, and a revision that
# is not pinned (a branch moves under the bundle). Other holds (no lock entry yet, an unverified plain folder) are
# said, and the build goes on: the gates judge the route afterwards.
BUILD_REFUSING_HOLDS = ("revision_pinned",)


def build_preflight(
    loaded: Any, route_name: str, route: RouteModel, *, use_digest_cache: bool = True
) -> tuple[list[GateCheck], list[GateCheck]]:
    """Gate 1's content checks before a route build: (checks that refuse it, checks that only warn)."""
    result = check_checkpoint(loaded, route_name, route, use_digest_cache=use_digest_cache)
    refuse = [
        c for c in result.checks if c.status == "reject" or (c.status == "hold" and c.name in BUILD_REFUSING_HOLDS)
    ]
    warn = [c for c in result.checks if c not in refuse and c.status in ("hold", "not_checked")]
    return refuse, warn
