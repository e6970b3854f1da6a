"""`trtls bundle inspect` and `trtls bundle verify` read every bundle as TensorRT Model Connect's loader would, foreign
ones too (issue 29, item 9): a header whose nested `family` stands in for a missing top-level one, or a TRTMC encoder
bundle whose dispatch record or engine I/O TRTMC's BERT pipeline cannot run, fails both (exit 4, the problem named).

The containers are written here as TRTMC writes them (magic, u64 header length, JSON header, sections from the payload
start), never by trtls's writer."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
from pathlib import Path

TRTMC_MAGIC = b"BUNDLE\x01\x00"
ENGINE_IO = {  # what TRTMC's BERT builder makes (families/bert/model.py:482-483, :599), 16 tokens long
    "inputs": {n: {"dtype": "int32", "shape": [16]} for n in ("input_ids", "attention_mask")},
    "outputs": {"hidden_states": {"dtype": "float32", "shape": [16, 32]}},
}


def trtmc_container(path: Path, header: dict, sections: list[tuple[str, bytes]]) -> Path:
    table, payload = {}, b""
    for name, data in sections:
        table[name] = {"offset": len(payload), "size": len(data)}
        payload += data
    body = json.dumps({**header, "sections": table}, separators=(",", ":")).encode()
    path.write_bytes(TRTMC_MAGIC + struct.pack("<Q", len(body)) + body + payload)
    return path


def encoder_bundle(path: Path, **header_over) -> Path:
    config = {"runtime_strategy": "bert_encoder_only", "engine_backend": "trt", "trt_version": "10.13.0",
              "trt_abi": "10.13", "precision": "fp32", "max_position_embeddings": 512}  # fmt: skip
    header = {"model_id": "m", "model_type": "bert", "family": "bert", "trt_version": "10.13.0", "trt_abi": "10.13",
              "hidden_size": 32, "max_cache_length": 16, "runtime_strategy": "bert_encoder_only"}  # fmt: skip
    header.update(header_over)
    header = {k: v for k, v in header.items() if v is not None}
    sections = [("config.json", json.dumps(config).encode()), ("engine_plan", b"P" * 64), ("tokenizer.json", b"{}")]
    return trtmc_container(path, header, sections)


def cli(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "trtls.cli.main", *map(str, args)], capture_output=True, text=True, timeout=120
    )


def test_a_nested_family_shadowing_a_missing_top_level_one_fails_inspect_and_verify(tmp_path: Path) -> None:
    header = {"model_id": "x/y", "model_type": "mlp", "trt_version": "10.13", "runtime_strategy": "s",
              "quantization": {"family": "SPOOF"}}  # fmt: skip
    path = trtmc_container(tmp_path / "spoof.bundle", header, [("engine_plan", b"P" * 64)])
    for command in ("inspect", "verify"):
        r = cli("bundle", command, path)
        assert r.returncode == 4, (command, r.stdout, r.stderr)
        said = r.stdout + r.stderr  # inspect prints the problems in its report, verify on stderr
        assert "trtmc_load" in said and "'family'" in said and "quantization.family" in said, said
    r = cli("bundle", "verify", "--json", path)
    problems = json.loads(r.stdout)["problems"]
    assert [p["check"] for p in problems] == ["trtmc_load"] and "SPOOF" in problems[0]["message"]


def test_a_foreign_trtmc_encoder_bundle_is_checked_as_trtmcs_loader_and_bert_pipeline_read_it(tmp_path: Path) -> None:
    good = encoder_bundle(tmp_path / "native.bundle")  # TRTMC's own writer records no io_map
    r = cli("bundle", "inspect", good)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "not checked: engine I/O: the bundle records no io_map" in r.stdout  # said, never passed as checked
    bad_io = {
        **ENGINE_IO,
        "inputs": {n: {"dtype": "int64", "shape": ["batch", "sequence"]} for n in ENGINE_IO["inputs"]},
    }
    for name, over, words in (
        ("io", {"io_map": bad_io}, "'input_ids' is int64; TRTMC feeds int32"),
        ("long", {"io_map": ENGINE_IO, "max_cache_length": 512}, "max_cache_length 512"),
        ("abi", {"trt_abi": "10.12"}, "disagrees with config.json"),
    ):
        r = cli("bundle", "verify", encoder_bundle(tmp_path / f"{name}.bundle", **over))
        assert r.returncode == 4 and words in r.stderr, (name, r.stderr)
    r = cli("bundle", "verify", encoder_bundle(tmp_path / "ok.bundle", io_map=ENGINE_IO))
    assert r.returncode == 0, r.stderr
    # a foreign bundle with no trtls record and no sidecar: its structure holds, its bytes have nothing to be
    # compared with — said, never a plain "verified"
    assert "structure verified" in r.stdout and "contents not_checked" in r.stdout, r.stdout
    assert cli("bundle", "promote", tmp_path / "ok.bundle").returncode == 0
    r = cli("bundle", "verify", tmp_path / "ok.bundle")
    assert r.returncode == 0 and ": verified (sha256" in r.stdout and "not_checked" not in r.stdout, r.stdout
    r = cli("bundle", "inspect", tmp_path / "ok.bundle")  # 16 tokens of 512 positions: said, no route to cap it
    assert r.returncode == 0 and "not checked: the engine takes at most 16 tokens" in r.stdout, r.stdout
