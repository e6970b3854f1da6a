"""The farm tables: [cluster], run_on, matrix — cell expansion and located errors for bad tables."""

from __future__ import annotations

from pathlib import Path

import pytest

from trtls.core.farm import expand
from trtls.core.recipe import load_recipe

BASE = """\
[cluster]
address = "local"
num_cpus = 2
labels = { "trtls/target" = "SM89" }

[engines.demo]
onnx = "m.onnx"
output = "out/demo.engine"

[engines.demo.run_on]
labels = { "trtls/target" = "{compute_capabilities}" }
num_cpus = 1

[engines.demo.matrix]
output = "out/demo-{compute_capabilities}-{optimization_level}.engine"
compute_capabilities = ["SM89", "SM120"]
optimization_level = [0, 3]
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "m.onnx").write_bytes(b"onnx")
    (tmp_path / "m16.onnx").write_bytes(b"onnx16")
    return tmp_path


def load(folder: Path, text: str):
    path = folder / "trtls.toml"
    path.write_text(text)
    return load_recipe(path)


def where(loaded, finding) -> str:
    return loaded.source_map.range(finding.path, finding.on_value).human()


def test_matrix_expands_to_cells_with_outputs_and_labels(folder: Path) -> None:
    loaded = load(folder, BASE)
    assert loaded.findings == [], loaded.findings
    eng = loaded.engine("demo")
    cells = expand("demo", eng.matrix, eng.run_on)
    assert [c.name for c in cells] == ["o0-SM89", "o0-SM120", "o3-SM89", "o3-SM120"]
    by = {c.name: c for c in cells}
    assert by["o3-SM120"].output == "out/demo-SM120-o3.engine"
    assert by["o3-SM120"].overrides["settings"] == {"optimization_level": 3, "compute_capabilities": ["SM120"]}
    assert by["o0-SM89"].labels == {"trtls/target": "SM89"}
    assert len({c.output for c in cells}) == 4
    assert loaded.recipe.cluster.address == "local" and loaded.recipe.cluster.labels == {"trtls/target": "SM89"}


def test_profile_and_precision_variants(folder: Path) -> None:
    text = BASE.replace(
        "optimization_level = [0, 3]\n",
        'precision = { fp32 = "m.onnx", fp16 = "m16.onnx" }\n'
        "[engines.demo.matrix.profiles]\n"
        'small = [{ input = "input", min = [1, 3, 8, 8], opt = [1, 3, 8, 8], max = [2, 3, 8, 8] }]\n'
        'big = [{ input = "input", min = [1, 3, 8, 8], opt = [8, 3, 8, 8], max = [16, 3, 8, 8] }]\n',
    ).replace("{optimization_level}", "{profiles}-{precision}")
    loaded = load(folder, text)
    assert loaded.findings == [], loaded.findings
    eng = loaded.engine("demo")
    cells = expand("demo", eng.matrix, eng.run_on)
    assert len(cells) == 8
    c = next(c for c in cells if c.values == {"compute_capabilities": "SM120", "profiles": "big", "precision": "fp16"})
    assert c.overrides["onnx"] == "m16.onnx" and c.overrides["profiles"][0]["inputs"][0]["max"] == [16, 3, 8, 8]
    assert c.output == "out/demo-SM120-big-fp16.engine"


BAD = [
    (
        "template misses an axis: two cells, one file",
        BASE.replace("-{optimization_level}", ""),
        "TRT171",
        "15:10",
        "would write the same file",
    ),
    ("unknown placeholder", BASE.replace("{optimization_level}", "{opt}"), "TRT170", "15:10", "'{opt}'"),
    ("bad axis value", BASE.replace("[0, 3]", "[0, 9]"), "TRT172", "17:26", "optimization_level[1] = 9"),
    ("bad compute capability", BASE.replace('"SM120"]', '"SM99"]'), "TRT172", "16:33", "compute_capabilities[1]"),
    ("empty axis", BASE.replace("[0, 3]", "[]"), "TRT174", "17:22", "no values"),
    (
        "unknown axis",
        BASE.replace("optimization_level = [0, 3]", "optimisation_level = [0]"),
        "TRT101",
        "17:1",
        "did you mean 'optimization_level'",
    ),  # fmt: skip
    (
        "label placeholder not an axis",
        BASE.replace('{compute_capabilities}" }', '{gpu}" }'),
        "TRT176",
        "11:29",
        "'{gpu}'",
    ),  # fmt: skip
    ("bad address", BASE.replace('address = "local"', 'address = "my cluster"'), "TRT102", "2:11", "ray://"),
    (
        "missing precision onnx",
        BASE.replace("optimization_level = [0, 3]", 'precision = { fp16 = "nope.onnx" }').replace(
            "{optimization_level}", "{precision}"
        ),
        "TRT173",
        "17:22",
        "nope.onnx",
    ),  # fmt: skip
]


@pytest.mark.parametrize("desc,text,code,pos,words", BAD, ids=[b[0] for b in BAD])
def test_bad_farm_tables_are_located_errors(folder: Path, desc: str, text: str, code: str, pos: str, words: str):
    loaded = load(folder, text)
    assert loaded.recipe is None, desc
    hits = [f for f in loaded.findings if f.code == code]
    assert hits, [(f.code, f.message) for f in loaded.findings]
    assert where(loaded, hits[0]) == pos, (hits[0].message, where(loaded, hits[0]))
    assert words in hits[0].message


def test_run_on_without_cluster_is_a_warning_and_the_recipe_loads(folder: Path) -> None:
    text = BASE.split("[engines.demo]")[1]
    loaded = load(folder, "[engines.demo]" + text)
    assert loaded.recipe is not None
    (w,) = [f for f in loaded.findings if f.code == "TRT175"]
    assert w.severity.value == "warning" and where(loaded, w) == "5:1"
