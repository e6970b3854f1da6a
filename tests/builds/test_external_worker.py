"""The protocol is enough to drive the supervisor: a worker named in the recipe (`worker = [...]`)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from trtls.builds.supervisor.supervisor import Supervisor
from trtls.core.recipe import load_recipe
from trtls.core.summary_record import Summary

WORKER = Path(__file__).parents[1] / "data" / "external_worker.py"


def recipe(tmp_path: Path) -> Path:
    (tmp_path / "trtls.toml").write_text(
        f'[engines.svc]\nonnx = "none.onnx"\noutput = "out/svc.engine"\nworker = ["{sys.executable}", "{WORKER}"]\n'
    )
    return tmp_path / "trtls.toml"


async def test_external_worker_builds(tmp_path: Path) -> None:
    loaded = load_recipe(recipe(tmp_path))
    assert loaded.recipe is not None, loaded.findings
    build = Supervisor().start(loaded, "svc")
    s = await build.wait()
    assert s.outcome == "built" and s.language == "cpp" and s.builderModule == "cpp-service"
    assert (tmp_path / "out" / "svc.engine").read_bytes() == b"engine from an external worker"
    assert s.phaseTree[0]["status"] == "done" and s.phaseTree[0]["step"] == 4


async def test_external_worker_cancel(tmp_path: Path) -> None:
    os.environ["STEPS"] = "200"
    try:
        loaded = load_recipe(recipe(tmp_path))
        build = Supervisor().start(loaded, "svc")
        build.listeners.append(
            lambda b, ev: b.cancel("api") if ev is not None and ev.type == "step" and ev.step == 3 else None
        )
        s = await build.wait()
    finally:
        del os.environ["STEPS"]
    assert s.outcome == "cancelled" and s.cancelSource == "api" and s.cancelLatencyMs is not None
    assert not (tmp_path / "out" / "svc.engine").exists()


async def run_with_fault(tmp_path: Path, fault: str, monkeypatch) -> tuple[Summary, object]:
    monkeypatch.setenv("PROTOCOL_FAULT", fault)  # the child inherits it
    build = Supervisor().start(load_recipe(recipe(tmp_path)), "svc")
    return await build.wait(), build


async def test_an_undeclared_field_is_refused_with_its_name(tmp_path: Path, monkeypatch) -> None:
    """A real child process adds `percent` to its step events: each such line is refused, and the evidence says which
    field of which event, and what the protocol declares, so the worker's author can fix it."""
    s, build = await run_with_fault(tmp_path, "undeclared", monkeypatch)
    (note,) = [n for n in s.notes if "broke trtls.events/1" in n]
    assert "step has the undeclared field 'percent'" in note and "declares: v, t_ns, type, phase_id, step" in note
    assert build.state.refused_lines == 5  # every step line; the rest of the build is read as usual
    assert s.outcome == "built" and s.phaseTree[0]["status"] == "done"


async def test_a_wrong_protocol_version_is_named_in_the_outcome(tmp_path: Path, monkeypatch) -> None:
    s, build = await run_with_fault(tmp_path, "version", monkeypatch)
    assert s.outcome == "killed", "no line was read: the build never reported its end"
    message = build.outcome_message()
    assert "worker speaks protocol version 2, supervisor speaks 1" in message, message
    assert any("protocol version 2" in n for n in s.notes)
