"""The quick fix of a build that ran out of memory (TRT207, builds/supervisor/memory_fix.py) and the peak memory kept
with the history (builds/supervisor/history.py `peaks`, said by core.display.peak_memory_text): recipe layouts as
text, then a real build under `ulimit -v` (as tests/builds/test_memory_exhaustion.py induces it) whose finding carries
the fix, whose peak the history keeps and whose terminal summary says it."""

from __future__ import annotations

import asyncio
import html
import io
import shutil
import sys
import tomllib
from pathlib import Path

import pytest

from trtls.builds.supervisor.history import History
from trtls.builds.supervisor.memory_fix import memory_fix
from trtls.builds.supervisor.outcome_findings import build_findings
from trtls.builds.supervisor.supervisor import Supervisor
from trtls.cli.terminal_view import print_outcome
from trtls.core.display import peak_memory_text
from trtls.core.recipe import load_recipe
from trtls.core.tomlpos import apply_edits
from trtls.lsp.hover import memory_hover
from trtls.report.build_page import build_report
from trtls.report.evidence import load_build
from trtls.report.memory_lens import is_memory_path

from ..quickstart import QUICKSTART, quickstart_profiles

ENGINE = '[engines.e]\nonnx = "m.onnx"\noutput = "build/e.engine"\n'


def _fixed(tmp_path: Path, text: str, resource: str) -> tuple[dict | None, dict]:
    shutil.copyfile(QUICKSTART / "models" / "demo.onnx", tmp_path / "m.onnx")
    (tmp_path / "trtls.toml").write_text(text)
    loaded = load_recipe(tmp_path / "trtls.toml")
    assert loaded.recipe is not None, [f.message for f in loaded.findings]
    fix = memory_fix(loaded, "e", resource)
    after = tomllib.loads(apply_edits(text, fix["edits"])) if fix else {}
    return fix, after.get("engines", {}).get("e", {}).get("builder", {})


@pytest.mark.parametrize(
    "builder",
    [
        "[engines.e.builder]\nmemory_pool_limits = { workspace_mib = 1 }\n",
        "[engines.e.builder]\nmemory_pool_limits = { tactic_dram_mib = 64, workspace_mib = 1 }\n",
        "[engines.e.builder.memory_pool_limits]\nworkspace_mib = 1 # too small\ntactic_dram_mib = 64\n",
        "builder.memory_pool_limits.workspace_mib = 1\n",
    ],
)
def test_a_workspace_limit_failure_removes_the_limit_and_keeps_the_rest(tmp_path: Path, builder: str) -> None:
    fix, after = _fixed(tmp_path, ENGINE + builder, "workspace_limit")
    assert fix is not None and fix["title"].startswith("Remove the workspace limit (workspace_mib = 1)")
    pools = after.get("memory_pool_limits", {})
    assert "workspace_mib" not in pools and pools.get("tactic_dram_mib") == (64 if "64" in builder else None)


def test_device_memory_halves_the_pools_the_recipe_sets_and_turns_aux_streams_off(tmp_path: Path) -> None:
    text = ENGINE + "[engines.e.builder.memory_pool_limits]\nworkspace_mib = 4096\ntactic_dram_mib = 512\n"
    fix, after = _fixed(tmp_path, text, "device_memory")
    assert fix is not None and fix["title"] == (
        "Use less memory for the builder: workspace_mib = 2048, tactic_dram_mib = 256, max_aux_streams = 0"
    )
    assert after == {"max_aux_streams": 0, "memory_pool_limits": {"workspace_mib": 2048, "tactic_dram_mib": 256}}


def test_host_memory_leaves_the_workspace_which_is_device_memory(tmp_path: Path) -> None:
    text = ENGINE + "builder = { max_aux_streams = 3, memory_pool_limits = { workspace_mib = 4096 } }\n"
    fix, after = _fixed(tmp_path, text, "host_memory")
    assert fix is not None and fix["title"] == "Use less memory for the builder: max_aux_streams = 0"
    assert after == {"max_aux_streams": 0, "memory_pool_limits": {"workspace_mib": 4096}}


