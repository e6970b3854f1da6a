"""Issue 32 item 5: the fast path never hides corruption. A damaged entry found (and quarantined) by the fast path of an
unchanged `trtls build` is rebuilt by the full path with TRT332 on the terminal, in `store.warnings` and first in
`rebuiltBecause` — whichever process quarantined it — never "same key as the last build (not in the store)"."""

from __future__ import annotations

import hashlib
from pathlib import Path

from tests.store.conftest import copy_store
from tests.store.helpers import entries, run_build, summaries, with_store


def test_an_entry_the_fast_path_quarantines_is_rebuilt_with_trt332(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    store = copy_store(seeded, tmp_path)
    with_store(seed_ws, store)
    out = seed_ws / "build" / "demo.engine"
    first = run_build(seed_ws)  # the full path restores the seeded engine and remembers the key (the fast path's memo)
    assert first.returncode == 0, first.stderr
    assert (seed_ws / ".trtls" / "engines" / "demo.hit.json").is_file()

    (folder,) = entries(store)
    engine = bytearray((folder / "engine").read_bytes())
    engine[len(engine) // 2] ^= 0x01  # the same size: only its digest tells
    (folder / "engine").write_bytes(bytes(engine))
    out.unlink()  # a fresh checkout's output (an output that already holds the engine is kept, never re-read)

    done = run_build(seed_ws)  # unchanged recipe: the fast path restores, finds the damage, quarantines, gives up
    assert done.returncode == 0, done.stderr
    assert "TRT332" in done.stderr and "quarantined" in done.stderr and "the engine is rebuilt" in done.stderr
    latest = summaries(seed_ws)[-1]
    assert latest["outcome"] == "built"
    warnings = latest["store"]["warnings"]
    assert any(w.startswith("TRT332") and "quarantined" in w for w in warnings), warnings
    because = latest["rebuiltBecause"]
    assert because[0].startswith("the store's entry of this key was damaged (engine sha256"), because
    assert "not in the store" not in " ".join(because)
    quarantined = list((store / "quarantine").iterdir())
    assert len(quarantined) == 1 and quarantined[0].name.startswith(latest["engineKey"])
    assert hashlib.sha256(out.read_bytes()).hexdigest() == latest["engineArtifact"]["sha256"]

    again = run_build(seed_ws)  # the rebuilt engine was published: a hit, and the old quarantine is not said again
    assert again.returncode == 0 and "TRT332" not in again.stderr, again.stderr
