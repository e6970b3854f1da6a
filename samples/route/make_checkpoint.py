"""Make the sample route's inputs deterministically (nothing is downloaded):

  checkpoints/models--trtls--tiny-mlp/          a Hugging Face cache repo: refs/main, blobs/, snapshots/<commit>/
      config.json, model.safetensors (tiny MLP, safetensors numpy API), tokenizer.json (tokenizers WordLevel,
      built locally), tokenizer_config.json, README.md (model card, `license: apache-2.0`)
  checkpoints/models--trtls--tiny-mlp-pickle/   the same plus pytorch_model.bin (a pickle weight: rejected;
                                                never unpickled)
  model.onnx                                    the engine's ONNX, built from the safetensors weights (make_onnx.py)
  inputs/reference.npz, inputs/canary.npz       reference and canary inputs for gates 4 and 5

Blobs are named like the real cache: sha256 for the weights (LFS), git blob sha1 for small files; the
snapshot's commit is derived from the file digests, so the same script always makes the same commit.
Run: python make_checkpoint.py  (prints the commit; trtls.toml pins it).
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
from pathlib import Path

import numpy as np
from safetensors.numpy import save
from tokenizers import Tokenizer
from tokenizers.models import WordLevel
from tokenizers.pre_tokenizers import Whitespace

HERE = Path(__file__).resolve().parent
D_IN, D_HIDDEN, D_OUT = 16, 32, 4
WORDS = ["[UNK]", "[PAD]", "the", "engine", "builds", "a", "tiny", "model", "route", "bundle", "canary", "rollback"]
CARD = """---
license: apache-2.0
language: en
tags:
- tiny
- sample
---

# tiny-mlp

A 16 → 32 → 4 MLP made by `make_checkpoint.py` for the trtls route sample. It does nothing useful.

## Intended use
Demonstrating the trtls route gates.
"""


def weights() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(20261)
    return {
        "fc1.weight": (rng.standard_normal((D_HIDDEN, D_IN)) * 0.25).astype(np.float32),
        "fc1.bias": (rng.standard_normal(D_HIDDEN) * 0.1).astype(np.float32),
        "fc2.weight": (rng.standard_normal((D_OUT, D_HIDDEN)) * 0.25).astype(np.float32),
        "fc2.bias": (rng.standard_normal(D_OUT) * 0.1).astype(np.float32),
    }


def tokenizer_json() -> bytes:
    tok = Tokenizer(WordLevel({w: i for i, w in enumerate(WORDS)}, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    return (tok.to_str(pretty=True) + "\n").encode()


def files(with_pickle: bool) -> dict[str, bytes]:
    w = weights()
    out = {
        "config.json": (
            json.dumps(
                {
                    "model_type": "tiny-mlp",
                    "architectures": ["TinyMLP"],
                    "d_in": D_IN,
                    "d_hidden": D_HIDDEN,
                    "d_out": D_OUT,
                    "torch_dtype": "float32",
                },
                indent=2,
            )
            + "\n"
        ).encode(),
        "model.safetensors": save(w),
        "tokenizer.json": tokenizer_json(),
        "tokenizer_config.json": (
            json.dumps(
                {"tokenizer_class": "PreTrainedTokenizerFast", "unk_token": "[UNK]", "pad_token": "[PAD]"}, indent=2
            )
            + "\n"
        ).encode(),
        "README.md": CARD.encode(),
    }
    if with_pickle:
        # A pickle of plain lists (protocol 4): the format that can run code when loaded. trtls never loads it.
        out["pytorch_model.bin"] = pickle.dumps({k: v.tolist() for k, v in w.items()}, protocol=4)
    return out


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def make_cache_repo(root: Path, content: dict[str, bytes]) -> str:
    """Lay `content` out as a Hugging Face cache repo; returns the snapshot commit."""
    if root.exists():
        shutil.rmtree(root)
    listing = "".join(f"{name} {hashlib.sha256(data).hexdigest()}\n" for name, data in sorted(content.items()))
    commit = hashlib.sha1(b"trtls-sample\n" + listing.encode()).hexdigest()
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "main").write_text(commit)
    (root / "blobs").mkdir()
    snap = root / "snapshots" / commit
    snap.mkdir(parents=True)
    for name, data in sorted(content.items()):
        blob = hashlib.sha256(data).hexdigest() if name.endswith((".safetensors", ".bin")) else git_blob_sha1(data)
        (root / "blobs" / blob).write_bytes(data)
        os.symlink(Path("..") / ".." / "blobs" / blob, snap / name)
    return commit


def make_inputs(folder: Path) -> None:
    rng = np.random.default_rng(7)
    folder.mkdir(exist_ok=True)
    np.savez(folder / "reference.npz", input=rng.standard_normal((4, D_IN)).astype(np.float32))
    np.savez(folder / "canary.npz", input=rng.standard_normal((2, D_IN)).astype(np.float32))


def main() -> str:
    ck = HERE / "checkpoints"
    ck.mkdir(exist_ok=True)
    commit = make_cache_repo(ck / "models--trtls--tiny-mlp", files(False))
    pickle_commit = make_cache_repo(ck / "models--trtls--tiny-mlp-pickle", files(True))
    from make_onnx import build_onnx

    build_onnx(ck / "models--trtls--tiny-mlp" / "snapshots" / commit / "model.safetensors", HERE / "model.onnx")
    make_inputs(HERE / "inputs")
    print(f"tiny-mlp commit {commit}")
    print(f"tiny-mlp-pickle commit {pickle_commit}")
    return commit


if __name__ == "__main__":
    main()
