"""`trtls reduce` on the cases issue 30 found broken, each a real TensorRT-RTX reduction in the real CLI process on a
model made here: the `gates` install without onnx_graphsurgeon, a missing module said with its extra, a model ONNX
Runtime cannot run reduced with shapes from ONNX shape inference, an error inside said with its reason, a model with
several outputs whose failing branch ends before another output's deeper one, a failing first node with no setting
changed, a model nothing smaller of which fails, and a stopped reduction resumed."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.triage.reduce_models import layernorm_last, layernorm_weights, save, save_chain

# Runs the trtls command with one top-level module made unimportable, as an install without it is.
WITHOUT = """
import sys
blocked = sys.argv[1]
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Block())
sys.argv = ["trtls", *sys.argv[2:]]
from trtls.cli.main import main
sys.exit(main())
"""

SMEM = "[engines.{name}.builder]\nmemory_pool_limits = {{ tactic_shared_memory_kib = 32 }}\n"


def _engine(name: str, onnx_file: str, shape: str, *, smem: bool) -> str:
    lo, opt, hi = (shape.replace("N", str(n)) for n in (1, 2, 4))
    return (
        f'[engines.{name}]\nonnx = "{onnx_file}"\noutput = "build/{name}.engine"\n'
        + (SMEM.format(name=name) if smem else "")
        + f'[[engines.{name}.profiles]]\ninput = "x"\nmin = {lo}\nopt = {opt}\nmax = {hi}\n\n'
    )


def _two_outputs(path: Path, depth: int = 20) -> None:
    """x → b0 (Relu) → ln (LayerNormalization) → out1, and b0 → b1 … b{depth} → out2: the failing branch (a
    LayerNormalization, which TensorRT-RTX fails on with 32 KiB of shared memory) ends long before the other output's.
    """
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="b0")]
    nodes.append(helper.make_node("LayerNormalization", ["r", "g", "b"], ["out1"], name="ln", axis=-1))
    prev = "r"
    for i in range(1, depth + 1):
        nodes.append(helper.make_node("Sigmoid" if i % 2 else "Relu", [prev], [f"t{i}"], name=f"b{i}"))
        prev = f"t{i}"
    nodes[-1].output[0] = "out2"
    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes,
        "two_outputs",
        [value("x", TensorProto.FLOAT, ["N", 16, 64])],
        [value("out1", TensorProto.FLOAT, ["N", 16, 64]), value("out2", TensorProto.FLOAT, ["N", 16, 64])],
        [numpy_helper.from_array(np.ones(64, np.float32), "g"), numpy_helper.from_array(np.zeros(64, np.float32), "b")],
    )
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def _if_first(path: Path, after: int) -> None:
    """An If on a boolean input whose branches return different shapes, then `after` more nodes: TensorRT-RTX 1.7
    fails it with its default settings (Error Code 1: Myelin, CHECK(… < op->input_size()) in compileGraph)."""
    value = helper.make_tensor_value_info
    then = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["ty"])], "then", [], [value("ty", TensorProto.FLOAT, ["N", 16])]
    )
    slice_x = helper.make_node("Slice", ["x", "s0", "s1", "ax"], ["ey"])
    other = helper.make_graph([slice_x], "else", [], [value("ey", TensorProto.FLOAT, ["N", 4])])
    nodes = [helper.make_node("If", ["c"], ["y0"], name="if", then_branch=then, else_branch=other)]
    for i in range(after):
        nodes.append(helper.make_node("Relu" if i % 2 else "Sigmoid", [f"y{i}"], [f"y{i + 1}"], name=f"n{i}"))
    constants = [("s0", [0]), ("s1", [4]), ("ax", [1])]
    graph = helper.make_graph(
        nodes,
        "if_first",
        [value("c", TensorProto.BOOL, []), value("x", TensorProto.FLOAT, ["N", 16])],
        [value(f"y{after}", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in constants],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def _bf16_then_layernorm(path: Path) -> None:
    """A bfloat16 Sigmoid (TensorRT builds it; ONNX Runtime's CPU has no kernel for it), then the failing
    LayerNormalization."""
    nodes = [
        helper.make_node("Cast", ["x"], ["xb"], name="to_bf16", to=TensorProto.BFLOAT16),
        helper.make_node("Sigmoid", ["xb"], ["sb"], name="sig_bf16"),
        helper.make_node("Cast", ["sb"], ["s"], name="to_f32", to=TensorProto.FLOAT),
        helper.make_node("LayerNormalization", ["s", "g", "b"], ["y"], name="ln", axis=-1),
    ]
    save_chain(path, nodes, "bf16", layernorm_weights())


def _reduce(ws: Path, engine: str, *extra: str, without: str | None = None) -> tuple[int, dict | None, str]:
    args = ["reduce", str(ws), "--engine", engine, "--json", *extra]
    cmd = [sys.executable, "-c", WITHOUT, without, *args] if without else [sys.executable, "-m", "trtls", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith('{"kind": "reduction"')]
    return proc.returncode, json.loads(lines[-1]) if lines else None, proc.stderr


def test_the_gates_install_reduces_without_onnx_graphsurgeon(tmp_path: Path) -> None:
    """Item 1: `pip install 'trtls[rtx,gates]'` has no onnx_graphsurgeon (only the precision extra brings it); the
    reduction cuts its candidates with onnx alone and reduces."""
    _two_outputs(tmp_path / "m.onnx")
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 16, 64]", smem=True))
    code, record, stderr = _reduce(tmp_path, "m", without="onnx_graphsurgeon")
    assert record is not None, stderr[-2000:]
    assert code == 0 and record["outcome"] == "configuration", record["causeText"]
    assert record["minimal"]["nodeNames"] == ["ln"]


def test_a_missing_module_is_said_with_the_extra_that_installs_it(tmp_path: Path) -> None:
    """Item 1: a module the reduction needs that is not installed is a located error naming the extra (TRT982,
    exit 2), before any trial — never 'no cause found'."""
    _two_outputs(tmp_path / "m.onnx")
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 16, 64]", smem=True))
    code, record, stderr = _reduce(tmp_path, "m", without="onnxruntime")
    assert code == 2, stderr[-2000:]
    assert f"{tmp_path / 'trtls.toml'}: TRT982 trtls reduce needs onnxruntime" in stderr
    assert "pip install 'trtls[gates]'" in stderr
    assert "no cause found" not in stderr and record is None
    assert not (tmp_path / ".trtls" / "runs").exists(), "no trial was built"


def test_a_model_onnx_runtime_cannot_run_is_reduced_with_shapes_from_shape_inference(tmp_path: Path) -> None:
    """Item 2, since issue 30's custom-op item: ONNX Runtime cannot run the model the probe needs (no bfloat16 Sigmoid
    on its CPU) — once an error inside the reduction (TRT983), now the fallback probe's case: ONNX shape inference
    gives the shapes, the LayerNormalization alone is the minimal model, and the record says which probe and why."""
    _bf16_then_layernorm(tmp_path / "m.onnx")
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 16, 64]", smem=True))
    code, record, stderr = _reduce(tmp_path, "m")
    assert record is not None, stderr[-2000:]
    assert code == 0 and record["outcome"] == "configuration" and record["error"] is None, record["causeText"]
    assert record["minimal"]["nodeNames"] == ["ln"]
    probe = record["shapeProbe"]
    assert probe["probe"] == "onnx_shape_inference" and "Sigmoid" in probe["reason"], probe
    assert "shapes from ONNX shape inference: ONNX Runtime could not run the model: " in record["causeText"]


def test_a_failing_branch_that_ends_before_another_outputs_deeper_branch_is_kept(tmp_path: Path) -> None:
    """Item 3: every pass keeps what the failing branch needs: 22 nodes → the LayerNormalization alone, and the
    minimal model fails the same way when built again on its own."""
    _two_outputs(tmp_path / "m.onnx")
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 16, 64]", smem=True))
    code, record, stderr = _reduce(tmp_path, "m")
    assert record is not None, stderr[-2000:]
    assert code == 0 and record["originalNodes"] == 22
    assert record["minimal"]["nodeNames"] == ["ln"], record["minimal"]
    assert record["outcome"] == "configuration" and record["causeSettings"] == {"tactic_shared_memory_kib": 32}
    minimal = onnx.load(str(tmp_path / ".trtls" / "reduce" / record["id"] / "minimal.onnx"))
    assert [n.op_type for n in minimal.graph.node] == ["LayerNormalization"]
    assert [o.name for o in minimal.graph.output] == ["out1"]


def test_a_failing_first_node_with_no_setting_changed_is_the_model(tmp_path: Path) -> None:
    """Item 4: the model's first node alone fails the same way and the recipe changes no setting: the cause is the
    model (that node), not the settings."""
    _if_first(tmp_path / "m.onnx", after=4)
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 16]", smem=False))
    code, record, stderr = _reduce(tmp_path, "m")
    assert record is not None, stderr[-2000:]
    assert code == 0 and record["outcome"] == "reduced" and record["cause"] == "model", record["causeText"]
    assert record["causeSettings"] == {} and "settings are the cause" not in record["causeText"]
    assert "changes no builder setting" in record["causeText"]
    assert record["minimal"]["nodeNames"] == ["if"] and record["originalNodes"] == 5


def test_a_reduction_that_removes_nothing_does_not_say_reduced(tmp_path: Path) -> None:
    """Item 3's last clause: a one-node failing model has nothing smaller that fails: `not_reduced`, exit 1."""
    _if_first(tmp_path / "m.onnx", after=0)
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 16]", smem=False))
    code, record, stderr = _reduce(tmp_path, "m")
    assert record is not None, stderr[-2000:]
    assert code == 1 and record["outcome"] == "not_reduced", record["causeText"]
    assert "no smaller model fails the same way" in record["causeText"]
    assert "reduced" not in record["headline"]


