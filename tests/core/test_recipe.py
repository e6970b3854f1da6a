"""Recipe loading: every malformed recipe gives located errors (file:line:col) and no recipe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trtls.core.recipe import load_recipe, recipe_json_schema

GOOD = """\
[engines.demo]
onnx = "m.onnx"
output = "out/demo.engine"
timing_cache = { path = "out/demo.cache", mode = "read_write" }

[engines.demo.builder]
optimization_level = 3

[[engines.demo.profiles]]
input = "input"
min = [1, 3, 8, 8]
opt = [2, 3, 8, 8]
max = [4, 3, 8, 8]
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "m.onnx").write_bytes(b"onnx")
    return tmp_path


def load(folder: Path, text: str):
    path = folder / "trtls.toml"
    path.write_text(text)
    return load_recipe(path)


def test_good_recipe_loads(folder: Path) -> None:
    loaded = load(folder, GOOD)
    assert loaded.findings == [] and loaded.recipe is not None
    eng = loaded.engine("demo")
    assert eng.builder.optimization_level == 3 and eng.profiles[0].max == [4, 3, 8, 8]
    assert loaded.resolve(eng.output) == (folder / "out/demo.engine").resolve()


def _replace(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new)


# (description, recipe text, expected code, expected line:col of the finding)
MALFORMED = [
    ("syntax error", GOOD + "\n[engines.demo\n", "TRT100", "15:14"),
    (
        "unknown key in engine",
        _replace('output = "out/demo.engine"', 'output = "out/demo.engine"\ncolour = 1'),
        "TRT101",
        "4:1",
    ),
    ("misspelt builder key", _replace("optimization_level = 3", "optimisation_level = 3"), "TRT101", "7:1"),
    ("unknown top-level table", "[engine.demo]\nonnx = 'm.onnx'\n", "TRT101", "1:1"),
    ("wrong type for level", _replace("optimization_level = 3", 'optimization_level = "high"'), "TRT102", "7:22"),
    ("level out of range", _replace("optimization_level = 3", "optimization_level = 9"), "TRT102", "7:22"),
    (
        "negative grace",
        _replace('output = "out/demo.engine"', 'output = "out/demo.engine"\ncancel_grace_s = -1'),
        "TRT102",
        "4:18",
    ),
    ("missing onnx key", _replace('onnx = "m.onnx"\n', ""), "TRT103", "1:1"),
    ("missing profile input", _replace('input = "input"\n', ""), "TRT103", "9:1"),
    ("bad cache mode", _replace('mode = "read_write"', 'mode = "rw"'), "TRT106", "4:50"),
    (
        "bad builder module",
        _replace('output = "out/demo.engine"', 'output = "out/demo.engine"\nbuilder_module = "trt"'),
        "TRT106",
        "4:18",
    ),
    ("bad compute capability", _replace("optimization_level = 3", 'compute_capabilities = ["SM90"]'), "TRT106", "7:25"),
    ("missing ONNX file", _replace('onnx = "m.onnx"', 'onnx = "missing.onnx"'), "TRT104", "2:8"),
    ("zero dimension", _replace("min = [1, 3, 8, 8]", "min = [0, 3, 8, 8]"), "TRT105", "11:8"),
    ("rank mismatch", _replace("max = [4, 3, 8, 8]", "max = [4, 3, 8]"), "TRT105", "9:1"),
    ("min > opt", _replace("opt = [2, 3, 8, 8]", "opt = [2, 3, 4, 8]"), "TRT105", "12:14"),
    ("output overwrites onnx", _replace('output = "out/demo.engine"', 'output = "m.onnx"'), "TRT109", "3:10"),
    ("shape is not a list", _replace("min = [1, 3, 8, 8]", 'min = "1x3x8x8"'), "TRT102", "11:7"),
    ("bad engine name", GOOD.replace("engines.demo", 'engines."my engine"'), "TRT108", "1:1"),
    (
        "shorthand key beside inputs",
        GOOD + '\n[[engines.demo.profiles]]\ninput = "x"\ninputs.a = { min = [1], opt = [1], max = [1] }\n',
        "TRT105",
        "16:1",
    ),
    (
        "min > opt in an inputs table",
        GOOD + "\n[[engines.demo.profiles]]\ninputs.ids = { min = [1, 8], opt = [1, 4], max = [2, 9] }\n",
        "TRT105",
        "16:40",
    ),
    (
        "rank mismatch in a sub-table",
        GOOD + "\n[[engines.demo.profiles]]\n[engines.demo.profiles.inputs.ids]\nmin = [1]\nopt = [1]\nmax = [1, 2]\n",
        "TRT105",
        "16:1",
    ),
    ("profile with nothing", GOOD + "\n[[engines.demo.profiles]]\n", "TRT103", "15:1"),
    (
        "inputs entry without max",
        GOOD + "\n[[engines.demo.profiles]]\ninputs.ids = { min = [1], opt = [1] }\n",
        "TRT103",
        "16:1",
    ),
]

TWO_INPUTS = """\
[engines.enc]
onnx = "m.onnx"
output = "enc.engine"

[[engines.enc.profiles]]
inputs.input_ids = { min = [1, 1], opt = [1, 64], max = [4, 128] }
inputs.attention_mask = { min = [1, 1], opt = [1, 64], max = [4, 128] }

[[engines.enc.profiles]]
[engines.enc.profiles.inputs.input_ids]
min = [1, 128]
opt = [8, 256]
max = [16, 512]
[engines.enc.profiles.inputs.attention_mask]
min = [1, 128]
opt = [8, 256]
max = [16, 512]

[[engines.enc.profiles]]
input = "input_ids"
min = [1, 1]
opt = [1, 1]
max = [1, 1]
"""


