"""Issue 32 item 8: a rollback that sticks. Three real builds of `demo` (the seeded engine, then two larger profile
maxima); `trtls rollback` goes further back each time, pins what it restored, and the next `trtls build` (whose fast
path would otherwise restore the recipe's engine) serves the pin until the recipe's key changes or `--unpin`.
`trtls engines` marks the pinned build and an evicted one; the lens says pinned, or in the store for a reverted
change."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

from tests.builds.helpers import loaded
from tests.store.conftest import copy_store
from tests.store.helpers import run_build, summaries, with_store
from trtls.builds.avoidance.freshness import build_lens_title, engine_freshness

MAX_A, MAX_B, MAX_C = "max = [8, 3, 32, 32]", "max = [16, 3, 32, 32]", "max = [32, 3, 32, 32]"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def trtls(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trtls", *args], capture_output=True, text=True, timeout=300)


def set_max(ws: Path, old: str, new: str) -> None:
    recipe = ws / "trtls.toml"
    text = recipe.read_text()
    assert old in text
    recipe.write_text(text.replace(old, new, 1))


def test_rollback_goes_back_and_sticks_until_the_recipe_changes_or_unpin(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    store = copy_store(seeded, tmp_path)
    with_store(seed_ws, store)
    out = seed_ws / "build" / "demo.engine"
    builds = []
    for old, new in ((None, None), (MAX_A, MAX_B), (MAX_B, MAX_C)):
        if old is not None:
            set_max(seed_ws, old, new)
        done = run_build(seed_ws)
        assert done.returncode == 0, done.stderr
        builds.append(summaries(seed_ws)[-1])
    a, b, c = builds
    assert a["outcome"] == "reused" and b["outcome"] == c["outcome"] == "built"
    ids = [a["reusedFrom"]["buildId"], b["buildId"], c["buildId"]]
    shas = [s["engineArtifact"]["sha256"] for s in builds]
    assert len(set(shas)) == 3 and sha(out) == shas[2]

    back = trtls("rollback", "demo", str(seed_ws))  # C at the output → B
    assert back.returncode == 0, back.stderr
    assert f"rolled back to the engine of build {ids[1]}" in back.stdout and "pinned" in back.stdout
    assert sha(out) == shas[1]
    further = trtls("rollback", "demo", str(seed_ws))  # B at the output → A: further back, never forward to C
    assert further.returncode == 0, further.stderr
    assert f"rolled back to the engine of build {ids[0]}" in further.stdout, further.stdout
    assert sha(out) == shas[0]
    rolled = summaries(seed_ws)[-1]
    assert rolled["outcome"] == "rolled_back" and rolled["pinned"]["buildId"] == ids[0]
    assert rolled["pinned"]["recipeKey"] == c["engineKey"] and rolled["pinned"]["by"]["via"] == "trtls rollback"

    fresh = engine_freshness(loaded(seed_ws), "demo")
    assert fresh.state == "pinned" and build_lens_title(loaded(seed_ws), "demo") == f"📌 pinned to build {ids[0]}"

    out.write_bytes(b"vtrt not the pinned engine")  # the next build restores the pinned engine, not the recipe's (C)
    pinned = run_build(seed_ws)  # the recipe is unchanged since C: its fast path would restore C
    assert pinned.returncode == 0, pinned.stderr
    message = f"pinned to build {ids[0]} by a rollback — trtls build --unpin to go back to the recipe's engine"
    assert message in pinned.stdout, pinned.stdout
    served = summaries(seed_ws)[-1]
    assert served["outcome"] == "reused" and served["pinned"]["buildId"] == ids[0] and served["message"] == message
    assert sha(out) == shas[0]

    listed = trtls("engines", "demo", str(seed_ws))
    lines = listed.stdout.strip().splitlines()
    assert [ln.split()[0] for ln in lines] == ids and lines[0].endswith("(pinned)") and "(evicted)" not in listed.stdout
    shutil.rmtree(store / "entries" / b["engineKey"])  # B evicted: a rollback to it cannot be restored any more
    listed = trtls("engines", "demo", str(seed_ws))
    marks = {ln.split()[0]: ln for ln in listed.stdout.strip().splitlines()}
    assert marks[ids[1]].endswith("(evicted)") and marks[ids[0]].endswith("(pinned)") and "(" not in marks[ids[2]][-9:]
    as_json = {r["buildId"]: r for r in json.loads(trtls("engines", "demo", str(seed_ws), "--json").stdout)}
    assert [as_json[i]["inStore"] for i in ids] == [True, False, True]
    assert [as_json[i]["pinned"] for i in ids] == [True, False, False]

    unpinned = run_build(seed_ws, "--unpin")  # back to the recipe's engine (C, in the store)
    assert unpinned.returncode == 0, unpinned.stderr
    after = summaries(seed_ws)[-1]
    assert after["outcome"] == "reused" and after["engineKey"] == c["engineKey"] and sha(out) == shas[2]
    assert after["store"]["unpinned"]["pin"]["buildId"] == ids[0] and after["store"]["unpinned"]["why"] == "--unpin"
    assert not (seed_ws / ".trtls" / "engines" / "demo.pin.json").exists()

    assert trtls("rollback", "demo", str(seed_ws), "--to", ids[0]).returncode == 0
    set_max(seed_ws, MAX_C, MAX_A)  # a reverted change: A's key again, not the key the pin was made against
    reverted = engine_freshness(loaded(seed_ws), "demo")
    assert reverted.state == "in_store"
    assert reverted.lens_title == f"✓ in the store · Build Engine restores build {ids[0]}"
    lifted = run_build(seed_ws)
    assert lifted.returncode == 0, lifted.stderr
    assert f"the pin to build {ids[0]} was lifted" in lifted.stderr
    last = summaries(seed_ws)[-1]
    assert last["outcome"] == "reused" and last["engineKey"] == a["engineKey"] and last.get("pinned") is None
    assert "the recipe changed since the rollback" in last["store"]["unpinned"]["why"]
    assert not (seed_ws / ".trtls" / "engines" / "demo.pin.json").exists()

    helped = " ".join(trtls("rollback", "--help").stdout.split())  # the help says the real default, and the pin
    assert "older than the one whose engine is at the output" in helped and "trtls build --unpin" in helped