def _vad(ws: Path) -> None:
    import shutil

    from tests.onnx_files.third_party import fetch_all

    ws.mkdir(exist_ok=True)
    shutil.copyfile(fetch_all()["silero_vad_if"], ws / "vad.onnx")
    (ws / "trtls.toml").write_text(
        '[engines.vad]\nonnx = "vad.onnx"\noutput = "build/vad.engine"\n\n[[engines.vad.profiles]]\n'
        "inputs.input = { min = [1, 512], opt = [1, 512], max = [4, 512] }\n"
        "inputs.state = { min = [2, 1, 128], opt = [2, 1, 128], max = [2, 4, 128] }\n"
    )


def _stop_after_bisecting(ws: Path, trials: int) -> dict:
    """A real Ctrl-C once `trials` bisection trials have been printed."""
    cmd = [sys.executable, "-m", "trtls", "reduce", str(ws), "--engine", "vad"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    seen = 0
    for line in proc.stdout:
        seen += " outputs " in line
        if seen == trials:
            proc.send_signal(signal.SIGINT)
            break
    proc.communicate(timeout=300)
    assert proc.returncode == 130
    (folder,) = (ws / ".trtls" / "reduce").iterdir()
    return json.loads((folder / "result.json").read_text())


def test_a_stopped_reduction_resumes_where_it_stopped(tmp_path: Path) -> None:
    """Item 6: Ctrl-C records the verdicts; `--resume` replays them (not rebuilt) and ends where an uninterrupted
    reduction ends, building only the rest."""
    fresh_ws, ws = tmp_path / "fresh", tmp_path / "ws"
    _vad(fresh_ws)
    _vad(ws)
    code, fresh, stderr = _reduce(fresh_ws, "vad")
    assert fresh is not None and code == 0, stderr[-2000:]
    stopped = _stop_after_bisecting(ws, 3)
    assert stopped["outcome"] == "cancelled"
    measured = [t for t in stopped["trials"] if t["outcome"] != "cancelled"]
    assert len(stopped["resume"]["verdicts"]) == len(measured) >= 4  # confirm and three bisection trials at least
    code, resumed, stderr = _reduce(ws, "vad", "--resume")
    assert resumed is not None and code == 0, stderr[-2000:]
    assert resumed["resumedFrom"] == stopped["id"] and "continuing" in resumed["resumeNote"]
    replayed = [t for t in resumed["trials"] if t.get("replayed")]
    assert len(replayed) == len(measured)
    assert resumed["trialsBuilt"] + len(measured) == fresh["trialsBuilt"], (resumed["trialsByStep"], fresh)
    assert resumed["minimal"]["nodeNames"] == fresh["minimal"]["nodeNames"]
    assert resumed["outcome"] == fresh["outcome"] == "reduced"


def test_a_resume_after_the_recipe_changed_starts_over_and_says_why(tmp_path: Path) -> None:
    _vad(tmp_path)
    stopped = _stop_after_bisecting(tmp_path, 1)
    recipe = tmp_path / "trtls.toml"
    recipe.write_text(recipe.read_text() + "\n[engines.vad.builder]\noptimization_level = 2\n")
    code, record, stderr = _reduce(tmp_path, "vad", "--resume", "--max-trials", "2")
    assert record is not None, stderr[-2000:]
    assert record["resumedFrom"] is None and stopped["id"] in record["resumeNote"]
    assert "the engine's table in the recipe changed" in record["resumeNote"]
    assert not any(t.get("replayed") for t in record["trials"])


def _chain(path: Path, ops: list[tuple[str, str]], shape: list[object], out: list[object]) -> None:
    """x → each (op, name) in turn → y; a TopK reads k = 5000 (TensorRT's limit is 3840)."""
    nodes, prev, extra = [], "x", []
    for i, (op, name) in enumerate(ops):
        made = "y" if i == len(ops) - 1 else f"t{i}"
        if op == "TopK":
            nodes.append(helper.make_node("TopK", [prev, "k"], [made, f"{made}_indices"], name=name))
            extra = [numpy_helper.from_array(np.array([5000], np.int64), "k")]
        else:
            nodes.append(helper.make_node(op, [prev], [made], name=name))
        prev = made
    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes, "chain", [value("x", TensorProto.FLOAT, shape)], [value("y", TensorProto.FLOAT, out)], extra
    )
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def test_a_parser_rejection_is_classified_and_reduced(tmp_path: Path) -> None:
    """Item 5: TensorRT-RTX's parser refuses Det (`ONNX parse failed: node 2 'det' (Det): false`); the reduction
    classifies it by the node and message and reduces to that node."""
    ops = [("Relu", "relu"), ("Sigmoid", "sig"), ("Det", "det"), ("Neg", "neg"), ("Abs", "abs")]
    _chain(tmp_path / "m.onnx", ops, ["N", 4, 4], ["N"])
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 4, 4]", smem=False))
    code, record, stderr = _reduce(tmp_path, "m")
    assert record is not None, stderr[-2000:]
    assert record["failure"]["kind"] == "parser_rejection" and record["failure"]["layer"] == "det"
    assert code == 0 and record["outcome"] == "reduced" and record["minimal"]["nodeNames"] == ["det"]


