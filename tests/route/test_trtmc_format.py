"""`bundle_format = "trtmc"`: `trtls route build` writes a bundle TensorRT Model Connect's native runtime loads — a real
TensorRT-RTX build of a sentence-transformers BERT checkpoint, read back with trtls's own TRTMC-format reader
(`bundle.trtmc`): the engine as `engine_plan`, a `config.json` dispatch record (registered runtime_strategy,
engine_backend, trt_version / trt_abi as major.minor), tokenizer and sentence-transformers files under their own
names, every top-level header field before trtls's record. Gate 3 accepts and verifies it. No TRTMC runtime runs here
(not installable): the check is against TRTMC's documented format."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from tests.checkpoint._bert import bert_feed
from tests.route.test_fidelity import sentence_transformers_checkpoint

from trtls.bundle import read_bundle, verify_bundle
from trtls.bundle.trtmc import ENCODER_STRATEGIES, TRTMC_FIELDS, read_trtmc
from trtls.bundle.trtmc_contract import RTX_PROBLEM
from trtls.checkpoint.lock import lock_route
from trtls.core.recipe import load_recipe
from trtls.gates.run import run_gates
from trtls.route.build import RouteBuildError, build_route
from trtls.runtimes import save_npz

RECIPE = """\
[engines.st]
onnx = "build/st.onnx"
output = "build/st.engine"
builder_module = "tensorrt_rtx"

[[engines.st.profiles]]
inputs.input_ids      = { min = [1], opt = [8], max = [16] }
inputs.attention_mask = { min = [1], opt = [8], max = [16] }

[routes.st]
engine = "st"
checkpoint = { path = "ck", revision = "cccccccccccccccccccccccccccccccccccccccc" }
intended_use = "tests: a TRTMC-format bundle"
allowed_licenses = ["apache-2.0"]
bundle = "build/st.bundle"
bundle_format = "trtmc"
max_input_tokens = 16
runtime = "tensorrt_rtx"
reference_inputs = "inputs/reference.npz"
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("trtmc-format")
    sentence_transformers_checkpoint(root / "ck")
    (root / "inputs").mkdir()
    save_npz(root / "inputs" / "reference.npz", bert_feed(batch=2, seq=8))
    (root / "trtls.toml").write_text(RECIPE)
    lock_route(load_recipe(root / "trtls.toml"), "st")
    result = asyncio.run(build_route(root / "trtls.toml", "st"))
    assert result.ok, result.message
    return root


def test_the_bundle_is_what_trtmcs_native_loader_reads(built: Path) -> None:
    path = built / "build" / "st.bundle"
    assert verify_bundle(path) == []
    view = read_trtmc(path)
    assert view.load_problems() == [RTX_PROBLEM]  # TensorRT-RTX is all this machine builds with
    # the engine section TRTMC's encoder plugin loads, byte for byte the engine the build made
    assert "engine_plan" in view.sections and "engine" not in view.sections
    bundle = read_bundle(path)
    assert (
        bundle.section_sha256("engine_plan")
        == json.loads(next((built / ".trtls" / "runs").glob("*/summary.json")).read_text())["engineArtifact"]["sha256"]
    )
    # config.json is the dispatch record: the dispatch keys first (first occurrence wins), then the checkpoint's
    config = view.config
    assert config is not None and list(config)[:5] == [
        "runtime_strategy",
        "engine_backend",
        "trt_version",
        "trt_abi",
        "precision",
    ]
    assert config["runtime_strategy"] == "bert_encoder_only" in ENCODER_STRATEGIES
    assert config["engine_backend"] == "trt_rtx"  # a TensorRT-RTX engine
    major, minor = config["trt_version"].split(".")[:2]
    assert config["trt_abi"] == f"{major}.{minor}" and view.dispatch("trt_abi") == config["trt_abi"]
    assert config["hidden_size"] == 32 and config["tokenizer_add_special_tokens"] == 1
    # tokenizer and sentence-transformers files under their own names, byte for byte the checkpoint's
    for rel in ("tokenizer.json", "tokenizer_config.json", "modules.json", "1_Pooling/config.json"):
        assert bundle.read_section(rel) == (built / "ck" / rel).read_bytes(), rel
    assert "sentence_bert_config.json" in bundle.sections
    assert not [n for n in bundle.sections if "__" in n]
    # the header: TRTMC's fields at the top level, as TRTMC reads them, every one before trtls's record
    header = bundle.header
    assert header["trt_abi"] == config["trt_abi"] and header["runtime_strategy"] == "bert_encoder_only"
    assert header["family"] == "bert" and header["num_layers"] == 2 and header["vocab_size"] > 0
    top = list(header)
    assert top[-1] == "trtls" and top.index("sections") < top.index("trtls")
    for key in TRTMC_FIELDS:
        if key in header:
            assert view.header_field(key) == header[key], key
    assert view.header_text.index('"trtls"') > max(view.header_text.index(f'"{k}"') for k in top[:-1])


