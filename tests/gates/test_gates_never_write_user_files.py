"""The gates never write what the user owns: a SIGKILL at any point of a gates run leaves every file of the recipe
folder (outside trtls's own `.trtls/`) byte-identical, with the same mode and inode, and no temp file left beside
them; and no file outside the recipe folder is read through a symlink or `../` without being refused.

Real CLI runs of the sample's ONNX Runtime route (real route build, onnxruntime child processes), killed with
SIGKILL at random points of a full run (the points are drawn over the length of one uninterrupted run measured
in this test, so nothing depends on the machine's speed).
"""

from __future__ import annotations

import hashlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_route_build import copy_sample, fresh_sample, trtls

KILLS = 8


def user_files(root: Path) -> dict[str, tuple[str, int, int]]:
    """rel path → (sha256, mode, inode) of every file the user owns (all but trtls's own .trtls/ state)."""
    out: dict[str, tuple[str, int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not (Path(dirpath) == root and d == ".trtls")]
        for name in filenames:
            p = Path(dirpath) / name
            st = os.lstat(p)
            data = os.readlink(p).encode() if p.is_symlink() else p.read_bytes()
            out[p.relative_to(root).as_posix()] = (hashlib.sha256(data).hexdigest(), st.st_mode, st.st_ino)
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = fresh_sample(tmp_path_factory.mktemp("kill") / "route")
    for args in (
        ("route", "lock", "--route", "tiny_ort"),
        ("route", "build", "--route", "tiny_ort"),
        ("route", "build", "--route", "tiny_ort"),
    ):
        r = trtls(*args, cwd=root)
        assert r.returncode == 0, r.stdout + r.stderr
    return root


def _gates(root: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "trtls.cli.main", "gates", "--route", "tiny_ort"],
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its runtime children are in its group: kill them all at once
    )


def test_sigkill_anywhere_leaves_every_user_file_identical(built: Path, tmp_path: Path) -> None:
    root = copy_sample(built, tmp_path / "route")
    before = user_files(root)
    t0 = time.monotonic()
    full = _gates(root)
    assert full.wait(timeout=900) in (0, 3, 4)
    length = time.monotonic() - t0
    assert user_files(root) == before, "a complete gates run changed a user file"
    rng = random.Random(11)
    for k in range(KILLS):
        proc = _gates(root)
        point = rng.uniform(0.05, 0.95) * length
        try:
            proc.wait(timeout=point)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=60)
        after = user_files(root)
        changed = {rel for rel in set(before) | set(after) if before.get(rel) != after.get(rel)}
        assert not changed, f"kill {k} at {point:.2f} s of {length:.2f} s changed or left: {sorted(changed)}"


def test_paths_out_of_the_recipe_folder_are_refused(built: Path, tmp_path: Path) -> None:
    root = copy_sample(built, tmp_path / "route")
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "previous.bundle"
    secret.write_bytes((root / "releases" / "tiny_ort-previous.bundle").read_bytes())
    secret.chmod(0o600)
    text = (root / "trtls.toml").read_text()
    link = root / "releases" / "linked.bundle"
    link.symlink_to(secret)
    for target in ("releases/linked.bundle", "../outside/previous.bundle"):
        (root / "trtls.toml").write_text(
            text.replace('previous_bundle = "releases/tiny_ort-previous.bundle"', f'previous_bundle = "{target}"')
        )
        r = trtls("gates", "--route", "tiny_ort", "--format", "json", cwd=root)
        assert r.returncode in (3, 4), r.stdout[-2000:] + r.stderr[-2000:]
        assert "outside the recipe folder" in r.stdout, target
        st = secret.stat()
        assert (st.st_mode & 0o777) == 0o600


def test_a_bundle_outside_the_recipe_folder_is_never_read(built: Path, tmp_path: Path) -> None:
    import json

    root = copy_sample(built, tmp_path / "route")
    outside = tmp_path / "elsewhere.bundle"
    outside.write_bytes((root / "build" / "tiny_ort.bundle").read_bytes())
    (root / "build" / "linked.bundle").symlink_to(outside)
    text = (root / "trtls.toml").read_text()
    anchor = 'bundle = "build/tiny_ort.bundle"\nruntime = "onnxruntime"\nreference = "checkpoint"\nreference_inputs'
    assert text.count(anchor) == 1
    (root / "trtls.toml").write_text(text.replace(anchor, anchor.replace("tiny_ort.bundle", "linked.bundle")))
    r = trtls("gates", "--route", "tiny_ort", "--format", "json", cwd=root)
    s = json.loads(r.stdout)
    three = s["gates"]["3"]["checks"]
    assert [(c["name"], c["status"], c["code"]) for c in three] == [("bundle.paths", "hold", "TRT709")]
    assert "outside the recipe folder" in three[0]["message"] and s["bundle_digest"] is None
    deployed = next(c for c in s["gates"]["4"]["checks"] if c["name"] == "parity.deployed_artifact")
    assert deployed["status"] == "hold" and "outside the recipe folder" in deployed["message"]


def test_a_truncated_bundle_gets_no_canary_or_rollback_verdict(built: Path, tmp_path: Path) -> None:
    """Canary and rollback are measured on the bundle's artifact; when gate 3 fails they are not_run (once, a
    truncated bundle read `reject · canary pass · rollback tested`: they had run on the recipe's model.onnx)."""
    import json

    root = copy_sample(built, tmp_path / "route")
    bundle = root / "build" / "tiny_ort.bundle"
    bundle.write_bytes(bundle.read_bytes()[:-100])
    r = trtls("gates", "--route", "tiny_ort", "--format", "json", cwd=root)
    assert r.returncode == 4, r.stderr
    s = json.loads(r.stdout)
    assert s["gates"]["3"]["status"] == "reject"
    assert s["canary_inputs_status"] == "not_run" and s["rollback_status"] == "not_run"
    five = {c["name"]: c for c in s["gates"]["5"]["checks"]}
    assert five["release.canary"]["status"] == five["release.rollback"]["status"] == "not_checked"
    # gate 4 had nothing deployed to run: never the recipe's ONNX in its place
    four = {c["name"]: c for c in s["gates"]["4"]["checks"]}
    assert four["parity.deployed_artifact"]["status"] == "hold" and "parity.tolerance:logits" not in four


@pytest.mark.parametrize("what", ["missing", "directory", "fifo", "truncated", "good"])
def test_bundle_inspect_and_verify_exit_codes(built: Path, tmp_path: Path, what: str) -> None:
    good = built / "build" / "tiny_ort.bundle"
    path = tmp_path / "x.bundle"
    if what == "directory":
        path.mkdir()
    elif what == "fifo":
        os.mkfifo(path)
    elif what == "truncated":
        path.write_bytes(good.read_bytes()[:-100])
    elif what == "good":
        path = good
    expected = {"missing": 2, "directory": 2, "fifo": 2, "truncated": 4, "good": 0}[what]
    for command in ("inspect", "verify"):
        r = trtls("bundle", command, str(path), cwd=tmp_path, timeout=60)
        assert r.returncode == expected, (command, what, r.stdout, r.stderr)
        if expected:
            assert str(path) in r.stderr and ("unreadable" in r.stderr or "verification FAILED" in r.stderr)
