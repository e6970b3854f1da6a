"""A store others can write is refused unless the recipe says whom it trusts (issue 27, item 12): anyone who can
write a store can forge an engine every consumer runs. Real folder modes and owners (chown needs root), a real
`trtls build`, and the evidence naming the store and the trust that served an engine."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.store.conftest import copy_store
from tests.store.forged import forged_entry
from tests.store.helpers import run_build, summaries, with_store
from trtls.core.recipe import load_recipe
from trtls.store.config import store_config
from trtls.store.entries import Refused, Store, StoreUnusable


def test_a_build_refuses_a_group_writable_store_unless_the_recipe_trusts_the_group(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    store = copy_store(seeded, tmp_path)
    (store / "entries").chmod(0o775)  # a group member could rename a forged entry in
    with_store(seed_ws, store)
    done = run_build(seed_ws)
    assert done.returncode == 2, done.stdout + done.stderr
    line = next(i for i, t in enumerate((seed_ws / "trtls.toml").read_text().splitlines(), 1) if t.startswith("path"))
    assert f"trtls.toml:{line}:8: TRT340 error:" in done.stderr and "group" in done.stderr, done.stderr
    assert not (seed_ws / "build" / "demo.engine").exists()
    (seed_ws / "trtls.toml").write_text((seed_ws / "trtls.toml").read_text() + 'trust = "group"\n')
    loaded = load_recipe(seed_ws / "trtls.toml")
    assert loaded.recipe is not None, loaded.findings
    config = store_config(loaded.recipe.store, loaded.base_dir)
    assert config is not None and config.trust == "group"
    trusted = Store.from_config(config)
    trusted.check()  # the recipe trusts the group: the same store is used
    assert [e.key for e in trusted.entries()] == [seeded[1]["engineKey"]]


def test_a_world_writable_store_is_refused_whatever_the_trust(tmp_path: Path) -> None:
    Store(tmp_path / "store").check()
    (tmp_path / "store").chmod(0o777)
    for trust in ("user", "group"):
        with pytest.raises(StoreUnusable, match="every user") as refused:
            Store(tmp_path / "store", "read", trust=trust).check()
        assert refused.value.code == "TRT340"


@pytest.mark.parametrize("how", ["group-writable engine", "record of another user"])
def test_an_entry_others_could_have_written_is_not_used_and_left_in_place(tmp_path: Path, how: str) -> None:
    store = Store(tmp_path / "store")
    store.check()
    entry = forged_entry(store, tmp_path, "shared")
    if how == "group-writable engine":
        entry.engine.chmod(0o664)
    else:
        if os.geteuid() != 0:
            pytest.skip("giving a file to another user needs root")
        os.chown(entry.folder / "entry.json", 65534, -1)
    out = tmp_path / "out" / "demo.engine"
    out.parent.mkdir()
    with pytest.raises(Refused, match="not used"):
        got = store.get(entry.key)
        assert got is not None
        store.restore(got, out, "t1", within=out.parent)
    assert list(out.parent.iterdir()) == [] and (store.root / "entries" / entry.key).is_dir()  # not quarantined
    team = Store(tmp_path / "store", trust="group")
    got = team.get(entry.key)
    assert got is not None and team.restore(got, out, "t2", within=out.parent)
    assert out.read_bytes() == entry.engine.read_bytes()


def test_the_evidence_says_which_store_and_which_trust_served_the_engine(
    seeded: tuple[Path, dict], seed_ws: Path, tmp_path: Path
) -> None:
    store = copy_store(seeded, tmp_path)
    with_store(seed_ws, store)
    done = run_build(seed_ws)
    assert done.returncode == 0, done.stderr
    (s,) = summaries(seed_ws)
    assert s["outcome"] == "reused" and s["store"]["path"] == str(store) and s["store"]["trust"] == "user"
