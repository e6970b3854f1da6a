"""Names from recipes, models and records never reach the terminal raw (issue 27, item 13): real `trtls` processes
on recipes whose engine name, output path, checkpoint folder and `intended_use` carry ESC, OSC 52 (write the
clipboard), CSI (clear the screen) and a C1 CSI, and on a real ONNX model whose node name carries them (it comes
back through TensorRT's relayed log and the build's failure message). Not one byte 0x1b, 0x07 or 0x9b reaches
stdout or stderr; the names are shown escaped (`\\x1b`); `--json` lines stay JSON that decodes back to the name.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.lsp.lsp_helpers import write_static_onnx

EVIL = "\x1b[2J\x1b]52;c;SGVsbG8=\x07\x9b31m"  # clear screen, OSC 52 clipboard write ended by BEL, C1 CSI
TOML_EVIL = EVIL.encode("unicode_escape").decode().replace("\\x", "\\u00")  # the same as TOML \u escapes
RAW = (b"\x1b", b"\x07", b"\x9b")


def trtls(*args: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([sys.executable, "-m", "trtls", *args], cwd=cwd, capture_output=True, timeout=300)


def assert_clean(r: subprocess.CompletedProcess[bytes]) -> str:
    """No raw control byte on either stream; the text of both, decoded."""
    for stream, data in (("stdout", r.stdout), ("stderr", r.stderr)):
        for byte in RAW:
            assert byte not in data, f"{byte!r} reached {stream}: {data[:2000]!r}"
    out = (r.stdout + r.stderr).decode("utf-8")
    assert "\x9b" not in out and "Traceback" not in out, out
    return out


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "models").mkdir(parents=True)
    write_static_onnx(ws / "models" / "demo.onnx")
    (ws / f"ck{EVIL}").mkdir()
    (ws / f"ck{EVIL}" / "config.json").write_text("{}\n")
    (ws / "trtls.toml").write_text(
        f'[engines.plain]\nonnx = "models/demo.onnx"\noutput = "build/plain{TOML_EVIL}.engine"\n\n'
        f'[routes.r]\nengine = "plain"\n'
        f'checkpoint = {{ path = "ck{TOML_EVIL}", revision = "{"c" * 40}" }}\n'
        f'intended_use = "tests{TOML_EVIL}"\nallowed_licenses = ["apache-2.0"]\nbundle = "out/r.bundle"\n'
    )
    return ws


def test_the_recipe_holds_the_raw_sequences(ws: Path) -> None:
    """The test is only worth something if the names really carry the bytes."""
    from trtls.core.recipe import load_recipe

    loaded = load_recipe(ws / "trtls.toml")
    assert loaded.recipe is not None and EVIL in loaded.recipe.engines["plain"].output


def test_a_build_check_and_gates_print_no_control_byte(ws: Path) -> None:
    built = trtls("build", "--no-store", cwd=ws)
    text = assert_clean(built)
    assert built.returncode == 0, text
    assert "plain\\x1b[2J\\x1b]52;c;SGVsbG8=\\x07\\x9b31m.engine" in text  # the path is shown, escaped
    assert (ws / "build" / f"plain{EVIL}.engine").is_file()  # and the file has its real name
    assert_clean(trtls("check", cwd=ws))
    gates = trtls("gates", "--gate", "1", cwd=ws)
    assert gates.returncode in (0, 3, 4) and "route r" in assert_clean(gates)
    wrong = trtls("build", "--engine", f"nope{EVIL}", cwd=ws)  # a name from argv, echoed in the error
    assert wrong.returncode == 2 and "nope\\x1b" in assert_clean(wrong)
    usage = trtls("build", f"--no-such-flag{EVIL}", cwd=ws)  # argparse echoes it too
    assert usage.returncode == 2 and "no-such-flag\\x1b" in assert_clean(usage)


def test_a_hostile_engine_name_is_refused_escaped(ws: Path) -> None:
    text = (ws / "trtls.toml").read_text().replace("[engines.plain]", f'[engines."demo{TOML_EVIL}"]')
    (ws / "trtls.toml").write_text(text.replace('engine = "plain"', f'engine = "demo{TOML_EVIL}"'))
    for args in (("check",), ("build",), ("gates",)):
        r = trtls(*args, cwd=ws)
        assert r.returncode == 2 and "TRT108" in assert_clean(r), args


@pytest.fixture
def bad_node(tmp_path: Path) -> Path:
    """A real ONNX model TensorRT cannot parse, whose node name carries the sequences."""
    import onnx
    from onnx import TensorProto, helper

    ws = tmp_path / "node"
    ws.mkdir()
    graph = helper.make_graph(
        [helper.make_node("NoSuchOp", ["x"], ["y"], name=f"node{EVIL}")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), ws / "m.onnx")
    (ws / "trtls.toml").write_text('[engines.demo]\nonnx = "m.onnx"\noutput = "build/demo.engine"\n')
    return ws


def test_an_onnx_node_name_through_tensorrts_log_is_escaped(bad_node: Path) -> None:
    r = trtls("build", "--no-store", cwd=bad_node)
    text = assert_clean(r)
    assert r.returncode == 1 and "node\\x1b[2J" in text, text  # TensorRT named the node; we showed it escaped


def test_json_lines_stay_json_and_decode_to_the_raw_name(bad_node: Path) -> None:
    r = trtls("build", "--no-store", "--json", cwd=bad_node)
    assert_clean(r)
    lines = [json.loads(line) for line in r.stdout.decode().splitlines()]
    assert lines and lines[-1]["type"] == "summary"
    assert any(f"node{EVIL}" in text for line in lines for text in strings(line)), "the name, decoded"


def strings(obj: object) -> list[str]:
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in strings(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in strings(v)]
    return []


def test_the_live_tree_on_a_terminal_escapes_each_name(ws: Path) -> None:
    """On a TTY the rich tree draws its own escape sequences, so it writes to the raw stream: each name in it is
    escaped by the view. A real pseudo-terminal: no OSC 52, no clear screen, no BEL, no C1 CSI from the names."""
    import os

    master, slave = os.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "trtls", "build", "--no-store"], cwd=ws, stdout=slave, stderr=slave, close_fds=True
    )
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every writer of the terminal has gone
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert proc.wait(timeout=300) == 0, seen[-2000:]
    for sequence in (b"\x1b]52", b"\x1b[2J", b"\x07", b"\xc2\x9b"):
        assert sequence not in seen, (sequence, seen[-2000:])
    assert b"plain\\x1b[2J" in seen  # the output path was drawn, escaped


def test_an_unknown_recipe_key_with_control_characters_is_said_escaped(ws: Path) -> None:
    """An unknown key is echoed by every face that checks the recipe (TRT101): a quoted TOML key may carry any
    character, and it is shown escaped, never raw."""
    text = (ws / "trtls.toml").read_text()
    (ws / "trtls.toml").write_text(text.replace("[routes.r]", f'"fo{TOML_EVIL}o" = 1\n\n[routes.r]', 1))
    for args in (("check",), ("build", "--no-store")):
        r = trtls(*args, cwd=ws)
        said = assert_clean(r)
        assert r.returncode == 2 and "TRT101" in said and "fo\\x1b[2J\\x1b]52;c;SGVsbG8=\\x07\\x9b31mo" in said, said


def test_a_build_id_read_from_a_record_is_said_escaped(ws: Path) -> None:
    """A known-good record (`.trtls/engines/<name>.json`) is a file anyone who can write the folder can change: a
    build id carrying the sequences is listed by `trtls engines` escaped, and `trtls rollback --to` it prints no
    raw byte either: it names the id, escaped (a store is on for it: known-good engines are kept there)."""
    built = trtls("build", "--no-store", "--engine", "plain", cwd=ws)
    assert built.returncode == 0, assert_clean(built)
    record = ws / ".trtls" / "engines" / "plain.json"
    data = json.loads(record.read_text())
    data["builds"][0]["buildId"] = f"plain{EVIL}"
    record.write_text(json.dumps(data))
    listed = trtls("engines", "plain", cwd=ws)
    said = assert_clean(listed)
    assert listed.returncode == 0 and "plain\\x1b[2J\\x1b]52;c;SGVsbG8=\\x07\\x9b31m" in said, said
    import os

    store = {**os.environ, "TRTLS_STORE": str(ws.parent / "store")}
    argv = [sys.executable, "-m", "trtls", "rollback", "plain", "--to", f"plain{EVIL}"]
    rolled = subprocess.run(argv, cwd=ws, capture_output=True, timeout=300, env=store)
    said = assert_clean(rolled)
    assert rolled.returncode in (0, 1) and "plain\\x1b[2J\\x1b]52;c;SGVsbG8=\\x07\\x9b31m" in said, said


def test_a_newline_in_a_name_never_forges_a_line(ws: Path) -> None:
    """A quoted TOML key may hold a newline: `[engines."ok\\nFAKE: …"]` printed its finding as two lines, the second
    one the recipe's author wrote. Every finding's message is escaped once, where it is made (`core.findings`)."""
    forged = "ok\\nFAKE: demo built, all gates pass"
    text = (ws / "trtls.toml").read_text().replace("[engines.plain]", f'[engines."{forged}"]')
    (ws / "trtls.toml").write_text(text.replace('engine = "plain"', f'engine = "{forged}"'))
    for args in (("check",), ("build", "--no-store")):
        r = trtls(*args, cwd=ws)
        said = assert_clean(r)
        assert r.returncode == 2 and "TRT108" in said and "ok\\x0aFAKE: demo built" in said, said
        assert not any(line.startswith("FAKE") for line in said.splitlines()), said
