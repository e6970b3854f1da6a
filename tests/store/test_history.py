"""Known-good history, rollback and "why rebuilt", with real builds: the seeded `demo` and a real rebuild with a
larger profile max (another engine: an optimization level alone can give the same bytes for so small a model)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

from tests.builds.helpers import loaded
from tests.store.conftest import copy_store
from tests.store.helpers import entries, run_build, summaries, with_store
from trtls.builds.avoidance.freshness import build_lens_title, engine_freshness

CHANGE = "profile 0 input.max [8,3,32,32] → [16,3,32,32]"


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def trtls(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trtls", *args], capture_output=True, text=True, timeout=120)


def test_why_rebuilt_engines_list_and_rollback(seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path) -> None:
    store = copy_store(seeded, tmp_path)
    with_store(seed_ws, store)
    out = seed_ws / "build" / "demo.engine"
    assert engine_freshness(loaded(seed_ws), "demo").state == "never_built"
    assert run_build(seed_ws).returncode == 0  # a hit: the seeded engine, recorded as this table's known-good
    fresh = engine_freshness(loaded(seed_ws), "demo")
    assert fresh.state == "up_to_date" and build_lens_title(loaded(seed_ws), "demo").startswith("✓ up to date · built")

    text = (seed_ws / "trtls.toml").read_text()
    (seed_ws / "trtls.toml").write_text(text.replace("max = [8, 3, 32, 32]", "max = [16, 3, 32, 32]", 1))
    rec = loaded(seed_ws)
    will = engine_freshness(rec, "demo")
    assert will.state == "will_rebuild" and will.changes == [CHANGE]
    assert will.lens_title == f"▶ Build Engine · {CHANGE}"
    assert will.hint == f"will rebuild because: {CHANGE}"

    done = run_build(seed_ws)
    assert done.returncode == 0, done.stderr
    assert f"rebuilding demo because: {CHANGE}" in done.stderr
    latest = summaries(seed_ws)[-1]
    assert latest["outcome"] == "built" and latest["rebuiltBecause"] == [CHANGE]
    # every face says the same why (core.display.rebuilt_text): the report page and the editor's tree row
    from tests.ts_replay import replay
    from trtls.core.display import rebuilt_text
    from trtls.core.summary_record import Summary
    from trtls.report.build_page import build_report
    from trtls.report.evidence import load_build

    assert rebuilt_text(Summary.written(latest)) == f"rebuilt because: {CHANGE}"
    page = build_report(load_build(seed_ws / ".trtls" / "runs" / latest["buildId"]))
    assert "why this build ran" in page and CHANGE in page
    row = {"uri": "file:///w/trtls.toml", "buildId": latest["buildId"], "engine": "demo", "status": "built",
           "running": False, "cancelSource": None, "outcome": "built", "outcomeKind": "ok",
           "outcomeMessage": "built in 1 s", "rebuiltBecause": rebuilt_text(Summary.written(latest)), "elapsedS": 1.0,
           "elapsedText": "1.0 s", "description": "built · 1.0 s", "where": "local", "evidencePath": None,
           "phases": [], "cell": None, "parentId": None, "node": None}  # fmt: skip
    (drawn,) = [r for r in replay([row])["tree"] if r["kind"] == "build"]
    assert f"rebuilt because: {CHANGE}" in drawn["tooltip"]
    assert len(entries(store)) == 2
    larger = sha(out)
    assert larger == latest["engineArtifact"]["sha256"] != seeded[1]["engineArtifact"]["sha256"]
    assert engine_freshness(loaded(seed_ws), "demo").state == "up_to_date"

    listed = trtls("engines", "demo", str(seed_ws))
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith(seeded[1]["buildId"]) and lines[1].startswith(latest["buildId"])
    assert CHANGE in lines[1]

    back = trtls("rollback", "demo", str(seed_ws))
    assert back.returncode == 0, back.stderr
    assert f"rolled back to the engine of build {seeded[1]['buildId']}" in back.stdout
    assert sha(out) == seeded[1]["engineArtifact"]["sha256"]
    rolled = summaries(seed_ws)[-1]
    assert rolled["outcome"] == "rolled_back" and rolled["rolledBackTo"]["buildId"] == seeded[1]["buildId"]
    pinned = engine_freshness(loaded(seed_ws), "demo")  # a rollback sticks until the recipe changes (issue 32)
    assert pinned.state == "pinned" and pinned.lens_title == f"📌 pinned to build {seeded[1]['buildId']}"

    forward = trtls("rollback", "demo", str(seed_ws), "--to", latest["buildId"])
    assert forward.returncode == 0 and sha(out) == larger
    missing = trtls("rollback", "demo", str(seed_ws), "--to", "demo-nope")
    assert missing.returncode == 1 and "TRT338" in missing.stderr


def test_a_history_that_cannot_be_read_is_never_replaced_by_one_build(seeded: tuple[Path, dict], seed_ws: Path,
                                                                      tmp_path: Path) -> None:  # fmt: skip
    """The known-good record holds every rollback target: one that is there but cannot be read (a user's edit gone
    wrong, a file of another kind) is left as it is, and the build says so, located (it once replaced the history
    with this one build)."""
    store = copy_store(seeded, tmp_path)
    with_store(seed_ws, store)
    history = seed_ws / ".trtls" / "engines" / "demo.json"
    history.parent.mkdir(parents=True)
    history.write_text('{"format": "trtls.known-good/1", "builds": [ {"key": "…", truncated')
    damaged = history.read_bytes()
    done = run_build(seed_ws)
    assert done.returncode == 0, done.stdout + done.stderr
    assert history.read_bytes() == damaged
    (summary,) = summaries(seed_ws)
    said = [w for w in summary["store"]["warnings"] if "not recorded as known-good" in w]
    assert said and said[0].startswith(f"TRT405 {history}: not JSON"), summary["store"]["warnings"]