def test_gate_3_verifies_it_and_holds_it_for_its_tensorrt_rtx_engine_alone(built: Path) -> None:
    """Everything TRTMC's loader reads is right; what holds is that TRTMC's BERT builder refuses TensorRT-RTX
    (families/bert/model.py:993-994), so TRTMC supports no RTX BERT engine (issue 29: it passed with no word)."""
    res = run_gates(load_recipe(built / "trtls.toml"), "st", [3], write_evidence=False)
    by = {c.name: c for c in res.checks}
    assert [c.name for c in res.checks if c.status != "pass"] == ["bundle.trtmc_load"]
    load = by["bundle.trtmc_load"]
    assert load.status == "hold" and load.evidence["problems"] == [RTX_PROBLEM], load.message
    assert "model.py:993-994" in load.message and 'builder_module = "tensorrt"' in load.message
    assert by["bundle.artifacts"].status == "pass" and "'engine_plan'" in by["bundle.artifacts"].message


def test_gate_3_holds_a_trtls_layout_bundle_where_the_route_asks_for_trtmc(built: Path, tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(built, root, symlinks=True)
    text = (root / "trtls.toml").read_text().replace('bundle_format = "trtmc"\n', "")
    text = text.replace("min = [1], opt = [8], max = [16]", "min = [1, 1], opt = [2, 8], max = [4, 16]")  # [b, s]
    (root / "trtls.toml").write_text(text)
    assert asyncio.run(build_route(root / "trtls.toml", "st")).ok  # today's layout
    assert "engine" in read_bundle(root / "build" / "st.bundle").sections
    (root / "trtls.toml").write_text(RECIPE)
    got = {c.name: c for c in run_gates(load_recipe(root / "trtls.toml"), "st", [3], write_evidence=False).checks}
    load = got["bundle.trtmc_load"]
    assert load.status == "hold" and "engine_plan" in load.message and "runtime_strategy" in load.message


def test_a_model_type_trtmc_registers_no_strategy_for_is_refused_before_any_build(tmp_path: Path) -> None:
    from tests.gates._route_helpers import checkpoint_files, make_folder

    make_folder(tmp_path / "ck", checkpoint_files())  # model_type "tiny"
    (tmp_path / "trtls.toml").write_text(RECIPE.replace("reference_inputs", "# reference_inputs"))
    with pytest.raises(RouteBuildError, match="registers no runtime_strategy.*'tiny'"):
        asyncio.run(build_route(tmp_path / "trtls.toml", "st"))
    assert not (tmp_path / "build" / "st.engine").exists()


def test_an_onnx_route_cannot_ask_for_the_trtmc_layout(tmp_path: Path) -> None:
    (tmp_path / "ck").mkdir()
    (tmp_path / "trtls.toml").write_text(
        '[routes.o]\nonnx = "o.onnx"\ncheckpoint = { path = "ck", revision = "' + "c" * 40 + '" }\n'
        'intended_use = "t"\nallowed_licenses = ["mit"]\nbundle = "o.bundle"\nbundle_format = "trtmc"\n'
    )
    found = [f for f in load_recipe(tmp_path / "trtls.toml").findings if f.path[-1:] == ("bundle_format",)]
    assert found and found[0].code == "TRT109"
