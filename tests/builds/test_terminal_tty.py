"""`trtls build` in a real terminal: a pseudo-terminal, so the CLI takes its rich live-tree path (not the plain
lines CI logs get) and Ctrl-C is the keystroke itself — the terminal driver turns ^C into SIGINT for the
foreground process group, exactly as when a person presses it. This is the README's "Done means"."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import struct
import sys
import termios
from pathlib import Path

from .helpers import leftovers

TIMEOUT_S = 180.0


class Terminal:
    """`python -m trtls build …` on the slave side of a pty, 120×40, as its controlling terminal."""

    def __init__(self, *args: str, cwd: Path):
        pid, fd = pty.fork()
        if pid == 0:  # the child: a session leader whose controlling terminal is the pty
            os.chdir(cwd)
            os.environ.update(TERM="xterm-256color", COLUMNS="120", LINES="40")
            os.execv(sys.executable, [sys.executable, "-m", "trtls", "build", *args])
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
        self.pid, self.fd, self.screen = pid, fd, b""

    def read_until(self, needle: bytes) -> bool:
        """Read the terminal until `needle` appears; False when the program ended first."""
        while needle not in self.screen:
            ready, _, _ = select.select([self.fd], [], [], TIMEOUT_S)
            assert ready, f"nothing on the terminal for {TIMEOUT_S} s; so far:\n{self.text()[-2000:]}"
            try:
                chunk = os.read(self.fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                return False
            if not chunk:
                return False
            self.screen += chunk
        return True

    def press(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def wait(self) -> int:
        self.read_until(b"\0never\0")  # drain to the end, so the child never blocks on a full pty
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        return os.waitstatus_to_exitcode(status)

    def text(self) -> str:
        """What was written, without the ANSI styling and cursor moves."""
        return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", self.screen.decode("utf-8", "replace"))


def test_a_build_in_a_terminal_draws_the_live_tree_and_ends_built(workspace: Path) -> None:
    term = Terminal(str(workspace), "--engine", "demo", cwd=workspace)
    assert term.wait() == 0, term.text()[-3000:]
    assert b"\x1b[2K" in term.screen, "a TTY gets the rich live view (it redraws lines), not plain lines"
    out = term.text()
    assert "demo building · " in out and "├──" in out, "the live tree with its guides was drawn while the build ran"
    assert "✓" in out and "demo: built in" in out
    assert (workspace / "build" / "demo.engine").stat().st_size > 0
    # a finished phase never shows a step count TensorRT left short ("✓ Building engine [5/6]")
    assert not re.search(r"✓ [^\n]*? \d+/\d+ · ", out), "a finished phase reads as unfinished"
    # the quickstart's demo builds with no TensorRT warning (issue 18): none is drawn either
    assert "[WARNING] " not in out
    # the summary speaks to people: no Python None, no raw byte count
    assert "None" not in out.split("demo: built in")[1] and not re.search(r"\d{5,} bytes", out)
    assert re.search(r"engine: .*demo\.engine \(\d+\.\d (KiB|MiB|GiB), sha256", out)


def test_ctrl_c_keystroke_stops_the_large_build_cleanly(workspace: Path) -> None:
    engine = workspace / "build" / "large.engine"
    engine.parent.mkdir(parents=True, exist_ok=True)
    engine.write_bytes(b"vtrt a previous good engine")
    term = Terminal(str(workspace), "--engine", "large", cwd=workspace)
    assert term.read_until("…".encode()), "a running phase was drawn"  # the running mark of a phase
    # inside TensorRT's build: large's 48 profiles are compiled one by one, each a "Determining refit engines"
    assert term.read_until(b"Determining refit engines"), term.text()[-2000:]
    term.press(b"\x03")  # ^C through the terminal driver: SIGINT to the foreground group
    assert term.wait() == 130, term.text()[-3000:]
    out = term.text()
    assert "stopping large (cooperative; Ctrl-C again to force)" in out
    assert "large: cancelled by ctrl_c" in out and "forced=False" in out, out[-2000:]
    assert engine.read_bytes() == b"vtrt a previous good engine", "the previous engine is byte for byte intact"
    assert "previous engine intact (byte for byte)" in out
    assert leftovers(workspace) == []


def _model_that_makes_tensorrt_warn(path: Path) -> None:
    """A reshape to its own shape computed from tensor values: TensorRT-RTX cannot know the value at the profile's
    opt point and warns ("Was not able to infer kOPT value(s) for tensor …"): the quickstart itself is clean."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("Relu", ["input"], ["y"]),
        helper.make_node("ReduceMax", ["y"], ["m"], keepdims=0),
        helper.make_node("Mul", ["m", "zero"], ["m0"]),
        helper.make_node("Cast", ["m0"], ["z"], to=TensorProto.INT64),
        helper.make_node("Shape", ["y"], ["s"]),
        helper.make_node("Add", ["s", "z"], ["target"]),
        helper.make_node("Reshape", ["y", "target"], ["output"], allowzero=1),
    ]
    graph = helper.make_graph(
        nodes,
        "warns",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [-1, 16])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [-1, 16])],
        [numpy_helper.from_array(__import__("numpy").array(0.0, "float32"), "zero")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(path))


def test_the_live_view_keeps_tensorrt_warnings(workspace: Path) -> None:
    """TensorRT's warnings are drawn in the live view, as the plain output prints them."""
    _model_that_makes_tensorrt_warn(workspace / "models" / "warns.onnx")
    with (workspace / "trtls.toml").open("a") as recipe:
        recipe.write(
            '\n[engines.warns]\nonnx = "models/warns.onnx"\noutput = "build/warns.engine"\n'
            'profiles = [{ input = "input", min = [1, 16], opt = [4, 16], max = [8, 16] }]\n'
        )
    term = Terminal(str(workspace), "--engine", "warns", cwd=workspace)
    assert term.wait() == 0, term.text()[-3000:]
    out = term.text()
    assert "[WARNING] " in out and "infer kOPT" in out, out[-3000:]
    assert "warns: built in" in out
