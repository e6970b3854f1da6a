"""Issue 27 item 18 (the reader's half): external data reached through a symlink. The Hugging Face cache layout
(`snapshots/<rev>/weights.bin -> ../../blobs/<sha>`) and a link inside the model's folder are accepted; a link
out of the model's tree, a dangling link, a link loop and a FIFO are each reported with the reason, located on
the recipe's `onnx`, and never crash or hang the check."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.onnx_files.external_layouts import build
from trtls.cli.main import main
from trtls.onnx_files.external_data import data_root, locate
from trtls.onnx_files.onnx_reader import read_model_inputs


def _recipe(folder: Path, onnx: str = "model.onnx") -> Path:
    recipe = folder / "trtls.toml"
    recipe.write_text(f'[engines.m]\nonnx = "{onnx}"\noutput = "build/m.engine"\n')
    return recipe


def _hf_cache(tmp_path: Path) -> tuple[Path, Path]:
    """A Hugging Face hub cache repo: the model and its weights are links from a snapshot into `blobs/`."""
    made = tmp_path / "made"
    _, place = build(made, "constant")
    repo = tmp_path / "hub" / "models--org--name"
    (repo / "blobs").mkdir(parents=True)
    snapshot = repo / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    for name, blob in (("model.onnx", "a1" * 20), (place, "b2" * 20)):
        (made / name).rename(repo / "blobs" / blob)
        (snapshot / name).symlink_to(Path("..", "..", "blobs", blob))
    return repo, snapshot / "model.onnx"


def test_a_hugging_face_cache_snapshot_reads_and_checks_clean(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, model = _hf_cache(tmp_path)
    m = read_model_inputs(model)
    assert [e.location for e in m.external] == ["constant.bin"]
    assert m.external_problems() == []
    assert data_root(model) == repo.resolve()
    recipe = _recipe(tmp_path, "hub/models--org--name/snapshots/0123abcd/model.onnx")
    assert main(["check", str(recipe)]) == 0, capsys.readouterr()


def test_a_link_inside_the_models_folder_is_accepted(tmp_path: Path) -> None:
    model, place = build(tmp_path / "m", "constant")
    (model.parent / "data").mkdir()
    (model.parent / place).rename(model.parent / "data" / "real.bin")
    (model.parent / place).symlink_to(Path("data", "real.bin"))
    assert read_model_inputs(model).external_problems() == []
    assert locate(model, place)[1] is None


@pytest.mark.parametrize("damage", ["outside", "dangling", "loop", "fifo", "folder"])
def test_an_unreadable_external_file_is_reported_with_its_reason(
    tmp_path: Path, damage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    model, place = build(tmp_path / "m", "if-branch")
    target = model.parent / place
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if damage == "outside":
        target.rename(elsewhere / "w.bin")
        target.symlink_to(elsewhere / "w.bin")
    elif damage == "dangling":
        target.unlink()
        target.symlink_to("gone.bin")
    elif damage == "loop":
        target.unlink()
        target.symlink_to(place)
    elif damage == "fifo":
        target.unlink()
        os.mkfifo(target)
    else:
        target.unlink()
        target.mkdir()
    expected = {
        "outside": f"is a symlink to {elsewhere.resolve() / 'w.bin'}, outside the model's folder",
        "dangling": "is a symlink to gone.bin, which does not exist",
        "loop": "is a symlink loop",
        "fifo": "is not a regular file",
        "folder": "is a folder",
    }[damage]
    (problem,) = read_model_inputs(model).external_problems()
    assert f"external data file {target} {expected}" in problem
    assert "(read by initializer 'tw' in If node 'if0' › then_branch)" in problem
    recipe = _recipe(model.parent)
    assert main(["check", str(recipe)]) == 2
    captured = capsys.readouterr()
    assert f"{recipe}:2:8: TRT111 error: external data file {target} {expected}" in captured.out
    assert "Traceback" not in captured.err


def test_a_model_that_is_a_fifo_is_refused_without_hanging(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "model.onnx")
    with pytest.raises(OSError, match="not a regular file"):
        read_model_inputs(tmp_path / "model.onnx")
