"""The engine key over files a user links and a `.trtls` that cannot be written (issue 27, items 18 and 19).

A Hugging Face cache keeps a model's files as links into `blobs/` (`external.onnx.data -> ../../blobs/<sha>`): the
builder reads where they lead, so the key hashes that file (it used to crash on `Too many levels of symbolic links`,
`--no-store` too). The key's caches in `.trtls` (the digest cache, `onnx-external.json`) are only caches: a full disk
or a link planted at one costs a re-read, never the key and never a traceback, and nothing is written through the
link. A known-good record that is a link is not read, and not written through (a TRT118 warning)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from tests.store.forged import can_unshare_mounts, run_python
from tests.store.helpers import run_build, summaries
from trtls.store.key import engine_key
from trtls.store.known_good import KnownGood

PROFILE = '[[engines.demo.profiles]]\ninput = "x"\nmin = [1, 256]\nopt = [2, 256]\nmax = [4, 256]\n'


def hf_cache(sample_models: Path, root: Path) -> Path:
    """The sample's `external.onnx` laid out as the Hugging Face hub caches it: the model and its data are links
    from `snapshots/<rev>/` to `blobs/<sha256>`. Returns the snapshot's model path."""
    blobs = root / "hub" / "blobs"
    snap = root / "hub" / "snapshots" / "0123abc"
    blobs.mkdir(parents=True)
    snap.mkdir(parents=True)
    for name in ("external.onnx", "external.onnx.data"):
        data = (sample_models / name).read_bytes()
        blob = blobs / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snap / name).symlink_to(Path("..") / ".." / "blobs" / blob.name)
    return snap / "external.onnx"


def job(onnx: Path) -> dict:
    return {"onnx": str(onnx), "settings": {}, "profiles": [], "builder_module": "auto"}


def test_the_key_follows_external_data_linked_into_a_cache(sample_models: Path, tmp_path: Path) -> None:
    linked = hf_cache(sample_models, tmp_path)
    plain = tmp_path / "plain"
    plain.mkdir()
    for name in ("external.onnx", "external.onnx.data"):
        shutil.copyfile(sample_models / name, plain / name)
    (tmp_path / "a" / ".trtls").mkdir(parents=True)
    (tmp_path / "b" / ".trtls").mkdir(parents=True)
    through_links = engine_key(job(linked), tmp_path / "a" / ".trtls")
    copied = engine_key(job(plain / "external.onnx"), tmp_path / "b" / ".trtls")
    assert through_links.hex == copied.hex  # the same bytes: the same key, wherever the links lead
    assert through_links.parts["files"]["external"] == {"external.onnx.data": copied.parts["files"]["external"][
        "external.onnx.data"]}  # fmt: skip
    blob = (linked.parent / "external.onnx.data").resolve()
    blob.write_bytes(blob.read_bytes()[:-4] + b"\0\0\0\1")  # the weights change in the cache
    assert engine_key(job(linked), tmp_path / "a" / ".trtls").hex != through_links.hex


def test_a_build_of_a_model_linked_into_a_cache_runs_with_no_store(sample_models: Path, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    model = hf_cache(sample_models, ws)
    rel = model.relative_to(ws)
    (ws / "trtls.toml").write_text(f'[engines.demo]\nonnx = "{rel}"\noutput = "build/demo.engine"\n\n{PROFILE}')
    done = run_build(ws, "--no-store")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    (s,) = summaries(ws)
    assert s["outcome"] == "built" and (ws / "build" / "demo.engine").is_file()


def test_caches_in_a_trtls_that_are_links_are_not_written_through(sample_models: Path, tmp_path: Path) -> None:
    state = tmp_path / "ws" / ".trtls"
    state.mkdir(parents=True)
    victims = {}
    for name in ("onnx-external.json", "digests.json"):
        victim = tmp_path / f"victim-{name}"
        victim.write_text("someone's file")
        (state / name).symlink_to(victim)
        victims[name] = victim
    model = tmp_path / "model"
    model.mkdir()
    for name in ("external.onnx", "external.onnx.data"):
        shutil.copyfile(sample_models / name, model / name)
    key = engine_key(job(model / "external.onnx"), state)
    assert all(v.read_text() == "someone's file" for v in victims.values())
    assert any("onnx-external.json" in note and "symlink" in note for note in key.notes), key.notes
    (tmp_path / "plain" / ".trtls").mkdir(parents=True)
    assert key.hex == engine_key(job(model / "external.onnx"), tmp_path / "plain" / ".trtls").hex


FULL = """
import json, subprocess, sys
from pathlib import Path
from trtls.store.key import engine_key
state, model = Path(sys.argv[1]), sys.argv[2]
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(state)], check=True)
filler = state / "filler"
try:
    with open(filler, "wb") as fh:
        while True:
            fh.write(b"x" * 512)
            fh.flush()
except OSError:
    pass
key = engine_key({"onnx": model, "settings": {}, "profiles": [], "builder_module": "auto"}, state)
print(json.dumps({"key": key.hex, "notes": key.notes}))
"""


def test_a_full_trtls_costs_the_key_nothing(sample_models: Path, tmp_path: Path) -> None:
    if not can_unshare_mounts():
        pytest.skip("no private mount namespace here (unshare -m needs root)")
    model = tmp_path / "model"
    model.mkdir()
    for name in ("external.onnx", "external.onnx.data"):
        shutil.copyfile(sample_models / name, model / name)
    state = tmp_path / "ws" / ".trtls"
    state.mkdir(parents=True)
    done = run_python(FULL, str(state), str(model / "external.onnx"), unshare=True)
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    (tmp_path / "plain" / ".trtls").mkdir(parents=True)
    assert said["key"] == engine_key(job(model / "external.onnx"), tmp_path / "plain" / ".trtls").hex
    assert any("onnx-external.json" in n and "No space left" in n for n in said["notes"]), said["notes"]


def test_a_known_good_record_that_is_a_link_is_neither_read_nor_written_through(tmp_path: Path) -> None:
    state = tmp_path / "ws" / ".trtls"
    (state / "engines").mkdir(parents=True)
    victim = tmp_path / "victim.json"
    victim.write_text(json.dumps({"format": "trtls.known-good/1", "builds": [{"buildId": "x", "key": "a" * 64}]}))
    (state / "engines" / "demo.json").symlink_to(victim)
    known = KnownGood(state, "demo")
    assert known.records() == [] and known.problem is not None and "symlink" in known.problem
    said = known.append({"buildId": "b", "key": "b" * 64})
    assert said is not None and said.startswith("TRT118") and "demo.json" in said
    assert json.loads(victim.read_text())["builds"] == [{"buildId": "x", "key": "a" * 64}]