@pytest.mark.parametrize("name", ["o'det", "det\x1b]0;x\x07"])
def test_a_parser_rejection_of_a_node_whose_name_needs_quoting_is_classified_by_its_real_name(
    tmp_path: Path, name: str
) -> None:
    """The worker writes the node's name as `repr()` writes it: in double quotes when it holds an apostrophe, its
    control characters as escapes. The classifier read only '…': a rejection of `o'det` was "not reproduced" — the
    original failure itself said not to reproduce — and an escaped name never equalled the node's."""
    ops = [("Relu", "relu"), ("Sigmoid", "sig"), ("Det", name), ("Neg", "neg"), ("Abs", "abs")]
    _chain(tmp_path / "m.onnx", ops, ["N", 4, 4], ["N"])
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 4, 4]", smem=False))
    code, record, stderr = _reduce(tmp_path, "m")
    assert record is not None, stderr[-2000:]
    assert record["failure"]["kind"] == "parser_rejection" and record["failure"]["layer"] == name, record["failure"]
    assert code == 0 and record["outcome"] == "reduced" and record["minimal"]["nodeNames"] == [name]


def test_a_failure_nothing_classifies_is_reduced_with_fail_regex(tmp_path: Path) -> None:
    """Item 5: TopK with k over TensorRT's limit fails with an API usage error nothing classifies: without a pattern
    the reduction says how to reduce it; with --fail-regex it reduces to the TopK."""
    ops = [("Relu", "relu"), ("Sigmoid", "sig"), ("TopK", "topk"), ("Neg", "neg")]
    _chain(tmp_path / "m.onnx", ops, ["N", 8192], ["N", 5000])
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 8192]", smem=False))
    code, record, stderr = _reduce(tmp_path, "m")
    assert record is not None, stderr[-2000:]
    assert code == 1 and record["outcome"] == "not_reproduced" and "--fail-regex" in record["causeText"]
    code, record, stderr = _reduce(tmp_path, "m", "--fail-regex", r"K exceeds the maximum value allowed \(3840\)")
    assert record is not None, stderr[-2000:]
    assert record["failure"]["kind"] == "fail_regex" and "--fail-regex" in record["rule"]
    assert code == 0 and record["outcome"] == "reduced" and record["minimal"]["nodeNames"] == ["topk"]
    code, _, stderr = _reduce(tmp_path, "m", "--fail-regex", "(unclosed")
    assert code == 2 and "not a regular expression" in stderr


