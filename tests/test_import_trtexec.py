"""`trtls import trtexec`: a trtexec command line becomes a recipe table that loads, keeps every setting (or
names why not), writes into an existing recipe atomically without touching the rest, and builds for real."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trtls.cli.main import main
from trtls.core.recipe import load_recipe
from trtls.importers.trtexec import import_trtexec

ENCODER = [
    "--onnx=models/encoder.onnx",
    "--saveEngine=build/enc.engine",
    "--fp16",
    "--minShapes=input_ids:1x1,attention_mask:1x1",
    "--optShapes=input_ids:1x64,attention_mask:1x64",
    "--maxShapes=input_ids:4x128,attention_mask:4x128",
    "--minShapes=input_ids:1x128,attention_mask:1x128",
    "--optShapes=input_ids:8x256,attention_mask:8x256",
    "--maxShapes=input_ids:16x512,attention_mask:16x512",
    "--memPoolSize=workspace:1G,tacticSharedMem:48K,dlaSRAM:1.5M",
    "--timingCacheFile=build/enc.cache",
    "--builderOptimizationLevel=4",
    "--tacticSources=-CUDNN,+CUBLAS",
    "--stronglyTyped",
    "--refit",
    "--stripWeights",
    "--sparsity=enable",
    "--useDLACore=1",
    "--allowGPUFallback",
    "--hardwareCompatibilityLevel=ampere+",
    "--staticPlugins=plugins/libnms.so",
    "--setPluginsToSerialize=plugins/libnms.so",
    "--versionCompatible",
    "--excludeLeanRuntime",
    "--maxAuxStreams=2",
    "--profilingVerbosity=detailed",
    "--noTF32",
    "--int8",
    "--iterations=100",
    "--warmUp",
    "500",
    "--loadInputs=x:in.bin",
    "--verbose",
    "--frobnicate=1",
]


def recipe_from(folder: Path, text: str):
    (folder / "models").mkdir(exist_ok=True)
    path = folder / "trtls.toml"
    path.write_text(text)
    return load_recipe(path)


def test_every_build_flag_lands_on_its_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", "trtexec", "--", *ENCODER]) == 0
    text = capsys.readouterr().out
    loaded = recipe_from(tmp_path, text)
    assert [f.code for f in loaded.findings if f.code in ("TRT100", "TRT101", "TRT102", "TRT103", "TRT106")] == []
    eng = loaded.data["engines"]["encoder"]
    assert eng["onnx"] == "models/encoder.onnx" and eng["output"] == "build/enc.engine"
    assert eng["timing_cache"] == {"path": "build/enc.cache", "mode": "read_write"}
    b = eng["builder"]
    assert b["optimization_level"] == 4 and b["tactic_sources"] == ["-CUDNN", "+CUBLAS"]
    assert b["refit"] == "all" and b["strip_weights"] is True and b["sparse_weights"] is True
    assert b["dla_core"] == 1 and b["allow_gpu_fallback"] is True and b["hardware_compatibility_level"] == "ampere_plus"
    assert b["version_compatible"] is True and b["exclude_lean_runtime"] is True and b["max_aux_streams"] == 2
    assert b["profiling_verbosity"] == "detailed" and b["tf32"] is False
    assert b["memory_pool_limits"] == {"workspace_mib": 1024, "tactic_shared_memory_kib": 48, "dla_managed_sram_mib": 2}
    assert eng["precision"] == {"convert": "fp16", "strongly_typed": True}
    assert eng["plugins"] == {"libraries": ["plugins/libnms.so"], "serialize": ["plugins/libnms.so"]}
    # two TensorRT profiles, each with both inputs (the multi-input profile format)
    p0, p1 = eng["profiles"]
    assert p0["inputs"]["attention_mask"] == {"min": [1, 1], "opt": [1, 64], "max": [4, 128]}
    assert p1["inputs"]["input_ids"] == {"min": [1, 128], "opt": [8, 256], "max": [16, 512]}
    # skipped flags are named, with why
    notes = [ln for ln in text.splitlines() if ln.startswith("# trtls import trtexec:")]
    for flag in ("--iterations", "--warmUp", "--loadInputs", "--verbose", "--frobnicate", "--int8", "--fp16"):
        assert any(n.split(": ", 1)[1].startswith(flag) for n in notes), flag
    assert any("rounded up to 2 MiB" in n for n in notes)
    assert any("Q/DQ" in n for n in notes if "--int8" in n)


def test_legacy_precision_and_shapes(tmp_path: Path) -> None:
    imp = import_trtexec(["--onnx=m.onnx", "--best", "--shapes=x:2x3"], legacy_precision=True)
    assert imp.precision == {"legacy_flags": ["fp16", "int8", "fp8"]}
    assert imp.profiles == [{"x": {"min": [2, 3], "opt": [2, 3], "max": [2, 3]}}]
    assert imp.engine["output"] == "build/m.engine" and any("no --saveEngine" in n for n in imp.notes)
    quoted = import_trtexec(["--onnx=a b.onnx", "--optShapes='in:0':1x4"])
    assert quoted.name == "a_b" and quoted.profiles[0]["in:0"]["min"] == [1, 4]
    assert 'inputs."in:0" = { min = [1, 4]' in quoted.toml()
    assert recipe_from(tmp_path, quoted.toml()).data["engines"]["a_b"]["profiles"][0]["inputs"]["in:0"]["max"] == [1, 4]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--loadEngine=m.engine", "--iterations=10"], "no --onnx"),
        (["--onnx=m.onnx", "--minShapes=x:1xa"], "must be integers"),
        (["--onnx=m.onnx", "--memPoolSize=l3:1G"], "unknown pool 'l3'"),
        (["--onnx=m.onnx", "--sparsity=maybe"], "--sparsity"),
        (["--onnx=m.onnx", "stray"], "unexpected argument"),
        # a flag that reads a value, given none: never a recipe with output = "None" or an empty profile
        (["--onnx=m.onnx", "--saveEngine"], "--saveEngine needs a value"),
        (["--onnx=m.onnx", "--saveEngine=", "--fp16"], "--saveEngine needs a value"),
        (["--onnx=m.onnx", "--timingCacheFile", "--fp16"], "--timingCacheFile needs a value"),
        (["--onnx=m.onnx", "--minShapes"], "--minShapes needs a value"),
        (["--onnx=m.onnx", "--memPoolSize"], "--memPoolSize needs a value"),
        (["--onnx=m.onnx", "--profile"], "--profile needs a value"),
        (["--onnx=m.onnx", "--onnx"], "--onnx needs a value"),
    ],
)
def test_bad_command_lines_exit_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", "trtexec", "--", *argv]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""


@pytest.mark.parametrize("program", ["trtexec", "/usr/src/tensorrt/bin/trtexec", "C:\\TensorRT\\bin\\trtexec.exe"])
def test_a_command_line_pasted_whole_with_its_program_imports(program: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The user pastes trtexec's command line as it ran, program first: the program is not an argument."""
    assert main(["import", "trtexec", "--", program, "--onnx", "m.onnx", "--saveEngine", "m.plan"]) == 0
    out = capsys.readouterr().out
    assert 'onnx = "m.onnx"' in out and 'output = "m.plan"' in out


