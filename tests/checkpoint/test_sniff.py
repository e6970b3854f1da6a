"""Gate 1 by content: pickles found by their bytes under any name, safetensors headers that lie are refused."""

from __future__ import annotations

import bz2
import gzip
import json
import pickle
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from trtls.checkpoint.sniff import find_pickle, safetensors_problems

PAYLOAD = {"weights": [0.5, 1.5], "bias": 3}


@pytest.mark.parametrize("protocol", [0, 1, 2, 4, 5])
@pytest.mark.parametrize("name", ["scaler.joblib", "weights.dat", "model.safetensors", "README"])
def test_plain_pickle_found_whatever_its_name(tmp_path: Path, protocol: int, name: str) -> None:
    p = tmp_path / name
    p.write_bytes(pickle.dumps(PAYLOAD, protocol=protocol))
    found = find_pickle(p)
    assert found is not None and found.where == "byte 0"
    assert found.protocol == (protocol if protocol >= 2 else None)


def test_torch_style_zip_container_found(tmp_path: Path) -> None:
    # PyTorch's zip format (.pt/.bin/.ckpt): archive/data.pkl beside the raw storages
    for name in ("model.pt", "pytorch_model.bin", "last.ckpt", "blob"):
        with zipfile.ZipFile(tmp_path / name, "w") as z:
            z.writestr("archive/version", "3\n")
            z.writestr("archive/data/0", b"\x00" * 16)
            z.writestr("archive/data.pkl", pickle.dumps(PAYLOAD, protocol=2))
        found = find_pickle(tmp_path / name)
        assert found is not None and found.where == "zip member archive/data.pkl", name


def test_pickle_inside_zip_under_an_innocent_member_name(tmp_path: Path) -> None:
    with zipfile.ZipFile(tmp_path / "bundle.zip", "w") as z:
        z.writestr("config.json", "{}")
        z.writestr("state", pickle.dumps(PAYLOAD, protocol=4))
    found = find_pickle(tmp_path / "bundle.zip")
    assert found is not None and found.where == "zip member state" and found.protocol == 4


def test_compressed_pickles_found(tmp_path: Path) -> None:
    raw = pickle.dumps(PAYLOAD, protocol=4)
    (tmp_path / "a.joblib").write_bytes(gzip.compress(raw))
    (tmp_path / "b.joblib").write_bytes(bz2.compress(raw))
    import zlib

    (tmp_path / "c.pkl.z").write_bytes(zlib.compress(raw))
    assert str(find_pickle(tmp_path / "a.joblib")) == "pickle (protocol 4) at gzip stream"
    assert find_pickle(tmp_path / "b.joblib").where == "bz2 stream"  # type: ignore[union-attr]
    assert find_pickle(tmp_path / "c.pkl.z").where == "zlib stream"  # type: ignore[union-attr]


def test_data_files_are_not_pickles(tmp_path: Path) -> None:
    save_file({"w": np.ones((2, 2), np.float32)}, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    (tmp_path / "README.md").write_text("I am a model card\n(with parentheses) and ]brackets.\n")
    (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\nthe\n")
    with zipfile.ZipFile(tmp_path / "data.zip", "w") as z:
        z.writestr("a.txt", "hello")
    (tmp_path / "notes.gz").write_bytes(gzip.compress(b"plain text, no pickle here"))
    for p in tmp_path.iterdir():
        assert find_pickle(p) is None, p.name


def _safetensors(path: Path, header: dict, data: bytes) -> Path:
    blob = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(blob)) + blob + data)
    return path


def test_sound_safetensors_has_no_problem(tmp_path: Path) -> None:
    save_file(
        {"a": np.zeros((3, 4), np.float32), "b": np.zeros(5, np.int64), "c": np.zeros(0, np.float16)},
        str(tmp_path / "ok.safetensors"),
        metadata={"format": "np"},
    )
    assert safetensors_problems(tmp_path / "ok.safetensors") == []


@pytest.mark.parametrize(
    ("header", "data", "expected"),
    [
        ({"w": {"dtype": "F99", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8, "unknown dtype 'F99'"),
        ({"w": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 8]}}, b"\0" * 8, "is 64 bytes but data_offsets"),
        ({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}, b"\0" * 8, "end past the data region"),
        (
            {
                "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},
            },
            b"\0" * 12,
            "overlap",
        ),
        ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}}, b"\0" * 16, "belong to no tensor"),
        ({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}}, b"\0" * 8, "non-negative integers"),
        ({"w": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}}, b"\0" * 8, "0 <= start <= end"),
    ],
)
def test_lying_safetensors_headers_are_located(tmp_path: Path, header: dict, data: bytes, expected: str) -> None:
    problems = safetensors_problems(_safetensors(tmp_path / "bad.safetensors", header, data))
    assert any(expected in p and p.startswith("bad.safetensors") for p in problems), problems


def test_truncated_header_length(tmp_path: Path) -> None:
    (tmp_path / "t.safetensors").write_bytes(struct.pack("<Q", 10_000) + b"{}")
    assert "runs past the file" in safetensors_problems(tmp_path / "t.safetensors")[0]
