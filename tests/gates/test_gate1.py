from __future__ import annotations

import json
import os
import time

import pytest
from _route_helpers import by_name, checkpoint_files, load, make_cache, make_folder, route_table, write_recipe

from trtls.checkpoint.lock import LockError, lock_route
from trtls.core.gate_result import decide
from trtls.core.route import route_model
from trtls.gates.source import LOCK_NAME, check_checkpoint, resolve_layout

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _run(tmp_path, path="ck", revision=COMMIT, name="r", id=None, extra="", lock=False, **kw):
    loaded = load(write_recipe(tmp_path, route_table(path, revision, name=name, id=id, extra=extra)))
    if lock:  # what `trtls route lock` does after a review
        lock_route(loaded, name)
    return check_checkpoint(loaded, name, route_model(loaded, name), **kw)


def test_gates_never_write_the_lock_a_missing_entry_holds(tmp_path):
    make_folder(tmp_path / "ck", checkpoint_files())
    res = _run(tmp_path)
    c = by_name(res.checks, "lock")
    assert (c.status, c.code) == ("hold", "TRT512") and c.evidence["missing"] is True
    assert "trtls route lock --route r" in c.message
    assert not (tmp_path / LOCK_NAME).exists()  # no trust on first use
    assert decide(res.checks) == "hold"


def test_plain_folder_revision_is_not_checked_until_waived(tmp_path):
    make_folder(tmp_path / "ck", checkpoint_files())
    c = by_name(_run(tmp_path, lock=True).checks, "revision_verified")
    assert (c.status, c.code) == ("not_checked", "TRT513") and "records no commit" in c.message
    root, _ = make_cache(tmp_path / "models--org--tiny", checkpoint_files(), COMMIT)
    c = by_name(
        _run(tmp_path, path="models--org--tiny", id="org/tiny", name="c", lock=True).checks, "revision_verified"
    )
    assert c.status == "pass" and COMMIT in c.message


def test_route_lock_refuses_an_unpinned_revision(tmp_path):
    make_folder(tmp_path / "ck", checkpoint_files())
    loaded = load(write_recipe(tmp_path, route_table("ck", "main")))
    import pytest

    with pytest.raises(LockError, match="not a pinned commit"):
        lock_route(loaded, "r")
    assert not (tmp_path / LOCK_NAME).exists()


def test_clean_local_folder_passes_once_locked(tmp_path):
    make_folder(tmp_path / "ck", checkpoint_files())
    res = _run(tmp_path, lock=True)
    unproven = [(c.name, c.status) for c in res.checks if c.status != "pass"]
    assert unproven == [("revision_verified", "not_checked")]  # a plain folder: only a waiver lifts it
    lock = json.loads((tmp_path / LOCK_NAME).read_text())
    files = lock["routes"]["r"]["files"]
    assert set(files) == {"config.json", "model.safetensors", "tokenizer.json", "README.md"}
    import hashlib

    assert files["config.json"]["sha256"] == hashlib.sha256((tmp_path / "ck" / "config.json").read_bytes()).hexdigest()
    assert res.record["license"] == "apache-2.0"


def test_branch_revision_holds_with_the_snapshot_commit_as_quick_fix(tmp_path):
    root, commit = make_cache(tmp_path / "models--org--tiny", checkpoint_files(), COMMIT)
    res = _run(tmp_path, path="models--org--tiny", revision="main", id="org/tiny")
    c = by_name(res.checks, "revision_pinned")
    assert c.status == "hold" and c.code == "TRT501"
    assert c.evidence["commit"] == commit
    assert c.path == ("routes", "r", "checkpoint", "revision")
    assert c.finding().data["quick_fix"]["replace_value"] == commit
    assert decide(res.checks) == "hold"


def test_snapshot_layout_resolves_and_id_mismatch_rejects(tmp_path):
    make_cache(tmp_path / "models--org--tiny", checkpoint_files(), COMMIT)
    lay = resolve_layout(tmp_path / "models--org--tiny" / "snapshots" / COMMIT, COMMIT, None)
    assert lay.kind == "hf_cache" and lay.commit == COMMIT and lay.refs == {"main": COMMIT}
    res = _run(tmp_path, path="models--org--tiny", id="org/other")
    assert by_name(res.checks, "layout").status == "reject"
    # a pinned commit that is not the snapshot pointed at contradicts the layout
    res = _run(tmp_path, path=f"models--org--tiny/snapshots/{COMMIT}", revision="f" * 40)
    assert by_name(res.checks, "layout").status == "reject"


