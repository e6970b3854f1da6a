"""The write policy rule by rule (`trtls.core.write_policy`, through `check_recipe` as every face calls it): each
protected file, each way out of the folder, located on the key that names the write. Real files, no builds."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.conftest import QUICKSTART
from trtls.core.write_policy import route_write_findings
from trtls.onnx_files.onnx_reader import ModelInputsCache
from trtls.onnx_files.profile_checks import check_recipe

BASE = (QUICKSTART / "trtls.toml").read_text()
DEMO_OUTPUT = 'output = "build/demo.engine"'


@pytest.fixture
def folder(tmp_path: Path, quickstart_models: Path) -> Path:
    f = tmp_path / "recipe"
    (f / "models").mkdir(parents=True)
    for m in ("demo.onnx", "large.onnx"):
        shutil.copy(quickstart_models / m, f / "models" / m)
    (f / "trtls.toml").write_text(BASE)
    return f


def findings(folder: Path, text: str) -> list[tuple[str, tuple, str]]:
    loaded = check_recipe(folder / "trtls.toml", text, ModelInputsCache())
    return [(f.code, f.path, f.message) for f in loaded.findings]


def codes_at(folder: Path, text: str, path: tuple) -> list[str]:
    return [code for code, where, _ in findings(folder, text) if where == path]


def with_output(value: str) -> str:
    return BASE.replace(DEMO_OUTPUT, f'output = "{value}"', 1)


OUTPUT = ("engines", "demo", "output")


def test_the_shipped_sample_writes_nothing_it_should_not(folder: Path) -> None:
    assert [f for f in findings(folder, BASE) if f[0] in ("TRT109", "TRT117", "TRT118", "TRT119")] == []


@pytest.mark.parametrize(
    ("value", "what"),
    [
        ("trtls.toml", "recipe"),
        ("models/large.onnx", "ONNX model of engine 'large'"),
        ("models/demo.onnx", "ONNX model of engine 'demo'"),
        ("trtls.lock.json", "lock file"),
        ("build/large.timing-cache", "timing cache of engine 'large'"),
        (".trtls/history.json", ".trtls"),
        (".trtls/locks/x.lock", ".trtls"),
        ("build/large.engine", "output of engine"),
    ],
)
def test_an_output_may_not_overwrite_what_trtls_reads_or_owns(folder: Path, value: str, what: str) -> None:
    text = with_output(value)
    found = [(c, m) for c, where, m in findings(folder, text) if c == "TRT109"]
    assert found and what in found[0][1], found


def test_a_cell_output_may_not_be_a_precision_variants_model(folder: Path) -> None:
    shutil.copy(folder / "models" / "demo.onnx", folder / "models" / "demo-fp16.onnx")
    text = BASE + '\n[engines.demo.matrix]\noutput = "models/demo-{precision}.onnx"\n'
    text += 'precision = { fp16 = "models/demo.onnx", fp32 = "models/demo-fp16.onnx" }\n'
    found = [m for c, where, m in findings(folder, text) if c == "TRT109"]
    assert found and "precision 'fp32'" in found[0]


def test_an_output_may_not_be_a_models_external_data(tmp_path: Path, sample_models: Path) -> None:
    f = tmp_path / "models-sample"
    shutil.copytree(sample_models.parent, f, ignore=shutil.ignore_patterns(".trtls", "build"))
    text = (f / "trtls.toml").read_text()
    start = text.index("[engines.external]")
    line_start = text.index("output", start)
    line_end = text.index("\n", line_start)
    text = text[:line_start] + 'output = "models/external.onnx.data"' + text[line_end:]
    found = [(c, where, m) for c, where, m in findings(f, text) if c == "TRT109"]
    assert found and found[0][1] == ("engines", "external", "output") and "external data" in found[0][2]


def route_findings(folder: Path, text: str, route: str) -> list[tuple[str, tuple, str]]:
    """What `trtls route build` refuses (route writes are judged by the command that makes them)."""
    loaded = check_recipe(folder / "trtls.toml", text, ModelInputsCache())
    return [(f.code, f.path, f.message) for f in route_write_findings(loaded, route)]


def test_a_route_bundle_may_not_land_in_its_checkpoint_or_over_the_recipe(folder: Path) -> None:
    (folder / "ckpt").mkdir()
    route = '\n[routes.r]\nengine = "demo"\ncheckpoint = { path = "ckpt", revision = "main" }\n'
    route += 'intended_use = "t"\nallowed_licenses = ["mit"]\n'
    for bundle, what in (("ckpt/model.bundle", "checkpoint"), ("trtls.toml", "recipe")):
        text = BASE + route + f'bundle = "{bundle}"\n'
        found = [m for c, where, m in route_findings(folder, text, "r") if c == "TRT109"]
        assert found and what in found[0], (bundle, found)
        # `trtls check` and `trtls gates` only read a route's bundle: gate 3 judges a bundle out of the folder
        assert [c for c, where, _ in findings(folder, text) if where[:1] == ("routes",) and c == "TRT109"] == []


def test_outside_the_folder_is_refused_until_allow_outside_names_it(folder: Path) -> None:
    for value in ("../elsewhere/demo.engine", "/tmp/trtls-policy-test/demo.engine", "build/../../x.engine"):
        assert codes_at(folder, with_output(value), OUTPUT) == ["TRT117"], value
    allowed = 'allow_outside = ["../elsewhere"]\n' + with_output("../elsewhere/demo.engine")
    assert codes_at(folder, allowed, OUTPUT) == []
    assert [c for c, *_ in findings(folder, allowed) if c.startswith("TRT1")] == []


def test_an_unused_allow_outside_entry_is_a_warning_on_it(folder: Path) -> None:
    text = 'allow_outside = ["build", "../nowhere"]\n' + BASE
    assert codes_at(folder, text, ("allow_outside", 0)) == ["TRT121"]
    assert codes_at(folder, text, ("allow_outside", 1)) == ["TRT121"]


def test_symlinks_are_never_written_through(folder: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious.bin").write_bytes(b"p")
    (folder / "build").mkdir()
    (folder / "build" / "demo.engine").symlink_to(elsewhere / "precious.bin")
    assert codes_at(folder, BASE, OUTPUT) == ["TRT118"]
    # opting in does not make a symlinked file writable
    allowed = f'allow_outside = ["{elsewhere}"]\n' + BASE
    assert "TRT118" in codes_at(folder, allowed, OUTPUT)
    (folder / "build" / "demo.engine").unlink()
    (folder / "out").symlink_to(elsewhere)
    assert codes_at(folder, with_output("out/demo.engine"), OUTPUT) == ["TRT118"]
    assert codes_at(folder, 'allow_outside = ["out"]\n' + with_output("out/demo.engine"), OUTPUT) == []


def test_a_symlinked_evidence_folder_leading_out_is_refused(folder: Path, tmp_path: Path) -> None:
    (tmp_path / "evidence").mkdir()
    (folder / ".trtls").symlink_to(tmp_path / "evidence")
    assert [c for c, where, _ in findings(folder, BASE) if where == ()] == ["TRT118"]
    (folder / ".trtls").unlink()
    (folder / ".trtls").mkdir()
    (folder / ".trtls" / "runs").symlink_to(tmp_path / "evidence")  # one level down leads out just the same
    found = [(c, m) for c, where, m in findings(folder, BASE) if where == ()]
    assert [c for c, _ in found] == ["TRT118"] and ".trtls/runs" in found[0][1]


def test_a_variant_name_must_be_a_safe_file_name(folder: Path) -> None:
    text = BASE + '\n[engines.demo.matrix]\noutput = "build/{engine}-{precision}.engine"\n'
    text += 'precision = { "../../../../x/PWNED" = "models/demo.onnx" }\n'
    assert codes_at(folder, text, ("engines", "demo", "matrix", "precision", "../../../../x/PWNED")) == ["TRT119"]


def test_a_path_that_cannot_name_a_file_is_located_and_nothing_stats_it(folder: Path) -> None:
    found = findings(folder, with_output("x" * 300))
    assert [(c, w) for c, w, _ in found] == [("TRT102", OUTPUT)] and "bytes long" in found[0][2], found
    loaded = check_recipe(folder / "trtls.toml", with_output("a\\u0000b"), ModelInputsCache())
    (nul,) = loaded.findings
    assert nul.code == "TRT102" and "NUL" in nul.message
    assert loaded.location(nul).endswith(":8:10")  # on the output's value


def test_a_routes_previous_bundle_is_a_write_and_routes_may_share_a_bundle(folder: Path) -> None:
    (folder / "ckpt").mkdir()
    route = 'engine = "demo"\ncheckpoint = { path = "ckpt", revision = "main" }\nintended_use = "t"\n'
    route += 'allowed_licenses = ["mit"]\nbundle = "dist/shared.bundle"\n'
    text = BASE + "\n[routes.a]\n" + route + "\n[routes.b]\n" + route + 'previous_bundle = "../old.bundle"\n'
    found = route_findings(folder, text, "b")
    assert [c for c, where, _ in found if where == ("routes", "b", "previous_bundle")] == ["TRT117"]
    assert [c for c, where, _ in found if c == "TRT109"] == [], "two routes checking one bundle is no clash"
    assert route_findings(folder, text, "a") == []


def test_engine_and_route_names_are_one_safe_file_name(folder: Path) -> None:
    long_name = "e" * 200  # a valid TOML key that would make a build id (and its evidence folder) too long
    text = BASE.replace("[engines.demo]", f"[engines.{long_name}]").replace("engines.demo.", f"engines.{long_name}.")
    assert "TRT108" in codes_at(folder, text, ("engines", long_name))
    route = f'\n[routes.{"r" * 200}]\nengine = "large"\ncheckpoint = {{ path = "models", revision = "main" }}\n'
    route += 'intended_use = "t"\nallowed_licenses = ["mit"]\nbundle = "dist/r.bundle"\n'
    assert "TRT108" in codes_at(folder, BASE + route, ("routes", "r" * 200))
