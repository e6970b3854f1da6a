"""Every `-o FILE` of the command line goes through one writer (issue 27, item 4): real `trtls` processes on a real
workspace (a real ONNX model, one real build for the evidence `report` and `trace` draw, a real gates run).

`trtls report … -o trtls.toml`, `trtls trace … -o models/demo.onnx`, `trtls gates … -o trtls.toml` and
`trtls schema -o trtls.toml` used to exit 0 (gates: its decision) and replace the recipe or the model; `-o` onto a
symlink was refused with a traceback. Now each is one located line (`FILE: CODE why`), exit 2, and every file of
the workspace is byte-identical afterwards.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lsp.lsp_helpers import write_static_onnx

RECIPE = """\
[engines.demo]
onnx = "models/demo.onnx"
output = "build/demo.engine"

[routes.r]
engine = "demo"
checkpoint = { path = "ck", revision = "cccccccccccccccccccccccccccccccccccccccc" }
intended_use = "tests"
allowed_licenses = ["apache-2.0"]
bundle = "out/r.bundle"
"""


def trtls(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trtls", *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def snapshot(root: Path, state: bool = False) -> dict[str, tuple[str, str]]:
    """rel path → (what it is, sha256 of its bytes or its link text) for everything under root (trtls's own
    `.trtls/` only with `state`: a gates run records its evidence there)."""
    out = {}
    for dirpath, dirs, files in os.walk(root):
        if not state and Path(dirpath) == root:
            dirs[:] = [d for d in dirs if d != ".trtls"]
        for name in files:
            p = Path(dirpath) / name
            if p.is_symlink():
                out[str(p.relative_to(root))] = ("link", os.readlink(p))
            elif p.is_file():
                out[str(p.relative_to(root))] = ("file", hashlib.sha256(p.read_bytes()).hexdigest())
            else:
                out[str(p.relative_to(root))] = ("other", "")
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    ws = tmp_path_factory.mktemp("door-outputs") / "ws"
    (ws / "models").mkdir(parents=True)
    write_static_onnx(ws / "models" / "demo.onnx")
    (ws / "ck").mkdir()
    (ws / "ck" / "config.json").write_text("{}\n")
    (ws / "trtls.toml").write_text(RECIPE)
    r = trtls("build", "--no-store", cwd=ws)
    assert r.returncode == 0, r.stdout + r.stderr
    return ws


@pytest.fixture
def ws(built: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "ws"
    shutil.copytree(built, copy, symlinks=True)
    return copy


REFUSED = [
    (("schema", "-o", "trtls.toml"), "trtls.toml", "TRT109", "the recipe"),
    (("report", "-o", "trtls.toml"), "trtls.toml", "TRT109", "the recipe"),
    (("trace", "-o", "models/demo.onnx"), "models/demo.onnx", "TRT109", "the ONNX model of engine 'demo'"),
    (("gates", "--gate", "1", "-o", "trtls.toml"), "trtls.toml", "TRT109", "the recipe"),
    (("check", "--format", "json", "-o", "models/demo.onnx"), "models/demo.onnx", "TRT109", "ONNX model"),
    (("trace", "-o", ".trtls/history.json"), ".trtls/history.json", "TRT109", "inside trtls's own records"),
    (("schema", "-o", "ck/config.json"), "ck/config.json", "TRT109", "inside the checkpoint of route 'r'"),
]


@pytest.mark.parametrize(("args", "target", "code", "what"), REFUSED, ids=[" ".join(c[0]) for c in REFUSED])
def test_an_output_over_a_file_the_recipe_protects_is_refused(
    ws: Path, args: tuple[str, ...], target: str, code: str, what: str
) -> None:
    before, history = snapshot(ws), (ws / ".trtls" / "history.json").read_bytes()
    r = trtls(*args, cwd=ws)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    (line,) = [x for x in r.stderr.splitlines() if x.startswith(f"{target}: {code} ")]
    assert what in line and "nothing written" in line
    assert snapshot(ws) == before, "a file of the workspace changed"
    assert (ws / ".trtls" / "history.json").read_bytes() == history


def test_a_symlinked_output_is_a_located_line_not_a_traceback(ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    precious = outside / "precious.html"
    precious.write_text("<!doctype html><p>someone else's page</p>\n")  # even a file of the report's format
    (ws / "page.html").symlink_to(precious)
    before, before_outside = snapshot(ws), snapshot(outside)
    r = trtls("report", "-o", "page.html", cwd=ws)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    (line,) = [x for x in r.stderr.splitlines() if x.startswith("page.html: TRT118 ")]
    assert "symlink" in line
    assert snapshot(ws) == before and snapshot(outside) == before_outside


def test_a_file_of_another_format_or_not_a_file_is_not_replaced(ws: Path) -> None:
    (ws / "notes.txt").write_text("my notes\nkey = value\n")
    os.mkfifo(ws / "pipe.json")  # opening it to read its head would block; the door looks at its type first
    (ws / "folder.html").mkdir()
    before = snapshot(ws)
    for args, target in (
        (("trace", "-o", "notes.txt"), "notes.txt"),
        (("schema", "-o", "pipe.json"), "pipe.json"),
        (("report", "-o", "folder.html"), "folder.html"),
        (("check", "-o", "notes.txt"), "notes.txt"),
    ):
        r = trtls(*args, cwd=ws)
        assert r.returncode == 2 and "Traceback" not in r.stderr, (args, r.stderr)
        assert [x for x in r.stderr.splitlines() if x.startswith(f"{target}: TRT412 ")], (args, r.stderr)
    assert snapshot(ws) == before


def test_a_missing_folder_is_a_located_line(ws: Path) -> None:
    r = trtls("schema", "-o", "no/such/folder/schema.json", cwd=ws)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr.startswith("no/such/folder/schema.json: TRT405 ") and not (ws / "no").exists()


def test_outputs_are_written_and_a_report_trtls_wrote_is_replaced(ws: Path) -> None:
    r = trtls("schema", "-o", "schema.json", cwd=ws)
    assert r.returncode == 0, r.stderr
    assert json.loads((ws / "schema.json").read_text())["title"]
    assert trtls("schema", "-o", "schema.json", cwd=ws).returncode == 0  # its own report, recorded: replaced
    (ws / "page.html").write_text("")  # an empty file: nothing to lose
    for _ in range(2):
        r = trtls("report", "-o", "page.html", cwd=ws)
        assert r.returncode == 0, r.stderr
        assert (ws / "page.html").read_text().lower().startswith("<!doctype html")
    r = trtls("trace", "-o", "trace.json", cwd=ws)
    assert r.returncode == 0 and json.loads((ws / "trace.json").read_text())["traceEvents"]
    r = trtls("gates", "--gate", "1", "--format", "junit", "-o", "junit.xml", cwd=ws)
    assert r.returncode in (0, 3, 4) and (ws / "junit.xml").read_text().startswith("<?xml"), r.stderr
    r = trtls("report", cwd=ws)  # the default place, beside the evidence
    assert r.returncode == 0 and Path(r.stdout.strip()).name == "report.html", r.stderr


def test_a_run_folder_swapped_for_a_symlink_gets_no_default_picture(ws: Path, tmp_path: Path) -> None:
    """A run folder swapped for a link out of the project is refused before its record is read (since df1a96f: the
    report's loader reads within the project), so no picture goes there; before, the record was read through the
    link and the picture's default place was refused when written (TRT405)."""
    runs = ws / ".trtls" / "runs"
    (run,) = [p for p in runs.iterdir() if p.is_dir()]
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(run, elsewhere)
    shutil.rmtree(run)
    run.symlink_to(elsewhere)
    before = snapshot(elsewhere)
    r = trtls("report", run.name, cwd=ws)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"{run.name}/summary.json: cannot read (leads out of" in r.stderr, r.stderr
    assert snapshot(elsewhere) == before


def test_a_read_only_file_or_another_tools_file_is_not_replaced(ws: Path) -> None:
    """A file its owner made read-only was replaced (a rename ignores the mode, root writes anything) and came back
    0644; a JSON or HTML file was replaced by a text report (`check -o data.json`); and a file of the report's own
    kind was replaced as if it were a report — `check -o LICENSE` (text), `schema -o package.json` (JSON), `report -o
    index.html`, `gates --format junit -o pom.xml` (XML). Every one refused, located, kept: a report replaces only a
    report trtls wrote (`fs.report_ledger`)."""
    (ws / "kept.json").write_text('{"mine": 1}\n')
    (ws / "kept.json").chmod(0o444)
    (ws / "data.json").write_text('{"mine": 2}\n')
    (ws / "page.html").write_text("<!doctype html><p>mine</p>\n")
    (ws / "LICENSE").write_text("MIT License\n\nCopyright (c) 2026\n")
    (ws / "package.json").write_text('{"name": "myapp"}\n')
    (ws / "pom.xml").write_text('<?xml version="1.0"?>\n<project/>\n')
    before = snapshot(ws)
    mine = "not a {} report trtls wrote"
    for args, target, why in (
        (("schema", "-o", "kept.json"), "kept.json", "is read-only"),
        (("trace", "-o", "kept.json"), "kept.json", "is read-only"),
        (("check", "-o", "data.json"), "data.json", mine.format("text")),
        (("check", "-o", "page.html"), "page.html", mine.format("text")),
        (("check", "-o", "LICENSE"), "LICENSE", mine.format("text")),
        (("schema", "-o", "package.json"), "package.json", mine.format("json")),
        (("report", "-o", "page.html"), "page.html", mine.format("html")),
        (("gates", "--gate", "1", "--format", "junit", "-o", "pom.xml"), "pom.xml", mine.format("xml")),
    ):
        r = trtls(*args, cwd=ws)
        assert r.returncode == 2 and "Traceback" not in r.stderr, (args, r.stderr)
        assert [x for x in r.stderr.splitlines() if x.startswith(f"{target}: TRT412 ") and why in x], (args, r.stderr)
    assert snapshot(ws) == before and (ws / "kept.json").stat().st_mode & 0o777 == 0o444
    for _ in range(2):  # its own text report is written, then replaced (exit 2 is the recipe's route problems)
        r = trtls("check", "-o", "report.txt", cwd=ws)
        assert r.stderr == "" and (ws / "report.txt").read_text().startswith(str(ws / "trtls.toml")), r.stderr


@pytest.mark.parametrize(
    "args",
    [("check",), ("schema",), ("gates", "--gate", "1"), ("trace",), ("report",), ("accept", "--engine", "demo")],
)
def test_a_blank_output_name_is_bad_input_not_stdout(ws: Path, args: tuple[str, ...]) -> None:
    """`-o "$OUT"` with OUT unset: the report went to stdout, exit 0, and no file was where the script looks."""
    r = trtls(*args, "-o", "", cwd=ws)
    assert r.returncode == 2 and "names no file" in r.stderr and r.stdout == "", (r.stdout, r.stderr)
