"""Real checkpoints in tmp dirs for the gate tests (shared by test_gate1/2, test_run_gates)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
from safetensors.numpy import save

from trtls.core.recipe import load_recipe

CARD = "---\nlicense: {license}\n---\n\n# tiny\n"


def checkpoint_files(license: str | None = "apache-2.0", extra: dict[str, bytes] | None = None) -> dict[str, bytes]:
    rng = np.random.default_rng(0)
    files = {
        "config.json": json.dumps({"model_type": "tiny"}).encode(),
        "model.safetensors": save({"w": rng.standard_normal((4, 4)).astype(np.float32)}),
        "tokenizer.json": json.dumps({"version": "1.0", "model": {"type": "WordLevel", "vocab": {"a": 0}}}).encode(),
        "README.md": (CARD.format(license=license) if license else "# no front matter\n").encode(),
    }
    files.update(extra or {})
    return files


def make_folder(root: Path, files: dict[str, bytes]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return root


def make_cache(root: Path, files: dict[str, bytes], commit: str = "a" * 40) -> tuple[Path, str]:
    """`models--org--name` with refs/main → commit and snapshot symlinks into blobs/ (named by sha256)."""
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "main").write_text(commit)
    (root / "blobs").mkdir()
    snap = root / "snapshots" / commit
    snap.mkdir(parents=True)
    for name, data in files.items():
        blob = hashlib.sha256(data).hexdigest()
        (root / "blobs" / blob).write_bytes(data)
        os.symlink(Path("..") / ".." / "blobs" / blob, snap / name)
    return root, commit


def write_recipe(folder: Path, route: str, engine_onnx: bool = True) -> Path:
    if engine_onnx:
        (folder / "m.onnx").write_bytes(b"onnx")
    text = '[engines.e]\nonnx = "m.onnx"\noutput = "out/e.engine"\n\n' + route
    p = folder / "trtls.toml"
    p.write_text(text)
    return p


def route_table(path: str, revision: str, *, name: str = "r", id: str | None = None, extra: str = "") -> str:
    ident = f', id = "{id}"' if id else ""
    return (
        f"[routes.{name}]\n"
        'engine = "e"\n'
        f'checkpoint = {{ path = "{path}", revision = "{revision}"{ident} }}\n'
        'intended_use = "tests"\n'
        'allowed_licenses = ["apache-2.0"]\n'
        'bundle = "out/r.bundle"\n' + extra
    )


def load(path: Path):
    loaded = load_recipe(path)
    assert loaded.recipe is not None, [(loaded.location(f), f.message) for f in loaded.findings]
    return loaded


def by_name(checks, name: str):
    found = [c for c in checks if c.name == name]
    assert found, f"no check {name}: {[c.name for c in checks]}"
    return found[-1]
