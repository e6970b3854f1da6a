"""The door's primitives on real files, symlinks, FIFOs and devices (issue 27): what each refuses, and that a
refusal changes nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from trtls import fs
from trtls.fs import Kind, UnsafeWrite
from trtls.fs.kill import NONCE_ENV, ProcessProof, process_start_id


def test_atomic_write_replaces_inside_and_refuses_a_final_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "outside.txt"
    victim.write_text("precious")
    root = tmp_path / "root"
    root.mkdir()
    fs.atomic_write_text(root / "a.json", "{}", kind=Kind.evidence, within=root)
    assert (root / "a.json").read_text() == "{}"
    (root / "link.json").symlink_to(victim)
    with pytest.raises(UnsafeWrite, match="symlink"):
        fs.atomic_write_text(root / "link.json", "{}", kind=Kind.evidence, within=root)
    assert victim.read_text() == "precious"


def test_a_folder_that_leads_out_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    root.mkdir()
    (root / "runs").symlink_to(outside)
    with pytest.raises(UnsafeWrite, match="outside"):
        fs.atomic_write_text(root / "runs" / "x.json", "{}", kind=Kind.evidence, within=root)
    with pytest.raises(UnsafeWrite):
        fs.ensure_folder(root / "runs" / "deeper", within=root)
    assert list(outside.iterdir()) == []


def test_report_replaces_only_a_report_trtls_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file's format proves nothing (`-o LICENSE`, `-o package.json` were replaced as "text" and "JSON"): only a
    report the ledger recorded, unchanged since, or an empty file is replaced."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    (tmp_path / "trtls.toml").write_text('[engines.demo]\nonnx = "m.onnx"\n')
    (tmp_path / "LICENSE").write_text("MIT License\n")
    (tmp_path / "package.json").write_text('{"name": "myapp"}')
    for name in ("trtls.toml", "LICENSE", "package.json"):
        before = (tmp_path / name).read_bytes()
        with pytest.raises(UnsafeWrite, match="not a report trtls wrote"):
            fs.write_report(tmp_path / name, "{}", within=tmp_path)
        assert (tmp_path / name).read_bytes() == before
    (tmp_path / "empty.json").write_text("")
    fs.write_report(tmp_path / "empty.json", '{"a": 1}', within=tmp_path)  # an empty file: nothing to lose
    fs.write_report(tmp_path / "empty.json", '{"b": 2}', within=tmp_path)  # the report trtls wrote: recorded
    assert (tmp_path / "empty.json").read_text() == '{"b": 2}'
    (tmp_path / "empty.json").write_text('{"b": 2, "mine": true}')  # edited since: the person's now
    with pytest.raises(UnsafeWrite, match="not a report trtls wrote"):
        fs.write_report(tmp_path / "empty.json", '{"c": 3}', within=tmp_path)
    assert "mine" in (tmp_path / "empty.json").read_text()
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "other-cache"))  # another account's record: not this one's
    fs.write_report(tmp_path / "new.txt", "one\n", within=tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with pytest.raises(UnsafeWrite, match="not a report trtls wrote"):
        fs.write_report(tmp_path / "new.txt", "two\n", within=tmp_path)


def test_deletes_take_only_names_trtls_makes_and_never_through_a_link(tmp_path: Path) -> None:
    user = tmp_path / "notes.txt"
    user.write_text("mine")
    with pytest.raises(UnsafeWrite, match="not a name trtls makes"):
        fs.remove_file(user, kind=Kind.store_entry, within=tmp_path)
    assert user.exists()
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("x")
    key = "a" * 64
    (tmp_path / key).symlink_to(outside)
    with pytest.raises(UnsafeWrite, match="symlink"):
        fs.remove_tree(tmp_path / key, kind=Kind.store_entry, within=tmp_path)
    assert (outside / "keep").exists()
    sweep = tmp_path / "tmp"
    sweep.mkdir()
    (sweep / "tmp-old").write_text("x")
    with pytest.raises(UnsafeWrite, match="not made by trtls"):
        fs.remove_file(sweep / "tmp-old", kind=Kind.store_entry, within=tmp_path, owned=True)
    fs.ensure_folder(sweep, within=tmp_path, mark="store tmp")
    assert fs.remove_file(sweep / "tmp-old", kind=Kind.store_entry, within=tmp_path, owned=True)


def test_tree_removal_does_not_follow_links_inside(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep").write_text("x")
    run = tmp_path / "runs" / "20261202-1"
    run.mkdir(parents=True)
    (run / "inner").symlink_to(outside)
    assert fs.remove_tree(run, kind=Kind.evidence, within=tmp_path)
    assert (outside / "keep").read_text() == "x" and not run.exists()


def test_reads_refuse_fifos_devices_links_and_oversize(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(UnsafeWrite, match="not a regular file"):
        fs.read_bytes(fifo, limit=10)  # would hang without O_NONBLOCK + fstat
    with pytest.raises(UnsafeWrite, match="not a regular file"):
        fs.read_bytes("/dev/zero", limit=10, follow=True)
    big = tmp_path / "big"
    big.write_bytes(b"x" * 100)
    with pytest.raises(fs.TooLarge):
        fs.read_bytes(big, limit=10)
    with pytest.raises(fs.TooLarge):
        fs.read_bytes(big, limit=None, expected=99)
    (tmp_path / "link").symlink_to(big)
    with pytest.raises(UnsafeWrite, match="symlink"):
        fs.read_bytes(tmp_path / "link", limit=1000)
    assert fs.read_bytes(tmp_path / "link", limit=1000, follow=True) == b"x" * 100


def test_lock_file_never_opens_through_a_link(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "locks").mkdir()
    (tmp_path / "locks" / ("b" * 64 + ".lock")).symlink_to(victim)
    with pytest.raises(UnsafeWrite, match="symlink"):
        fs.open_lock_file(tmp_path / "locks" / ("b" * 64 + ".lock"), kind=Kind.store_lock, within=tmp_path)
    assert victim.read_text() == "precious"


def test_a_planted_record_cannot_make_trtls_signal_a_stranger() -> None:
    stranger = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        proof = ProcessProof(stranger.pid, process_start_id(stranger.pid), "f" * 32)
        why = fs.signal_proven(proof, signal.SIGKILL)
        assert why is not None and "nonce" in why
        assert stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()
    env = {**os.environ, NONCE_ENV: "a" * 32}
    ours = subprocess.Popen(
        [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(30)"], env=env, stdout=subprocess.PIPE
    )
    try:
        assert ours.stdout is not None and ours.stdout.readline() == b"up\n"  # running its own program, env included
        assert fs.signal_proven(ProcessProof(ours.pid, process_start_id(ours.pid), "a" * 32), signal.SIGKILL) is None
        assert ours.wait(10) == -signal.SIGKILL
    finally:
        if ours.poll() is None:
            ours.kill()
