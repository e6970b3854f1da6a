"""What a checkpoint's files hold, read as data (never imported, executed or unpickled): which names are weights,
pickles, tokenizer or processor files; a bounded JSON read; a safetensors header check; git blob hashes."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from trtls.fs import TooLarge, parse_json, read_bytes, read_text

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
MAX_JSON = 64 * 1024 * 1024
MAX_SAFETENSORS_HEADER = 100 * 1024 * 1024
GIT_BLOB_CHECK_MAX = 16 * 1024 * 1024


def load_json(path: Path) -> Any:
    """A checkpoint's JSON file (config.json, a tokenizer's): ValueError when it is larger than 64 MiB or not JSON —
    nested deeper than the parser can read included (`fs.parse_json`: json.loads's RecursionError ended
    `trtls route build` in a traceback and turned every gate into "could not run: RecursionError")."""
    try:
        text = read_text(path, limit=MAX_JSON, follow=True)
    except TooLarge:
        raise ValueError("larger than 64 MiB") from None
    return parse_json(text)


def safetensors_problem(path: Path) -> str | None:
    """The first reason a .safetensors header does not describe its bytes (`checkpoint.sniff`), or None."""
    from trtls.checkpoint.sniff import safetensors_problems

    problems = safetensors_problems(path)
    return problems[0] if problems else None


def git_blob_sha1(path: Path) -> str:
    """The git blob id of a file (callers bound it: GIT_BLOB_CHECK_MAX)."""
    data = read_bytes(path, limit=GIT_BLOB_CHECK_MAX, follow=True)
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def read_model_card(path: Path) -> dict[str, Any]:
    """The model card's front matter (raises when it does not parse). A local file: read, never downloaded."""
    from huggingface_hub import ModelCard  # optional third-party (the `gates` extra)

    card = ModelCard.load(path)
    return card.data.to_dict() if card.data is not None else {}


def card_licence(data: dict[str, Any]) -> str | None:
    """The licence a model card declares: `license`, or `license_name` when that is `other`."""
    raw = data.get("license")
    if isinstance(raw, list):
        raw = raw[0] if len(raw) == 1 else ", ".join(map(str, raw))
    if raw == "other" and data.get("license_name"):
        raw = str(data["license_name"])
    return str(raw) if raw else None