def test_missing_licence_holds_and_disallowed_licence_rejects(tmp_path):
    make_folder(tmp_path / "ck", checkpoint_files(license=None))
    res = _run(tmp_path)
    c = by_name(res.checks, "license")
    assert (c.status, c.code) == ("hold", "TRT506")
    make_folder(tmp_path / "ck2", checkpoint_files(license="cc-by-nc-4.0"))
    res = _run(tmp_path, path="ck2", name="r2")
    c = by_name(res.checks, "license")
    assert (c.status, c.code) == ("reject", "TRT507") and "cc-by-nc-4.0" in c.message


def test_missing_model_card_holds(tmp_path):
    files = checkpoint_files()
    del files["README.md"]
    make_folder(tmp_path / "ck", files)
    res = _run(tmp_path)
    assert by_name(res.checks, "model_card").status == "hold"


def test_remote_code_holds_naming_files_and_is_never_run(tmp_path):
    marker = tmp_path / "ran"
    code = f"open({str(marker)!r}, 'w').write('x')\n".encode()
    files = checkpoint_files(
        extra={
            "modeling_tiny.py": code,
            "config.json": json.dumps({"auto_map": {"AutoModel": "modeling_tiny.Tiny"}}).encode(),
        }
    )
    make_folder(tmp_path / "ck", files)
    res = _run(tmp_path)
    c = by_name(res.checks, "remote_code")
    assert c.status == "hold" and "modeling_tiny.py" in c.message and "auto_map" in c.message
    assert not marker.exists()


@pytest.mark.parametrize(
    "config",
    [
        {"trust_remote_code": 1},
        {"trust_remote_code": "yes"},
        {"text_config": {"auto_map": {"AutoModel": "m.M"}}},  # a multimodal model's sub-config loads code too
        {"vision_config": {"trust_remote_code": True}},
    ],
)
def test_remote_code_in_any_form_or_place_of_a_config_holds(tmp_path, config):
    """`trust_remote_code` not literally `true`, or an `auto_map` in a sub-config, passed as "no remote code"."""
    make_folder(tmp_path / "ck", checkpoint_files(extra={"config.json": json.dumps(config).encode()}))
    c = by_name(_run(tmp_path).checks, "remote_code")
    assert c.status == "hold", c.message
    assert ("auto_map" in c.message) or ("trust_remote_code" in c.message), c.message


def test_remote_code_false_or_absent_passes(tmp_path):
    make_folder(tmp_path / "ck", checkpoint_files(extra={"config.json": b'{"trust_remote_code": false}'}))
    assert by_name(_run(tmp_path).checks, "remote_code").status == "pass"


def test_pickle_weights_reject_unless_allowed_and_are_never_unpickled(tmp_path):
    import pickle

    class Boom:
        def __reduce__(self):
            return (open, (str(tmp_path / "unpickled"), "w"))

    make_folder(tmp_path / "ck", checkpoint_files(extra={"pytorch_model.bin": pickle.dumps(Boom())}))
    res = _run(tmp_path)
    c = by_name(res.checks, "pickle")
    assert (c.status, c.code) == ("reject", "TRT509") and "pytorch_model.bin" in c.message
    assert decide(res.checks) == "reject"
    res = _run(tmp_path, name="r2", extra="allow_pickle = true\n")
    assert by_name(res.checks, "pickle").status == "pass"
    assert not (tmp_path / "unpickled").exists()


def test_missing_tokenizer_holds(tmp_path):
    files = checkpoint_files()
    del files["tokenizer.json"]
    make_folder(tmp_path / "ck", files)
    assert by_name(_run(tmp_path).checks, "tokenizer").status == "hold"


def test_symlink_out_of_the_checkpoint_rejects(tmp_path):
    make_folder(tmp_path / "ck", checkpoint_files())
    secret = tmp_path / "secret.txt"
    secret.write_text("outside")
    os.symlink(secret, tmp_path / "ck" / "notes.txt")
    res = _run(tmp_path)
    c = by_name(res.checks, "contained")
    assert (c.status, c.code) == ("reject", "TRT503") and "notes.txt" in c.message
    assert "notes.txt" not in res.files  # never hashed, never followed


