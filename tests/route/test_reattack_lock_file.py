"""`trtls route lock` on a trtls.lock.json that is there but is not a lock — a merge conflict left in it, a truncated
file — once replaced it silently with a lock of only the routes being locked (exit 0): the other routes' reviewed
digests were lost. It is refused now (exit 4, the file byte for byte unchanged); a missing lock is still created."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _lifecycle_sample import ROUTE, copy, trtls


@pytest.fixture
def root(prepared, tmp_path) -> Path:
    return copy(prepared, tmp_path / "route")


def with_other_route(root: Path) -> str:
    data = json.loads((root / "trtls.lock.json").read_text())
    data["routes"]["reviewed_elsewhere"] = data["routes"][ROUTE]
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


@pytest.mark.parametrize("damage", ["merge_conflict", "truncated", "routes_not_a_table"])
def test_a_lock_that_is_not_a_lock_is_never_replaced(root: Path, damage: str) -> None:
    good = with_other_route(root)
    text = {
        "merge_conflict": f"<<<<<<< HEAD\n{good}=======\n{good}>>>>>>> theirs\n",
        "truncated": good[: len(good) // 2],
        "routes_not_a_table": json.dumps({"format": "trtls.lock/1", "routes": ["reviewed_elsewhere"]}),
    }[damage]
    lock = root / "trtls.lock.json"
    lock.write_text(text)
    r = trtls("route", "lock", "--route", ROUTE, cwd=root)
    assert r.returncode == 4, r.stdout + r.stderr
    assert "trtls.lock.json is there but is not a trtls lock" in r.stderr and "unchanged" in r.stderr, r.stderr
    assert str(root / "trtls.toml") in r.stderr  # located: the recipe whose route was not locked
    assert lock.read_text() == text


def test_a_good_lock_keeps_the_other_routes_and_a_missing_one_is_created(root: Path) -> None:
    lock = root / "trtls.lock.json"
    lock.write_text(with_other_route(root))
    r = trtls("route", "lock", "--route", ROUTE, cwd=root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert set(json.loads(lock.read_text())["routes"]) == {ROUTE, "reviewed_elsewhere"}
    lock.unlink()
    r = trtls("route", "lock", "--route", ROUTE, cwd=root)
    assert r.returncode == 0, r.stdout + r.stderr
    assert set(json.loads(lock.read_text())["routes"]) == {ROUTE}


def test_a_recipe_with_no_route_is_not_locked_and_says_so(tmp_path: Path) -> None:
    """`trtls route lock` on a recipe with no `[routes]` printed nothing and exited 0 — its help's "locked" — having
    locked nothing: the TRT107 every route command says, exit 2, no lock file."""
    (tmp_path / "trtls.toml").write_text('[engines.demo]\nonnx = "m.onnx"\noutput = "build/demo.engine"\n')
    r = trtls("route", "lock", cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "TRT107 choose a route with --route (routes: none)" in r.stderr, r.stderr
    assert not (tmp_path / "trtls.lock.json").exists()
