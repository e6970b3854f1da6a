"""The exclude_nodes quick fix (`triage.exclude_edit`) on the table that converts what was compared: an engine's
`[engines.X.precision]`, or a route's `[routes.X.precision]` when the route deploys its ONNX (no engine). Each edit is
applied to the text and the recipe loaded again: the node must be in that table's exclude_nodes, and nowhere else."""

from __future__ import annotations

from pathlib import Path

import pytest

from trtls.core.recipe import load_recipe
from trtls.core.route import route_model
from trtls.core.tomlpos import apply_edits
from trtls.triage.exclude_edit import exclude_nodes_fix

ROUTE = """\
[routes.r]
onnx = "m.onnx"
checkpoint = {{ path = "ck", revision = "{rev}" }}
intended_use = "t"
allowed_licenses = ["mit"]
bundle = "r.bundle"
{precision}"""


def _loaded(tmp_path: Path, precision: str):
    (tmp_path / "ck").mkdir(exist_ok=True)
    (tmp_path / "m.onnx").write_bytes(b"onnx")
    path = tmp_path / "trtls.toml"
    path.write_text(ROUTE.format(rev="0" * 40, precision=precision))
    loaded = load_recipe(path)
    assert loaded.recipe is not None, [f.message for f in loaded.findings]
    return loaded


@pytest.mark.parametrize(
    "precision",
    [
        '\n[routes.r.precision]\nconvert = "fp16"\n',
        'precision = { convert = "fp16" }\n',
        '\n[routes.r.precision]\nconvert = "fp16"\nexclude_nodes = ["a"]\n',
    ],
    ids=["table", "inline", "extends"],
)
def test_the_fix_lands_in_the_routes_precision_table(tmp_path: Path, precision: str) -> None:
    loaded = _loaded(tmp_path, precision)
    before = list(route_model(loaded, "r").precision.exclude_nodes)
    fix = exclude_nodes_fix(loaded, None, ["dt_softplus"], route="r")
    assert fix is not None and "dt_softplus" in fix["title"]
    edited = load_recipe(loaded.path, text=apply_edits(loaded.text, fix["edits"]))
    assert edited.recipe is not None, [f.message for f in edited.findings]
    assert route_model(edited, "r").precision.exclude_nodes == before + ["dt_softplus"]
    assert "engines" not in edited.data


def test_nothing_to_add_and_no_table_give_no_fix(tmp_path: Path) -> None:
    loaded = _loaded(tmp_path, '\n[routes.r.precision]\nconvert = "fp16"\nexclude_nodes = ["dt_softplus"]\n')
    assert exclude_nodes_fix(loaded, None, ["dt_softplus"], route="r") is None
    assert exclude_nodes_fix(loaded, None, ["x"], route="missing") is None
    with pytest.raises(ValueError, match="give an engine or a route"):
        exclude_nodes_fix(loaded, None, ["x"])
