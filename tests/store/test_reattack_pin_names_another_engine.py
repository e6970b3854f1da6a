"""A pin (`.trtls/engines/<name>.pin.json`) or a known-good record that names a store key which is not the engine it
describes. A pin is honoured while its `recipeKey` is the recipe's key; it named the key of another project's engine
in the same store (the per-user store holds every project's engines) — damaged, or written by someone who can write
`.trtls` — and `trtls build` restored that other engine to the output, exit 0, "pinned to build demo-… by a
rollback": the pin's own build id, sha256 and size were never compared with what was served. A known-good record
whose key leads to another engine was rolled back to the same way.

Now a pin is served only when it names a known-good build of this table with that key, and only the bytes it pinned
(the entry's sha256 is the pin's); a rollback restores only the bytes its known-good record says. Otherwise TRT338,
nothing restored, the output as it was. Real builds of `demo` in two projects sharing one real store."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

from tests.store.conftest import copy_store
from tests.store.helpers import run_build, summaries, with_store


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _two_projects(seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path) -> tuple[Path, dict, dict]:
    """This project's demo (reused from the seed) and another project's demo of another profile, one store."""
    store = copy_store(seeded, tmp_path)
    with_store(seed_ws, store)
    assert run_build(seed_ws).returncode == 0
    other = tmp_path / "other"
    shutil.copytree(seeded[0].parent / "pristine", other)
    recipe = other / "trtls.toml"
    recipe.write_text(recipe.read_text().replace("max = [8, 3, 32, 32]", "max = [16, 3, 32, 32]", 1))
    with_store(other, store)
    assert run_build(other).returncode == 0
    mine, theirs = summaries(seed_ws)[-1], summaries(other)[-1]
    assert mine["engineKey"] != theirs["engineKey"]
    return seed_ws, mine, theirs


def test_a_pin_naming_another_projects_engine_is_not_served(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    ws, mine, theirs = _two_projects(seeded, seed_ws, tmp_path)
    out = ws / "build" / "demo.engine"
    before = _sha(out)
    known = json.loads((ws / ".trtls" / "engines" / "demo.json").read_text())["builds"][-1]
    pin = {
        "format": "trtls.pin/1",
        "buildId": known["buildId"],  # a build of this table, but the key (and digest) of the other project's engine
        "key": theirs["engineKey"],
        "sha256": theirs["engineArtifact"]["sha256"],
        "size": theirs["engineArtifact"]["size"],
        "recipeKey": mine["engineKey"],
        "startedAt": known.get("startedAt"),
    }
    (ws / ".trtls" / "engines" / "demo.pin.json").write_text(json.dumps(pin))
    done = run_build(ws)
    assert _sha(out) == before, "the other project's engine was restored to this engine's output"
    assert done.returncode != 0 and "TRT338" in done.stdout + done.stderr, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    # the same pin naming this table's own build and key, with a digest the entry does not hold, is refused too
    pin.update(key=known["key"], sha256="0" * 64)
    (ws / ".trtls" / "engines" / "demo.pin.json").write_text(json.dumps(pin))
    again = run_build(ws)
    assert _sha(out) == before and again.returncode != 0 and "TRT338" in again.stdout + again.stderr, again.stdout


def test_a_known_good_record_whose_key_leads_to_another_engine_is_not_rolled_back_to(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    ws, mine, theirs = _two_projects(seeded, seed_ws, tmp_path)
    out = ws / "build" / "demo.engine"
    before = _sha(out)
    record = ws / ".trtls" / "engines" / "demo.json"
    data = json.loads(record.read_text())
    forged = {**data["builds"][-1], "buildId": "demo-20200101-000000-000000", "key": theirs["engineKey"]}
    forged["startedAt"] = 1577836800.0  # older than the engine at the output; its sha256 is still this engine's
    data["builds"].insert(0, forged)
    record.write_text(json.dumps(data))
    done = subprocess.run(
        [sys.executable, "-m", "trtls", "rollback", "demo", str(ws), "--to", forged["buildId"]],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert _sha(out) == before, "a rollback restored the other project's engine"
    assert done.returncode == 1 and "TRT338" in done.stdout + done.stderr, done.stdout + done.stderr
    assert not (ws / ".trtls" / "engines" / "demo.pin.json").exists()


def _rollback(ws: Path, to: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "trtls", "rollback", "demo", str(ws), "--to", to]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def test_another_projects_whole_record_copied_in_is_not_rolled_back_to(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    """The other project's record copied whole — its real key AND sha256, only a new build id (or its own): the
    store's entry matches it byte for byte, so the digest check passed; the rollback restored the other engine,
    called it this engine's build and pinned it. The store entry's publisher (another engine, another recipe) and
    this folder's runs (none built or reused it) do not bear it out: TRT338, nothing restored, no pin. A record with
    no sha256 is not one trtls wrote: refused too (it rolled back, and pinned a null digest)."""
    ws, mine, theirs = _two_projects(seeded, seed_ws, tmp_path)
    out = ws / "build" / "demo.engine"
    before = _sha(out)
    record = ws / ".trtls" / "engines" / "demo.json"
    data = json.loads(record.read_text())
    theirs_record = json.loads((tmp_path / "other" / ".trtls" / "engines" / "demo.json").read_text())["builds"][-1]
    nosha = {k: v for k, v in data["builds"][-1].items() if k != "sha256"} | {"buildId": "demo-20200101-000000-nosha"}
    for forged in (
        {**theirs_record, "buildId": "demo-20200101-000000-aaaaaa"},
        theirs_record,  # its own build id: the entry's publisher is that build, of the other recipe
        nosha,
    ):
        record.write_text(json.dumps({**data, "builds": [forged, *data["builds"]]}))
        done = _rollback(ws, forged["buildId"])
        assert _sha(out) == before, f"a forged record was rolled back to: {forged['buildId']}"
        assert done.returncode == 1 and "TRT338" in done.stdout + done.stderr, done.stdout + done.stderr
        assert "Traceback" not in done.stderr
        assert not (ws / ".trtls" / "engines" / "demo.pin.json").exists()
    # the copied record and a pin to it, written by hand: a build does not serve the other engine either
    forged = {**theirs_record, "buildId": "demo-20200101-000000-aaaaaa"}
    record.write_text(json.dumps({**data, "builds": [forged, *data["builds"]]}))
    pin = {k: forged.get(k) for k in ("buildId", "key", "sha256", "size", "startedAt")}
    (ws / ".trtls" / "engines" / "demo.pin.json").write_text(
        json.dumps({"format": "trtls.pin/1", **pin, "recipeKey": mine["engineKey"]})
    )
    served = run_build(ws)
    assert _sha(out) == before, "a build served the other project's engine through a hand-written pin"
    assert served.returncode != 0 and "TRT338" in served.stdout + served.stderr, served.stdout + served.stderr
    (ws / ".trtls" / "engines" / "demo.pin.json").unlink()
    # this table's own record (a reuse of the seed, published by another checkout's build) still rolls back
    record.write_text(json.dumps(data))
    own = data["builds"][-1]
    assert own.get("restoredAs") and _rollback(ws, own["buildId"]).returncode == 0


def test_a_hostile_build_id_to_roll_back_to_is_said_on_one_escaped_line(seed_ws: Path) -> None:
    """`--to` (or the editor's `to`) is echoed in the refusal: its ESC and BEL reached the editor raw, its newline
    split the terminal's line."""
    done = _rollback(seed_ws, "x\x1b]0;pwn\x07\nFAKE: rolled back")
    assert done.returncode == 1 and "TRT338" in done.stderr, done.stderr
    assert "\x1b" not in done.stderr and "\x07" not in done.stderr and "x\\x1b]0;pwn\\x07\\x0aFAKE" in done.stderr
    assert not any(line.startswith("FAKE") for line in done.stderr.splitlines()), done.stderr
