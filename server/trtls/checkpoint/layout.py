"""Where a checkpoint's files are and which of them are the checkpoint: a plain folder or a Hugging Face cache
repo (`models--org--name/{refs,snapshots,blobs}`, whose snapshot files are symlinks into `blobs/`). Reads the
folder as data; never follows a path out of the containment root."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from trtls.core.route import COMMIT
from trtls.fs import read_text

REF_LIMIT = 4096  # a ref file holds one commit id
SKIP_DIRS = {".git", ".cache"}  # VCS data and huggingface local-dir download metadata are not checkpoint content


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


def _read_ref(path: Path) -> str | None:
    try:
        text = read_text(path, limit=REF_LIMIT, follow=True, errors="replace").strip()
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
