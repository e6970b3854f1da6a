"""The gates' writes through the door (issue 27): a `-o` report replaces only a report trtls wrote (item 4,
`trtls gates … -o trtls.toml`, `-o pom.xml`), and the promotion ledger's lock is never opened through a planted
symlink (item 3's rule, for `.trtls/promotions.lock`), nor the ledger read through one. Real files and real symlinks
in tmp folders."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from trtls.fs import UnsafeWrite
from trtls.gates.lifecycle.ledger import LedgerTampered, append_record, read_ledger
from trtls.gates.reports import to_junit, to_sarif, write_junit, write_report_file, write_sarif

RECIPE = '[engines.demo]\nonnx = "models/demo.onnx"\noutput = "build/demo.engine"\n'


def test_a_report_replaces_only_a_report_trtls_wrote_never_the_recipe_or_a_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path.parent / f"{tmp_path.name}-cache"))
    recipe = tmp_path / "trtls.toml"
    recipe.write_text(RECIPE)
    model = tmp_path / "demo.onnx"
    model.write_bytes(b"\x08\x07\x12\x07pytorch" + bytes(range(256)))
    sarif = to_sarif([], lambda path: None, "trtls.toml", "0.1.0")
    for target in (recipe, model):
        with pytest.raises(UnsafeWrite, match="not a report trtls wrote"):
            write_sarif(target, sarif)
        with pytest.raises(UnsafeWrite, match="not a report trtls wrote"):
            write_junit(target, to_junit([]))
        with pytest.raises(UnsafeWrite):
            write_report_file(target, "report\n")
    assert recipe.read_text() == RECIPE and model.read_bytes().startswith(b"\x08\x07\x12\x07pytorch")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo.onnx", "trtls.toml"]  # no temp file left behind

    # a Maven project file is XML, as JUnit is: not replaced
    pom = tmp_path / "pom.xml"
    pom.write_text('<?xml version="1.0"?>\n<project/>\n')
    with pytest.raises(UnsafeWrite, match="not a report trtls wrote"):
        write_junit(pom, to_junit([]))
    assert pom.read_text().endswith("<project/>\n")
    pom.unlink()
    # a report trtls wrote is replaced; a symlink at the name is refused, what it points to unchanged
    out = tmp_path / "gates.sarif"
    write_sarif(out, to_sarif([], lambda path: None, "trtls.toml", "0.1.0"))
    write_sarif(out, to_sarif([], lambda path: None, "trtls.toml", "0.2.0"))
    assert json.loads(out.read_text())["runs"][0]["tool"]["driver"]["version"] == "0.2.0"
    junit = tmp_path / "junit.xml"
    write_junit(junit, to_junit([]))
    write_junit(junit, to_junit([], name="again"))
    assert "again" in junit.read_text()
    (tmp_path / "link.sarif").symlink_to(recipe)
    with pytest.raises(UnsafeWrite, match="symlink"):
        write_sarif(tmp_path / "link.sarif", to_sarif([], lambda path: None, "trtls.toml", "0.1.0"))
    assert recipe.read_text() == RECIPE


def test_a_symlink_planted_at_the_ledger_lock_is_refused_and_creates_nothing(tmp_path: Path) -> None:
    (tmp_path / ".trtls").mkdir()
    target = tmp_path / "outside" / "created-through-the-link"
    target.parent.mkdir()
    os.symlink(target, tmp_path / ".trtls" / "promotions.lock")  # dangling: a plain open would create its target
    with pytest.raises(UnsafeWrite, match="symlink"):
        append_record(tmp_path, {"event": "promote", "route": "r"})
    assert not target.exists()
    assert not (tmp_path / "trtls.promotions.jsonl").exists()


def test_a_ledger_that_is_a_symlink_is_never_read_through(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere.jsonl"
    elsewhere.write_bytes(b"")  # read through the link, this would be an empty, untampered ledger
    (tmp_path / "trtls.promotions.jsonl").symlink_to(elsewhere)
    ledger = read_ledger(tmp_path)
    assert ledger.problem is not None and "symlink" in ledger.problem and ledger.records == []
    with pytest.raises(LedgerTampered):
        append_record(tmp_path, {"event": "promote", "route": "r"})
    assert elsewhere.read_bytes() == b""