def test_profiles_give_every_input_and_become_one_tensorrt_profile_each(folder: Path) -> None:
    """Inline tables, sub-tables and the one-input shorthand: one recipe entry = one TensorRT profile."""
    loaded = load(folder, TWO_INPUTS)
    assert loaded.findings == [] and loaded.recipe is not None
    job = loaded.engine("enc").job_profiles()
    assert len(job) == 3
    assert job[0] == {
        "inputs": [
            {"input": "input_ids", "min": [1, 1], "opt": [1, 64], "max": [4, 128]},
            {"input": "attention_mask", "min": [1, 1], "opt": [1, 64], "max": [4, 128]},
        ]
    }
    assert [e["input"] for e in job[1]["inputs"]] == ["input_ids", "attention_mask"]
    assert job[1]["inputs"][1]["max"] == [16, 512]
    assert job[2] == {"inputs": [{"input": "input_ids", "min": [1, 1], "opt": [1, 1], "max": [1, 1]}]}


def test_two_shorthand_profiles_for_one_input_are_two_profiles(folder: Path) -> None:
    text = (
        GOOD
        + '\n[[engines.demo.profiles]]\ninput = "input"\nmin = [8, 3, 8, 8]\nopt = [16, 3, 8, 8]\nmax = [32, 3, 8, 8]\n'
    )
    loaded = load(folder, text)
    assert loaded.findings == [] and loaded.recipe is not None
    assert [p["inputs"][0]["max"][0] for p in loaded.engine("demo").job_profiles()] == [4, 32]


@pytest.mark.parametrize("desc,text,code,where", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_recipe_is_located_and_blocks_builds(
    folder: Path, desc: str, text: str, code: str, where: str
) -> None:
    loaded = load(folder, text)
    assert loaded.recipe is None, "no build may start from a recipe with errors"
    located = {(f.code, loaded.source_map.range(f.path, f.on_value).human()) for f in loaded.errors}
    assert (code, where) in located, f"{desc}: got {located}"
    msg = next(loaded.location(f) for f in loaded.errors if f.code == code)
    assert msg.startswith(str(folder / "trtls.toml") + ":")


def test_did_you_mean_suggestions(folder: Path) -> None:
    loaded = load(folder, _replace("optimization_level = 3", "optimisation_level = 3"))
    assert loaded.errors[0].data["suggestion"] == "optimization_level"
    loaded = load(folder, _replace('mode = "read_write"', 'mode = "read_wrte"'))
    assert loaded.errors[0].data["suggestion"] == "read_write"


def test_json_schema_exports_every_engine_key(tmp_path: Path) -> None:
    from trtls.cli.main import main

    out = tmp_path / "schema.json"
    assert main(["schema", "-o", str(out)]) == 0
    schema = json.loads(out.read_text())
    engine = schema["$defs"]["EngineRecipe"]
    assert {"onnx", "output", "timing_cache", "builder", "profiles", "cancel_grace_s"} <= set(engine["properties"])
    assert engine["additionalProperties"] is False
    assert schema == json.loads(json.dumps(recipe_json_schema()))


def test_cli_reports_file_line_col_and_exit_2(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from trtls.cli.main import main

    (folder / "trtls.toml").write_text(_replace("optimization_level = 3", "optimization_level = 9"))
    assert main(["build", str(folder / "trtls.toml")]) == 2
    err = capsys.readouterr().err
    assert f"{folder / 'trtls.toml'}:7:22: TRT102" in err
    assert not (folder / ".trtls").exists(), "no worker was started"


def test_shipped_schema_is_current() -> None:
    """server/trtls/schema/trtls.schema.json is what editors load (e.g. Even Better TOML): regenerate it with
    `trtls schema -o server/trtls/schema/trtls.schema.json` when the models change."""
    shipped = Path(__file__).parents[2] / "server" / "trtls" / "schema" / "trtls.schema.json"
    assert json.loads(shipped.read_text()) == json.loads(json.dumps(recipe_json_schema()))


def test_schema_accepts_the_samples_and_types_route_keys() -> None:
    """Editors validate with the schema alone: both samples must pass it, and a route's mistakes must show
    (a misspelt threshold, a string where a number goes), not only an engine's."""
    import tomllib

    import jsonschema  # the test extra: a missing one fails, not skips

    root = Path(__file__).parents[2]
    validator = jsonschema.Draft202012Validator(recipe_json_schema())
    for sample in ("samples/quickstart/trtls.toml", "samples/route/trtls.toml", "samples/farm/trtls.toml"):
        data = tomllib.loads((root / sample).read_text())
        assert [e.message for e in validator.iter_errors(data)] == [], sample
    data = tomllib.loads((root / "samples/route/trtls.toml").read_text())
    data["routes"]["tiny"]["thresholds"]["latency_p99"] = 5
    data["routes"]["tiny"]["thresholds"]["regression_floor_ms"] = "0.1"
    errors = sorted(e.message for e in validator.iter_errors(data))
    assert any("latency_p99" in m for m in errors) and any("'0.1' is not of type 'number'" in m for m in errors), errors


def test_nested_arrays_of_tables_get_their_own_positions() -> None:
    from trtls.core.tomlpos import parse

    data, sm = parse("[[a]]\nx = 1\n[[a.b]]\ny = 2\n[[a]]\nx = 3\n[[a.b]]\ny = 4\n[a.c]\nz = 5\n")
    assert data["a"][1]["b"][0]["y"] == 4
    assert sm.range(("a", 1, "b", 0, "y")).human() == "8:1" and sm.range(("a", 0, "b", 0, "y")).human() == "4:1"
    assert sm.range(("a", 1, "c", "z")).human() == "10:1"