def test_nothing_left_to_lower_offers_no_fix(tmp_path: Path) -> None:
    assert _fixed(tmp_path, ENGINE + "builder.max_aux_streams = 0\n", "host_memory")[0] is None
    assert _fixed(tmp_path, ENGINE, "workspace_limit")[0] is None  # no limit to remove


def test_peak_memory_words() -> None:
    peaks = [
        {"buildId": "a", "startedAt": 1000.0, "outcome": "built", "peakRssBytes": 400 << 20},
        {"buildId": "b", "startedAt": 1100.0, "outcome": "failed", "peakRssBytes": 412 << 20},
    ]
    assert peak_memory_text(peaks, now=1160.0) == (
        "last build peaked at 412.0 MiB (worker RSS; failed, 60 s ago); 2 builds of these settings: 400.0 MiB–412.0 MiB"
    )
    assert (
        peak_memory_text(peaks[:1], now=1060.0, lead="peaked at") == "peaked at 400.0 MiB (worker RSS; built, 60 s ago)"
    )
    assert peak_memory_text([]) is None


async def test_a_real_out_of_memory_build_carries_the_fix_and_its_peak_is_kept(workspace: Path) -> None:
    # the worker under `ulimit -v`: TensorRT-RTX logs std::bad_alloc (tests/builds/test_memory_exhaustion.py)
    worker = f"ulimit -v 440000; MALLOC_ARENA_MAX=1 exec {sys.executable} -m trtls.builds.worker"
    table = (
        f'[engines.demo]\nonnx = "models/demo.onnx"\noutput = "build/demo.engine"\n'
        f'worker = ["sh", "-c", "{worker}"]\n{quickstart_profiles("demo")}\n'
    )
    (workspace / "trtls.toml").write_text(table)
    loaded = load_recipe(workspace / "trtls.toml")
    supervisor = Supervisor()
    build = supervisor.start(loaded, "demo")
    try:
        s = await asyncio.wait_for(asyncio.shield(build.wait()), 300)
    except TimeoutError:
        await supervisor.shutdown()
        pytest.fail("the demo build under the memory limit did not end within 300 s")
    assert s.outcome == "failed" and s.failure.kind == "out_of_memory" and s.failure.resource == "host_memory"
    (oom,) = [f for f in build_findings(s, loaded) if f.code == "TRT207"]
    fix = oom.data["fix"]
    assert fix["title"] == "Use less memory for the builder: max_aux_streams = 0"
    assert tomllib.loads(apply_edits(table, fix["edits"]))["engines"]["demo"]["builder"] == {"max_aux_streams": 0}
    assert "fix" not in next(f for f in build_findings(s) if f.code == "TRT207").data  # no recipe: no edit
    # the history keeps this failed build's peak, as the evidence measured it
    (peak,) = History(workspace / ".trtls" / "history.json").peaks(str(s.buildConfigHash))
    assert peak == {
        "buildId": s.buildId,
        "startedAt": round(s.startedAt, 3),
        "outcome": "failed",
        "peakRssBytes": s.resources["peakRssBytes"],
    }
    out = io.StringIO()
    print_outcome(build, out)
    words = str(peak_memory_text([peak], lead="peaked at"))
    assert f"  memory: {words.split(', ')[0]}, " in out.getvalue()  # up to its "… ago", which counts on
    # before the next build: the engine's hover (read now, as `trtls` reads it outside a server)
    said = memory_hover(load_recipe(workspace / "trtls.toml"), 0, 3)
    said_then = str(peak_memory_text([peak])).split(", ")[0]  # up to its "… ago", which counts on
    assert said is not None and said.startswith(f"**Memory** · {said_then}, ") and said.endswith(" ago)")
    assert said_then.startswith("last build peaked at ") and said_then.endswith("(worker RSS; failed")
    assert is_memory_path(("engines", "demo", "builder", "memory_pool_limits", "workspace_mib"))
    assert not is_memory_path(("engines", "demo", "onnx"))
    # the report's facts say the same (its "ago" counted at its own time: compared up to it)
    page = build_report(load_build(workspace / ".trtls" / "runs" / str(s.buildId)))
    assert "<dt>memory</dt>" in page and html.escape(words.split(", ")[0]) in page