def test_malformed_safetensors_rejects(tmp_path):
    files = checkpoint_files()
    files["model.safetensors"] = files["model.safetensors"][:-7]
    make_folder(tmp_path / "ck", files)
    c = by_name(_run(tmp_path).checks, "weights")
    assert (c.status, c.code) == ("reject", "TRT510")


def test_tampered_cache_blob_rejects_on_first_run(tmp_path):
    root, _ = make_cache(tmp_path / "models--org--tiny", checkpoint_files(), COMMIT)
    blob = (root / "snapshots" / COMMIT / "model.safetensors").resolve()
    data = bytearray(blob.read_bytes())
    data[-1] ^= 0xFF
    blob.write_bytes(bytes(data))
    c = by_name(_run(tmp_path, path="models--org--tiny").checks, "weights")
    assert c.status == "reject" and "blob name" in c.message


def _age(path):
    old = time.time_ns() - 10_000_000_000
    os.utime(path, ns=(old, old))


def test_drift_changed_rejects_added_holds_removed_rejects(tmp_path):
    ck = make_folder(tmp_path / "ck", checkpoint_files())
    for p in ck.iterdir():
        _age(p)  # old enough to be cached: drift must still be seen through the digest cache
    assert by_name(_run(tmp_path, lock=True).checks, "lock").status == "pass"
    assert (tmp_path / ".trtls" / "digests.json").is_file()
    # unchanged: second run matches the lock (from the cache)
    assert by_name(_run(tmp_path).checks, "lock").message.startswith("all 4 files match")
    # tamper with the weights (same size)
    w = ck / "model.safetensors"
    data = bytearray(w.read_bytes())
    data[-1] ^= 0x01
    w.write_bytes(bytes(data))
    c = by_name(_run(tmp_path).checks, "lock")
    assert c.status == "reject" and c.evidence["changed"] == ["model.safetensors"]
    data[-1] ^= 0x01
    w.write_bytes(bytes(data))
    (ck / "extra.txt").write_text("new")
    c = by_name(_run(tmp_path).checks, "lock")
    assert c.status == "hold" and c.evidence["added"] == ["extra.txt"]
    (ck / "extra.txt").unlink()
    (ck / "tokenizer.json").unlink()
    c = by_name(_run(tmp_path).checks, "lock")
    assert c.status == "reject" and c.evidence["removed"] == ["tokenizer.json"]
    c = by_name(_run(tmp_path, lock=True).checks, "lock")
    assert c.status == "pass" and "match" in c.message
    assert by_name(_run(tmp_path).checks, "lock").status == "pass"


def test_lock_for_another_revision_holds(tmp_path):
    make_folder(tmp_path / "ck", checkpoint_files())
    _run(tmp_path, lock=True)
    c = by_name(_run(tmp_path, revision="b" * 40).checks, "lock")
    assert c.status == "hold" and COMMIT in c.message


def test_pickle_found_by_content_under_any_name(tmp_path):
    import gzip
    import pickle
    import zipfile

    payload = pickle.dumps({"w": [1.0, 2.0]}, protocol=4)
    extra = {"scaler.joblib": payload, "notes/data.dat": gzip.compress(payload)}
    make_folder(tmp_path / "ck", checkpoint_files(extra=extra))
    with zipfile.ZipFile(tmp_path / "ck" / "model.ckpt", "w") as z:
        z.writestr("archive/data.pkl", payload)
    c = by_name(_run(tmp_path).checks, "pickle")
    assert (c.status, c.code) == ("reject", "TRT509")
    assert c.evidence["files"] == ["model.ckpt", "notes/data.dat", "scaler.joblib"]
    assert "zip member archive/data.pkl" in c.message and "gzip stream" in c.message


def test_lying_safetensors_header_is_a_located_reject(tmp_path):
    import struct

    header = json.dumps(
        {
            "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
            "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]},
            "c": {"dtype": "Q7", "shape": [1], "data_offsets": [12, 13]},
        }
    ).encode()
    files = checkpoint_files(extra={"model.safetensors": struct.pack("<Q", len(header)) + header + b"\0" * 13})
    make_folder(tmp_path / "ck", files)
    c = by_name(_run(tmp_path).checks, "weights")
    assert (c.status, c.code) == ("reject", "TRT510") and c.path == ("routes", "r", "checkpoint", "path")
    assert "overlap" in c.message and "unknown dtype 'Q7'" in c.message