def test_the_trial_budget_is_bounded(tmp_path: Path) -> None:
    """Issue 30 item 8, for the command: `--max-trials` is 1 to 10,000; 0 or 10^12 is a usage error before any build."""
    _if_first(tmp_path / "m.onnx", after=0)
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 16]", smem=False))
    for budget in ("0", str(10**12)):
        code, record, stderr = _reduce(tmp_path, "m", "--max-trials", budget)
        assert code == 2 and record is None and "outside 1 to 10000" in stderr, stderr[-500:]
    assert not (tmp_path / ".trtls").exists()


def test_a_stop_before_any_cause_is_headlined_stopped_not_does_not_reproduce(tmp_path: Path) -> None:
    """Item 8 (accurate headlines): the failure reproduced (trial 0 still fails), then the trial budget or a Ctrl-C
    stopped the search before a smaller failing model: the headline says `stopped`, never `does not reproduce` (the
    last trial built, or was cancelled: no verdict)."""
    layernorm_last(tmp_path / "m.onnx")
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 16, 64]", smem=True))
    code, record, stderr = _reduce(tmp_path, "m", "--max-trials", "2")
    assert record is not None, stderr[-2000:]
    assert record["outcome"] == "stopped" and record["minimal"] is None, record["causeText"]
    assert record["trials"][0]["stillFails"] and record["trials"][-1]["outcome"] == "built"
    assert record["headline"] == "reduce m · trial 2 · 31 nodes · stopped", record["headline"]
    page = subprocess.run(
        [sys.executable, "-m", "trtls", "report", "--reduction", record["id"], "--recipe", str(tmp_path), "-o", "-"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "reduce m · trial 2 · 31 nodes · stopped" in page and "2 (confirm 1, outputs 1)" in page, "no dict repr"
    cmd = [sys.executable, "-m", "trtls", "reduce", str(tmp_path), "--engine", "m"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:  # the first bisection trial has ended (it builds): stop during the next
        if " outputs " in line:
            proc.send_signal(signal.SIGINT)
            break
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130, err[-2000:]
    newest = max((tmp_path / ".trtls" / "reduce").iterdir(), key=lambda p: p.stat().st_mtime_ns)
    stopped = json.loads((newest / "result.json").read_text())
    assert stopped["outcome"] == "cancelled" and stopped["minimal"] is None, stopped["trials"]
    assert stopped["headline"].endswith(" · 31 nodes · stopped"), stopped["headline"]
    assert stopped["headline"] in out and "does not reproduce" not in stopped["headline"]


def test_a_reduction_folder_that_cannot_be_made_is_said_as_such(tmp_path: Path) -> None:
    """Item 2: `.trtls/reduce` is a file: the error says the reduction failed making its folder (not "loading the
    model"), and the evidence line names result.json as the record not written (there is no minimal.onnx to miss)."""
    layernorm_last(tmp_path / "m.onnx", depth=3)
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 16, 64]", smem=True))
    (tmp_path / ".trtls").mkdir()
    (tmp_path / ".trtls" / "reduce").write_text("not a folder")
    code, record, stderr = _reduce(tmp_path, "m")
    assert record is not None and code == 1, stderr[-2000:]
    assert record["outcome"] == "failed" and record["errorCode"] == "TRT983" and record["trials"] == []
    assert record["error"].startswith("the reduction failed while making the reduction's folder "), record["error"]
    assert "not a folder" in record["error"] and "loading the model" not in record["error"]
    assert record["evidenceError"].endswith("the record result.json was not written"), record["evidenceError"]


def test_a_resumed_reduction_names_the_min_good_model_an_uninterrupted_one_names(tmp_path: Path) -> None:
    """Item 6 with --min-good: stopped by the trial budget after the first bisection trials (all of which build) and
    resumed, the reduction ends on the same minimal model and the same min good model (the replayed candidates that
    built count: they are cut again and written) as a reduction never stopped."""
    fresh_ws, ws = tmp_path / "fresh", tmp_path / "ws"
    for folder in (fresh_ws, ws):
        folder.mkdir()
        layernorm_last(folder / "m.onnx")
        (folder / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 16, 64]", smem=True))
    code, fresh, stderr = _reduce(fresh_ws, "m")
    assert fresh is not None and code == 0, stderr[-2000:]
    code, stopped, stderr = _reduce(ws, "m", "--max-trials", "3")
    assert stopped is not None and stopped["outcome"] == "stopped", stderr[-2000:]
    assert [t["outcome"] for t in stopped["trials"][1:]] == ["built", "built"], "the bisection's first trials build"
    code, resumed, stderr = _reduce(ws, "m", "--resume")
    assert resumed is not None and code == 0 and resumed["resumedFrom"] == stopped["id"], stderr[-2000:]
    assert resumed["minimal"]["nodeNames"] == fresh["minimal"]["nodeNames"] == ["ln"]
    assert fresh["minGood"] is not None and fresh["minGood"]["trial"] == 1, fresh["minGood"]
    assert resumed["minGood"] == fresh["minGood"], (resumed["minGood"], fresh["minGood"])
    good = onnx.load(str(ws / ".trtls" / "reduce" / resumed["id"] / "min_good.onnx"))
    assert len(good.graph.node) == fresh["minGood"]["nodes"]


def test_the_whole_model_is_not_built_again_by_the_bisection(tmp_path: Path) -> None:
    """The failing node is the last one: the outputs bisection ends on the span of every node, which is the model the
    confirm trial built (docs/triage.md: a cut already built is not built again) — its verdict is reused, so no trial
    after the first builds the whole model, and the reduction still ends on the failing node."""
    layernorm_last(tmp_path / "m.onnx")
    (tmp_path / "trtls.toml").write_text(_engine("m", "m.onnx", "[N, 16, 64]", smem=True))
    code, record, stderr = _reduce(tmp_path, "m")
    assert record is not None and code == 0, stderr[-2000:]
    whole = [t["trial"] for t in record["trials"] if t["nodes"] == record["originalNodes"]]
    assert whole == [0], [(t["step"], t["nodes"]) for t in record["trials"]]
    assert record["minimal"]["nodeNames"] == ["ln"] and record["outcome"] == "configuration"
    assert record["trialsBuilt"] == len(record["trials"]) == sum(record["trialsByStep"].values())
