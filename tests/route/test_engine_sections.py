"""One list of engine section names, trtls's and TensorRT Model Connect's, read by gate 3, gates 4–5 and the
rollback drill (a TRTMC bundle's `engine_plan` is an engine, not 'no engine section')."""

from __future__ import annotations

from trtls.bundle import read_bundle, write_bundle
from trtls.bundle.sections import engine_section, is_engine_section


def test_trtmc_engine_section_names_are_engines():
    assert engine_section(["config.json", "engine_plan"]) == "engine_plan"
    assert engine_section(["engine_plan_tp_rank1", "engine_plan_tp_rank0"]) == "engine_plan_tp_rank0"
    assert engine_section(["prefill_engine_plan", "vision_engine_plan"]) == "prefill_engine_plan"
    assert engine_section(["model.onnx", "tokenizer.json"]) is None
    assert is_engine_section("vision_engine_plan") and not is_engine_section("engine_plan_tp_rankX")


def test_a_bundle_with_an_engine_plan_section_is_found_by_the_gates(tmp_path):
    from trtls.gates.release.rollback import ENGINE_SECTIONS

    path = tmp_path / "m.bundle"
    header = {
        "model_id": "m",
        "model_type": "bert",
        "family": "bert",
        "trt_version": "10.9",
        "trt_abi": "10.9",
        "gpu_name": "x",
        "created_at": "2026-12-01T00:00:00Z",
        "precision": "fp16",
        "runtime_strategy": "encoder",
        "io_map": {},
    }
    write_bundle(path, header, {"engine_plan": b"plan bytes", "config.json": b"{}"})
    b = read_bundle(path)
    assert engine_section(b.sections) == "engine_plan" and "engine_plan" in ENGINE_SECTIONS


def test_a_nested_key_standing_in_for_a_missing_top_level_field_rejects_the_bundle(prepared, tmp_path):
    from _lifecycle_sample import ROUTE, copy

    from trtls.bundle.trtmc import shadowed_fields
    from trtls.core.recipe import load_recipe
    from trtls.gates.run import run_gates

    root = copy(prepared, tmp_path / "route")
    loaded = load_recipe(root / "trtls.toml")
    ok = {c.name: c for c in run_gates(loaded, ROUTE, [3], write_evidence=False).checks}["bundle.header_shadow"]
    assert ok.status == "pass"  # trtls writes every field at the top level
    header = {"model_id": "m", "model_type": "bert", "trt_version": "10.9"}  # no `family` at the top level
    bundle = root / "build" / "tiny_ort.bundle"
    write_bundle(bundle, header, {"model.onnx": b"onnx"}, provenance={"family": "SPOOF"})
    assert shadowed_fields(read_bundle(bundle).header)[0] == {
        "field": "family",
        "at": "trtls.provenance.family",
        "value": "SPOOF",
    }
    got = {c.name: c for c in run_gates(loaded, ROUTE, [3], write_evidence=False).checks}["bundle.header_shadow"]
    assert got.status == "reject" and got.code == "TRT711"
    assert "'family' is read from trtls.provenance.family = 'SPOOF'" in got.message
