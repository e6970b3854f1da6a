"""Will it load there, before the build (issue 33, "Will it load there"): `core.loads_on`, the one rule every face
renders. Its TensorRT-RTX answers are the lists TensorRT-RTX itself named on the lent H200 for the same settings
(tests/data/engine_validity/h200.json, parsed by the worker's own parser)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trtls.builds.worker.engine_validity import parse_validity_message
from trtls.core.loads_on import RTX_DEFAULT, compute_capability, engine_loads_on, loads_on
from trtls.core.recipe import EngineRecipe

H200 = json.loads((Path(__file__).parents[1] / "data" / "engine_validity" / "h200.json").read_text())


def said_on_the_h200(case: str) -> list[str]:
    ((_, message),) = H200["cases"][case]["logged"]
    parsed = parse_validity_message(message)
    assert parsed is not None
    return parsed["supported"]


@pytest.mark.parametrize(
    ("case", "settings"),
    [
        ("default", {}),
        ("SM89", {"compute_capabilities": ["SM89"]}),
        ("SM80+SM120", {"compute_capabilities": ["SM80", "SM120"]}),
        ("ampere_plus", {"hardware_compatibility_level": "ampere_plus"}),
    ],
)
def test_before_the_build_it_says_what_tensorrt_rtx_said_after_it(case: str, settings: dict) -> None:
    eng = EngineRecipe.model_validate(
        {"onnx": "m.onnx", "output": "m.engine", "builder_module": "tensorrt_rtx", "builder": settings}
    )
    assert list(engine_loads_on(eng).capabilities) == said_on_the_h200(case)


def test_the_build_record_s_words_give_the_same_answer() -> None:
    """A build record says "builder default" for a setting left unset, and the read-back names otherwise."""
    assert loads_on("tensorrt_rtx", "builder default", "builder default").capabilities == RTX_DEFAULT
    assert loads_on("tensorrt_rtx", ["SM89"]).text() == '8.9 (compute_capabilities = ["SM89"])'
    assert loads_on("tensorrt_rtx").text() == "8.0 8.6 8.9 12.0 12.1 >12.0 (builder default (TensorRT-RTX))"


def test_covers_reads_tensorrt_s_later_than_token() -> None:
    default = loads_on("tensorrt_rtx")
    assert default.covers("8.9") and default.covers("12.0") and default.covers("13.0")
    assert default.covers("9.0") is False and default.covers("7.5") is False  # the H200; Turing
    assert loads_on("tensorrt_rtx", ["SM89"]).covers("12.0") is False


def test_where_it_is_not_known_before_the_build_it_says_so() -> None:
    current = loads_on("tensorrt_rtx", ["CURRENT"])
    assert current.capabilities == () and current.covers("8.9") is None and current.build_gpu
    assert "the GPU it is built on" in current.text()
    assert loads_on("tensorrt_rtx", ["CURRENT"], build_gpu_cc="8.9").capabilities == ("8.9",)
    full = loads_on("tensorrt", ["SM89"])  # full TensorRT does not apply compute_capabilities
    assert full.capabilities == () and full.covers("8.9") is None and "the GPU it is built on" in full.text()
    assert loads_on("tensorrt", None, "ampere_plus").covers("9.0") is True
    assert loads_on("tensorrt", None, "ampere_plus").covers("7.5") is False
    assert loads_on("tensorrt", None, "same_compute_capability", "9.0").capabilities == ("9.0",)
    auto = loads_on("auto")
    assert auto.module is None and auto.covers("8.9") is None and 'builder_module = "auto"' in auto.text()


@pytest.mark.parametrize(
    ("target", "cc"),
    [("SM89", "8.9"), ("sm_90", "9.0"), ("SM120", "12.0"), ("8.6", "8.6"), ("86", "8.6"), ("NVIDIA H200", None)],
)
def test_a_target_s_compute_capability(target: str, cc: str | None) -> None:
    assert compute_capability(target) == cc


RECIPE = """version = 1

[engines.e]
onnx = "m.onnx"
output = "build/e.engine"
builder_module = "tensorrt_rtx"
builder = { compute_capabilities = ["SM89"] }

[engines.auto]
onnx = "m.onnx"
output = "build/auto.engine"

[routes.r]
engine = "e"
checkpoint = { path = "ck", id = "org/m", revision = "d065c296e0fef52b015f4755c02dda4b3064c1d2" }
intended_use = "tests"
allowed_licenses = ["mit"]
bundle = "build/r.bundle"
targets = ["SM89", "SM120", "9.0", "NVIDIA H200"]

[routes.a]
engine = "auto"
checkpoint = { path = "ck", id = "org/m", revision = "d065c296e0fef52b015f4755c02dda4b3064c1d2" }
intended_use = "tests"
allowed_licenses = ["mit"]
bundle = "build/a.bundle"
targets = ["SM90"]
"""


def test_a_route_target_the_engine_will_not_load_on_is_a_located_trt152_at_check_time(tmp_path: Path) -> None:
    from trtls.core.recipe import load_recipe

    (tmp_path / "trtls.toml").write_text(RECIPE)
    loaded = load_recipe(tmp_path / "trtls.toml")
    found = [f for f in loaded.findings if f.code == "TRT152"]
    assert [f.path for f in found] == [("routes", "r", "targets", 1), ("routes", "r", "targets", 2)]
    sm120, hopper = found
    assert sm120.severity.value == "warning"
    assert sm120.message == (
        "target SM120: engine portability: engine e will not load on compute capability 12.0 (it loads on 8.9 "
        '(compute_capabilities = ["SM89"])); add "SM120" to engines.e.builder.compute_capabilities'
    )
    assert hopper.message.endswith(
        "TensorRT-RTX cannot build for compute capability 9.0: build it with full TensorRT on that GPU"
    )
    where = loaded.source_map.range(sm120.path, True)
    line = RECIPE.splitlines()[where.start_line]
    assert line[where.start_col : where.end_col] == '"SM120"'
    # builder_module = "auto": which module builds it is not known before the build; gate 5 judges it (TRT911)
    assert not [f for f in found if f.path[1] == "a"]


def test_check_with_the_builder_says_where_each_engine_will_load(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`trtls check --builder` probes the module a build would load (a real child process) and says, per engine,
    where it will load (TRT153, information: not a problem, the exit stays 0)."""
    from tests.lsp.lsp_helpers import write_static_onnx
    from trtls.cli.main import main
    from trtls.debug_info import probe_builder

    write_static_onnx(tmp_path / "m.onnx")
    (tmp_path / "trtls.toml").write_text(
        'version = 1\n\n[engines.demo]\nonnx = "m.onnx"\noutput = "build/demo.engine"\n\n'
        '[engines.sm89]\nonnx = "m.onnx"\noutput = "build/sm89.engine"\nbuilder_module = "tensorrt_rtx"\n'
        'builder = { compute_capabilities = ["SM89"] }\n'
    )
    probe = probe_builder()
    assert main(["check", str(tmp_path), "--builder"]) == 0
    out = capsys.readouterr().out
    said = [line.split(": TRT153 information: ", 1)[1] for line in out.splitlines() if "TRT153" in line]
    auto = (
        "engine demo will load on compute capabilities 8.0 8.6 8.9 12.0 12.1 >12.0 (builder default (TensorRT-RTX))"
        if probe.get("module") == "tensorrt_rtx"
        else "engine demo will load on the GPU it is built on (full TensorRT)"
    )
    assert said == [auto, 'engine sm89 will load on compute capabilities 8.9 (compute_capabilities = ["SM89"])'], out
