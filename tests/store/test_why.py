"""`trtls store why A B` after real builds (issue 32, item 10: the difference between two keys could only be asked of
the table's last build, so a reverted change read "will rebuild" though it would be an instant reuse): any two builds,
keys or the recipe as it is now, what differs both ways, and whether each is in the store; names that name nothing
are TRT341 on the recipe, exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.store.conftest import copy_store
from tests.store.helpers import run_build, summaries, with_store


def trtls(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trtls", *args], capture_output=True, text=True, timeout=120)


def _set_level(ws: Path, old: int, new: int) -> None:
    recipe = ws / "trtls.toml"
    recipe.write_text(recipe.read_text().replace(f"optimization_level = {old}", f"optimization_level = {new}"))


def _why(*args: str) -> dict:
    done = trtls("store", "why", *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_two_builds_a_key_and_the_recipe_are_explained_both_ways(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    store = copy_store(seeded, tmp_path)
    with_store(seed_ws, store)
    assert run_build(seed_ws).returncode == 0  # a reuse of the seed's build: its known-good record here
    _set_level(seed_ws, 3, 4)
    assert run_build(seed_ws).returncode == 0  # a real build of another key
    _set_level(seed_ws, 4, 3)  # reverted: the recipe's key is the seed's again
    reuse, built = summaries(seed_ws)
    assert reuse["outcome"] == "reused" and built["outcome"] == "built"
    seed_id, seed_key = seeded[1]["buildId"], seeded[1]["engineKey"]

    text = trtls("store", "why", seed_id, built["buildId"], str(seed_ws))
    assert text.returncode == 0, text.stderr
    lines = [line.strip() for line in text.stdout.splitlines()]
    assert lines[0] == f"A  build {seed_id} (demo)  key {seed_key[:12]}  in the store"
    assert lines[1] == f"B  build {built['buildId']} (demo)  key {built['engineKey'][:12]}  in the store"
    assert lines[2:] == ["A → B:", "optimization_level 3 → 4", "B → A:", "optimization_level 4 → 3"]

    now = _why("recipe", built["buildId"], str(seed_ws))  # the recipe reverted: the seed's key, in the store
    assert now["a"]["kind"] == "recipe" and now["a"]["key"] == seed_key and now["a"]["inStore"] is True
    assert now["a"]["engine"] == "demo" and now["changes"] == ["optimization_level 3 → 4"]
    assert now["reverse"] == ["optimization_level 4 → 3"] and now["sameKey"] is False

    same = _why(seed_key[:10], reuse["buildId"], str(seed_ws))  # a key prefix; a reuse's own id
    assert same["sameKey"] is True and same["changes"] == [] and same["a"]["kind"] == "key"
    assert same["a"]["key"] == seed_key and same["a"]["buildId"] == seed_id
    said = trtls("store", "why", seed_key, "recipe", str(seed_ws))
    assert said.returncode == 0 and f"same key {seed_key[:12]}: nothing differs" in said.stdout

    assert run_build(seed_ws).returncode == 0  # an unchanged reuse: a run of its own, no new known-good record
    again = summaries(seed_ws)[-1]
    assert again["outcome"] == "reused" and again["buildId"] not in (seed_id, reuse["buildId"])
    assert _why(again["buildId"], seed_id, str(seed_ws))["sameKey"] is True  # found by its run's summary.json

    gone = trtls("store", "gc", str(seed_ws), "--max-size", "1")
    assert gone.returncode == 0, gone.stderr
    evicted = _why(seed_id, built["buildId"], str(seed_ws))  # the parts come from the known-good records
    assert evicted["a"]["inStore"] is False and evicted["b"]["inStore"] is False
    assert evicted["changes"] == ["optimization_level 3 → 4"]


def test_names_that_name_nothing_are_located_errors(seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path) -> None:
    store = copy_store(seeded, tmp_path)
    with_store(seed_ws, store)
    assert run_build(seed_ws).returncode == 0
    recipe = str(seed_ws / "trtls.toml")
    for a, said in (
        ("demo-19700101-000000-000000", "no build 'demo-19700101-000000-000000'"),
        ("0123456789abcdef", "no engine key starts with 0123456789abcdef"),
        ("0" * 64, "no entry of key 000000000000… in the store"),
        ("../../../etc/passwd", "no build '../../../etc/passwd'"),
        ("abc12", "an engine key prefix needs 8 or more hex digits"),
        ("demo-\x1b]52;c;Zm9v\x07", "no build 'demo-\\x1b]52;c;Zm9v\\x07'"),
    ):
        done = trtls("store", "why", a, "recipe", str(seed_ws))
        assert done.returncode == 2, (a, done.stdout, done.stderr)
        assert done.stderr.startswith(f"{recipe}: TRT341 ") and said in done.stderr, done.stderr
        assert "\x1b" not in done.stderr and "Traceback" not in done.stderr
    both = trtls("store", "why", "recipe", "recipe", str(seed_ws))  # two engine tables, neither side names one
    assert both.returncode == 2 and "name one with --engine" in both.stderr
    large = _why("recipe", "recipe", str(seed_ws), "--engine", "large")
    assert large["sameKey"] is True and large["a"]["inStore"] is False
    as_json = trtls("store", "why", "nope", "recipe", str(seed_ws), "--json")
    assert as_json.returncode == 2
    (error,) = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert error["code"] == "TRT341" and error["file"] == recipe


def test_a_run_record_that_does_not_hold_together_is_a_located_error_naming_its_field(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    """A build's summary.json read back through the evidence model (core.summary_record): a word trtls never writes
    is TRT341 naming the field, not a record used as if it were whole."""
    store = copy_store(seeded, tmp_path)
    with_store(seed_ws, store)
    assert run_build(seed_ws).returncode == 0
    build = summaries(seed_ws)[-1]
    run_id = "demo-20000101-000000-000000"  # a run no known-good record names: its summary.json is what is read
    (seed_ws / ".trtls" / "runs" / run_id).mkdir()
    (seed_ws / ".trtls" / "runs" / run_id / "summary.json").write_text(
        json.dumps({**build, "buildId": run_id, "outcome": "exploded"})
    )
    done = trtls("store", "why", run_id, "recipe", str(seed_ws))
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.startswith(f"{seed_ws / 'trtls.toml'}: TRT341 "), done.stderr
    assert "outcome" in done.stderr and "Traceback" not in done.stderr, done.stderr
