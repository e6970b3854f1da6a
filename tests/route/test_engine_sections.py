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
