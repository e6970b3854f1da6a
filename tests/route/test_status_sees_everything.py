"""`trtls route status` sees everything a promotion rests on (issue 29, item 2): the rollback artifact (deleted or
its bytes changed), the checkpoint's content changed without a re-lock (hashed as gate 1 hashes it), and a recipe
pin change said by the key's name. And one CLI dialect for every route command, with an approver that works in CI
(item 8). On the route sample's ONNX Runtime route taken to `supported` for real; each test on its own copy."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from _lifecycle_sample import ROUTE, copy, set_in_route, trtls

ALICE = {"TRTLS_APPROVER": "alice"}


@pytest.fixture
def root(prepared, tmp_path) -> Path:
    return copy(prepared, tmp_path / "route")


def _promote(root: Path) -> dict:
    r = trtls("route", "promote", "--route", ROUTE, "--format", "json", cwd=root, env=ALICE)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)["record"]


def _status(root: Path) -> tuple[int, dict]:
    r = trtls("route", "status", "--route", ROUTE, "--format", "json", cwd=root)
    return r.returncode, json.loads(r.stdout)["routes"][0]


def test_a_deleted_or_changed_rollback_artifact_is_revalidate(root):
    rec = _promote(root)
    assert rec["rested_on"]["rollback_artifact"]["value"] == rec["rollback_artifact"]["digest"]
    assert _status(root)[0] == 0
    artifact = root / "releases" / "tiny_ort-previous.bundle"
    kept = artifact.read_bytes()
    artifact.unlink()
    rc, st = _status(root)
    assert rc == 3 and st["state"] == "revalidate", st
    assert any(r.startswith("rollback artifact releases/tiny_ort-previous.bundle sha256:") and "→ missing" in r
               for r in st["reasons"]), st["reasons"]  # fmt: skip
    artifact.write_bytes(kept[:-1] + bytes([kept[-1] ^ 1]))  # the same name, other bytes
    rc, st = _status(root)
    assert rc == 3 and any("rollback artifact" in r and "→ sha256:" in r for r in st["reasons"]), st["reasons"]
    artifact.write_bytes(kept)
    assert _status(root)[0] == 0


def _readme(root: Path) -> Path:
    return next((root / "checkpoints").rglob("snapshots/*/README.md"))


def test_checkpoint_content_changed_without_a_relock_is_revalidate_and_never_valid_beside_a_reject(root):
    _promote(root)
    readme = _readme(root).resolve()  # the snapshot's link: the blob it names holds the bytes
    readme.write_text(readme.read_text() + "\nedited after review\n")
    rc, st = _status(root)
    assert rc == 3 and st["state"] == "revalidate", st
    (reason,) = [r for r in st["reasons"] if r.startswith("checkpoint content ")]
    assert "not re-locked: changed: README.md" in reason, reason
    # one gates output never says `decision: reject` and `promotion: valid` together
    r = trtls("gates", "--route", ROUTE, "--gate", "1", cwd=root)
    assert r.returncode == 4 and "decision: reject" in r.stdout, r.stdout
    assert "promotion: valid" not in r.stdout and "promotion: revalidate" in r.stdout, r.stdout


def test_a_recipe_pin_change_is_named_by_key(root):
    _promote(root)
    set_in_route(root, 'onnxruntime = "1" }', 'onnxruntime = "1.2" }')
    rc, st = _status(root)
    assert rc == 3
    assert any(
        r.startswith('route table environment.onnxruntime "1" → "1.2" since promotion on') for r in st["reasons"]
    )
    assert not any("route table sha256:" in r for r in st["reasons"]), st["reasons"]


def test_every_route_command_takes_recipe_and_route_and_the_old_form_says_it_is_deprecated(root):
    folder = str(root)
    r = trtls("route", "promote", folder, "--route", ROUTE, cwd=root.parent, env=ALICE)
    assert r.returncode == 0 and r.stderr == "", r.stdout + r.stderr
    r = trtls("route", "canary", folder, "--route", ROUTE, "start", cwd=root.parent, env=ALICE)
    assert r.returncode == 0 and r.stderr == "", r.stdout + r.stderr
    r = trtls("route", "status", folder, "--route", ROUTE, cwd=root.parent)
    assert r.returncode == 0 and "canary running" in r.stdout and r.stderr == "", r.stdout + r.stderr
    # the old dialect still works, with one line on stderr naming the new form
    r = trtls("route", "status", ROUTE, "--recipe", folder, cwd=root.parent)
    assert r.returncode == 0 and "valid: bundle" in r.stdout
    (note,) = r.stderr.splitlines()
    assert "deprecated" in note and f"trtls route status {folder} --route {ROUTE}" in note, note
    r = trtls(
        "route", "canary", ROUTE, "fail", "--figure", "p95_ms=70", "--figure", "error_rate=2", cwd=root, env=ALICE
    )
    assert r.returncode == 0 and "deprecated" in r.stderr and f"trtls route rollback --route {ROUTE}" in r.stdout
    r = trtls("route", "rollback", "--route", ROUTE, "--reason", "canary failed", cwd=root, env=ALICE)
    assert r.returncode == 0 and r.stderr == "", r.stdout + r.stderr


def test_the_approver_comes_from_git_when_nothing_else_names_one_and_the_refusal_says_how(root):
    r = trtls("route", "promote", "--route", ROUTE, cwd=root)  # no --approver, $TRTLS_APPROVER, user.email or $USER
    assert r.returncode == 3, r.stdout + r.stderr
    assert "--approver NAME" in r.stdout and "TRTLS_APPROVER=NAME" in r.stdout and "git config user.email" in r.stdout
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    subprocess.run(["git", "-C", str(root), "config", "user.email", "ci-bot@example.com"], check=True)
    r = trtls("route", "promote", "--route", ROUTE, "--format", "json", cwd=root, env={"USER": "someone"})
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(r.stdout)["record"]["approver"] == "ci-bot@example.com"  # git's user.email before $USER