def test_write_keeps_the_recipe_and_the_imported_engine_builds(
    workspace: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    recipe = workspace / "trtls.toml"
    before = recipe.read_text()
    monkeypatch.chdir(workspace.parent)  # trtexec's paths are relative to where it ran; the recipe's to the recipe
    args = [
        "--onnx=ws/models/demo.onnx",
        "--saveEngine=ws/build/imported.engine",
        "--minShapes=input:1x3x32x32",
        "--optShapes=input:2x3x32x32",
        "--maxShapes=input:4x3x32x32",
        "--noTF32",
        "--builderOptimizationLevel=1",
        "--useDLACore=0",
        "--iterations=10",
    ]
    assert main(["import", "trtexec", "--write", str(workspace), "--name", "imported", "--", *args]) == 0
    after = recipe.read_text()
    assert after.startswith(before.rstrip("\n")), "the rest of the recipe is kept as it was"
    assert 'onnx = "models/demo.onnx"' in after and 'output = "build/imported.engine"' in after
    # the same name again: refused, file unchanged
    assert main(["import", "trtexec", "--write", str(workspace), "--name", "imported", "--", *args]) == 2
    assert recipe.read_text() == after and "already exists" in capsys.readouterr().err
    # --replace swaps only that engine's tables
    args[6] = "--builderOptimizationLevel=2"
    assert main(["import", "trtexec", "--write", str(workspace), "--name", "imported", "--replace", "--", *args]) == 0
    replaced = recipe.read_text()
    assert replaced.count("[engines.imported]") == 1 and "optimization_level = 2" in replaced
    assert replaced.startswith(before.rstrip("\n"))
    # and it builds for real: the imported settings reach TensorRT-RTX, the inapplicable one is reported
    assert main(["build", str(workspace), "--engine", "imported"]) == 0
    run = max((workspace / ".trtls" / "runs").iterdir(), key=lambda p: p.stat().st_mtime)
    summary = json.loads((run / "summary.json").read_text())
    eff = summary["effectiveSettings"]
    assert eff["tf32"] is False and eff["optimization_level"] == 2 and "dla_core" in eff["not_applied"]
    assert (workspace / "build" / "imported.engine").is_file()


def test_write_refuses_a_broken_recipe(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recipe = tmp_path / "trtls.toml"
    recipe.write_text("[engines.a\nonnx = 1\n")
    assert main(["import", "trtexec", "--write", str(recipe), "--", "--onnx=m.onnx"]) == 2
    assert recipe.read_text() == "[engines.a\nonnx = 1\n" and "syntax error" in capsys.readouterr().err


@pytest.mark.parametrize(
    "name, text, key",
    [
        ("pyproject.toml", '[project]\nname = "mine"\nversion = "1"\n', "project"),  # another tool's valid TOML
        ("trtls.toml", 'title = "a config"\n\n[engines.a]\nonnx = "a.onnx"\n', "title"),  # a foreign top-level key
        ("other.toml", '"\\u001b[2Jwiped" = 1\n', "\\x1b[2Jwiped"),  # its key is printed escaped, never raw
    ],
)
def test_write_adds_only_to_a_trtls_recipe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, key: str
) -> None:
    """A valid TOML file that is not a trtls recipe (a pyproject.toml) was appended to: `--write` adds tables to a
    recipe or a new file only; any other file is refused on its first foreign key, byte for byte unchanged."""
    target = tmp_path / name
    target.write_text(text)
    assert main(["import", "trtexec", "--write", str(target), "--", "--onnx=m.onnx"]) == 2
    err = capsys.readouterr().err
    assert target.read_text() == text, "the user's file changed"
    assert f"{target}:1:1: TRT101 '{key}' is not a key of a trtls recipe" in err and "nothing written" in err
    assert "\x1b" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == [name], "a temp file was left"


def test_write_adds_to_a_new_file_and_to_one_of_comments_only(tmp_path: Path) -> None:
    fresh, notes = tmp_path / "fresh.toml", tmp_path / "notes.toml"
    notes.write_text("# my build notes\n")
    for target in (fresh, notes):
        assert main(["import", "trtexec", "--write", str(target), "--", "--onnx=m.onnx"]) == 0
        assert "[engines.m]" in target.read_text()
    assert notes.read_text().startswith("# my build notes\n")


@pytest.mark.parametrize("name", ["deploy.sh", "NOTES"])
def test_write_never_adds_to_a_file_of_comments_that_is_not_toml(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    """A shell script or a notes file of `#` lines parses as an empty TOML document: `--write` appended an engine table
    to it. A file of comments only is a recipe to add to when it is a .toml file (above), never otherwise."""
    target = tmp_path / name
    text = "#!/bin/sh\n# deploy notes\n"
    target.write_text(text)
    assert main(["import", "trtexec", "--write", str(target), "--", "--onnx=m.onnx"]) == 2
    err = capsys.readouterr().err
    assert target.read_text() == text and "not a trtls recipe" in err and "nothing written" in err, err


def test_replace_never_takes_lines_that_only_look_like_the_engines_header(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--replace` cut the file from a line inside a multi-line string that read `[engines.x]` up to the next header:
    the string's last line and its closing quotes went, the recipe no longer parsed, and the import said exit 0."""
    monkeypatch.chdir(tmp_path)  # trtexec's paths are relative to where it ran
    recipe = tmp_path / "trtls.toml"
    text = (
        '[engines.x]\nonnx = "x.onnx"\noutput = "build/x.engine"\n\n'
        '[routes.r]\nengine = "x"\nintended_use = """\nour notes, pasted:\n[engines.x]\nan important line\n"""\n'
    )
    recipe.write_text(text)
    assert main(["import", "trtexec", "--write", str(recipe), "--name", "x", "--replace", "--", "--onnx=x2.onnx"]) == 2
    assert recipe.read_text() == text and "edit it by hand (nothing written)" in capsys.readouterr().err
    # the same engine with no such line is replaced, the route's string kept whole
    kept = text.replace("[engines.x]\nan", "an")
    recipe.write_text(kept)
    assert main(["import", "trtexec", "--write", str(recipe), "--name", "x", "--replace", "--", "--onnx=x2.onnx"]) == 0
    after = recipe.read_text()
    assert 'onnx = "x2.onnx"' in after and 'intended_use = """\nour notes, pasted:\nan important line\n"""' in after


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--minShapes=x:0x-1"], "--minShapes: dimensions of 'x' must each be from 1 to 2^63-1, got '0x-1'"),
        (["--optShapes=x:99999999999999999999x1"], "must each be from 1 to 2^63-1"),
        (["--minShapes=:1"], "--minShapes: ':1' names no input"),
        (["--minShapes=x:4", "--maxShapes=x:2"], "TRT105 error: dimension 0: need min ≤ opt ≤ max, got 4, 2, 2"),
        (["--minShapes=x:1x3", "--maxShapes=x:2"], "TRT105 error: min/opt/max must have the same rank"),
    ],
)
def test_a_shape_the_recipe_refuses_is_bad_input_printed_or_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], said: str
) -> None:
    """Shapes of 0 or -1, an input with no name, a dimension past int64, min > max: printed with exit 0, or written
    into the recipe with exit 0 and a TRT105 the next `trtls check` refused. Now exit 2 either way, nothing out."""
    assert main(["import", "trtexec", "--", "--onnx=m.onnx", *argv]) == 2
    out = capsys.readouterr()
    assert out.out == "" and said in out.err
    recipe = tmp_path / "trtls.toml"
    assert main(["import", "trtexec", "--write", str(recipe), "--", "--onnx=m.onnx", *argv]) == 2
    assert not recipe.exists() and said in capsys.readouterr().err


def test_a_name_the_recipe_refuses_is_never_printed(capsys: pytest.CaptureFixture[str]) -> None:
    for name, said in (("a b", "TRT108 error: engine name 'a b' must be"), ("a\x1b[2J", "TRT100")):
        assert main(["import", "trtexec", "--name", name, "--", "--onnx=m.onnx"]) == 2
        out = capsys.readouterr()
        assert out.out == "" and said in out.err and "\x1b" not in out.err


def test_write_naming_no_file_is_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", "trtexec", "--write", " ", "--", "--onnx=m.onnx"]) == 2
    out = capsys.readouterr()
    assert out.out == "" and "--write names no file" in out.err


@pytest.mark.parametrize(
    "flag, what",
    [
        ("--saveEngine=m.onnx", "the output of engine 'm' would overwrite the ONNX model"),
        ("--saveEngine=trtls.toml", "the output of engine 'm' would overwrite the recipe"),
        ("--timingCacheFile=m.onnx", "the timing cache of engine 'm' would overwrite the ONNX model"),
    ],
)
def test_an_output_over_the_model_or_the_recipe_is_never_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, flag: str, what: str
) -> None:
    """`--saveEngine=model.onnx` wrote a recipe whose every build TRT109 refuses, and said exit 0."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m.onnx").write_bytes(b"the model")
    recipe = tmp_path / "trtls.toml"
    assert main(["import", "trtexec", "--write", str(recipe), "--", "--onnx=m.onnx", flag]) == 2
    err = capsys.readouterr().err
    assert f"TRT109 error: {what}" in err and "(nothing written)" in err and not recipe.exists()
    assert (tmp_path / "m.onnx").read_bytes() == b"the model"


def test_a_crlf_recipe_stays_crlf_and_a_huge_one_is_said_as_check_says_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Windows recipe got LF lines appended (a file of mixed line endings); a recipe over the size bound was
    TRT104 here and TRT125 in `trtls check`."""
    monkeypatch.chdir(tmp_path)
    recipe = tmp_path / "trtls.toml"
    recipe.write_bytes(b'[engines.a]\r\nonnx = "a.onnx"\r\noutput = "a.engine"\r\n')
    assert main(["import", "trtexec", "--write", str(recipe), "--", "--onnx=m.onnx"]) == 0
    data = recipe.read_bytes()
    assert b"[engines.m]\r\n" in data and data.count(b"\n") == data.count(b"\r\n")
    assert main(["import", "trtexec", "--write", str(recipe), "--name", "m", "--replace", "--", "--onnx=n.onnx"]) == 0
    data = recipe.read_bytes()
    assert data.count(b"[engines.m]") == 1 and b'onnx = "n.onnx"\r\n' in data
    assert data.count(b"\n") == data.count(b"\r\n")
    big = tmp_path / "big.toml"
    big.write_text("# notes\n" * 40_000)
    assert main(["import", "trtexec", "--write", str(big), "--", "--onnx=m.onnx"]) == 2
    assert f"{big}: TRT125 cannot read the recipe: recipe too large" in capsys.readouterr().err
