"""Build configuration keys without TensorRT: the schema, the checks a recipe gets as you type (TRT142–151),
the key table the docs show, internal-error records from real TensorRT log lines, and their retry advice."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from trtls.core.build_config import (
    KEYS,
    BuilderSettings,
    MemoryPoolLimits,
    PluginSettings,
    PrecisionSettings,
    keys_markdown,
    setting_path,
)
from trtls.core.builder_errors import describe, internal_error
from trtls.core.evidence import retry_advice
from trtls.core.recipe import EngineRecipe, load_recipe

ROOT = Path(__file__).resolve().parents[2]
BASE = """\
[engines.demo]
onnx = "m.onnx"
output = "out/demo.engine"

[[engines.demo.profiles]]
input = "input"
min = [1, 3, 8, 8]
opt = [2, 3, 8, 8]
max = [4, 3, 8, 8]
"""


def load(tmp_path: Path, extra: str):
    (tmp_path / "m.onnx").write_bytes(b"onnx")
    (tmp_path / "libreal.so").write_bytes(b"\x7fELF")
    path = tmp_path / "trtls.toml"
    path.write_text(BASE + extra)
    return load_recipe(path)


def where(loaded, code: str) -> list[str]:
    return [loaded.source_map.range(f.path, f.on_value).human() for f in loaded.findings if f.code == code]


def test_every_key_loads_and_reaches_the_model(tmp_path: Path) -> None:
    loaded = load(
        tmp_path,
        """
[engines.demo.builder]
tf32 = false
sparse_weights = true
refit = "individual"
strip_weights = false
weight_streaming = true
version_compatible = true
exclude_lean_runtime = true
tactic_sources = ["-JIT_CONVOLUTIONS", "+EDGE_MASK_CONVOLUTIONS"]
profiling_verbosity = "detailed"
dla_core = 0
allow_gpu_fallback = true
runtime_platform = "windows_amd64"
tiling_level = "fast"
l2_limit_for_tiling = 1048576
memory_pool_limits = { workspace_mib = 512, tactic_dram_mib = 256, tactic_shared_memory_kib = 48 }

[engines.demo.precision]
convert = "fp16"
keep_io_types = false
exclude_op_types = ["LayerNormalization"]
exclude_nodes = ["/head/.*"]
strongly_typed = true

[engines.demo.plugins]
libraries = ["libreal.so"]
serialize = ["libreal.so"]
require_creators = ["MyPlugin"]
""",
    )
    assert loaded.errors == [], [f.message for f in loaded.findings]
    eng = loaded.engine("demo")
    assert eng.builder.memory_pool_limits.tactic_shared_memory_kib == 48 and eng.builder.refit == "individual"
    assert eng.precision.convert == "fp16" and eng.precision.exclude_nodes == ["/head/.*"]
    assert eng.plugins.require_creators == ["MyPlugin"]


@pytest.mark.parametrize(
    ("extra", "code", "at"),
    [
        ("[engines.demo.builder]\nexclude_lean_runtime = true\n", "TRT142", "12:24"),
        ("[engines.demo.builder]\nl2_limit_for_tiling = 1024\n", "TRT150", "12:23"),
        ('[engines.demo.builder]\ntactic_sources = ["cudnn"]\n', "TRT102", "12:19"),
        ('[engines.demo.precision]\nlegacy_flags = ["fp16"]\nstrongly_typed = true\n', "TRT145", "12:16"),
        ('[engines.demo.precision]\nlegacy_flags = ["fp16"]\nconvert = "fp16"\n', "TRT151", "12:16"),
        ('[engines.demo.precision]\nexclude_op_types = ["Softmax"]\n', "TRT151", "12:20"),
        ('[engines.demo.precision]\nlegacy_flags = ["fp12"]\n', "TRT106", "12:17"),
        ('[engines.demo.precision]\nconvert = "int8"\n', "TRT106", "12:11"),
        ('[engines.demo.plugins]\nlibraries = ["libreal.so", "nothere.so"]\n', "TRT144", "12:28"),
        ('[engines.demo.plugins]\nserialize = ["libreal.so"]\n', "TRT143", "12:14"),
        ("[engines.demo.builder]\nmemory_pool_limits = { tactic_sharedmem_kib = 4 }\n", "TRT101", "12:24"),
    ],
)
def test_bad_configuration_is_located(tmp_path: Path, extra: str, code: str, at: str) -> None:
    loaded = load(tmp_path, "\n" + extra)
    assert at in where(loaded, code), [(f.code, f.message) for f in loaded.findings]


def test_warnings_do_not_stop_a_build(tmp_path: Path) -> None:
    loaded = load(tmp_path, "\n[engines.demo.builder]\nl2_limit_for_tiling = 1024\n")
    assert loaded.recipe is not None and [f.code for f in loaded.findings] == ["TRT150"]


def _leaf_keys(model: type, prefix: str) -> set[str]:
    keys = set()
    for name, info in model.model_fields.items():
        sub = getattr(info.annotation, "model_fields", None)
        if sub is not None and info.annotation is not MemoryPoolLimits:
            keys |= _leaf_keys(info.annotation, f"{prefix}{name}.")
        elif info.annotation is MemoryPoolLimits:
            keys |= {f"{prefix}{name}.{k}" for k in MemoryPoolLimits.model_fields}
        else:
            keys.add(f"{prefix}{name}")
    return keys


def test_the_key_table_covers_every_recipe_key_and_the_docs_show_it() -> None:
    table = {k.key for k in KEYS}
    covered = set()
    for key in _leaf_keys(EngineRecipe, ""):
        if key.startswith(("timing_cache", "profiles", "run_on", "matrix")):
            key = key.split(".")[0]
        if re.match(r"builder\.memory_pool_limits\.dla_", key):
            key = "builder.memory_pool_limits.dla_*_mib"
        covered.add(key)
    assert covered - table == set(), "every recipe key needs a row (trtexec flag, module support)"
    assert table - covered == set(), "no row for a key that does not exist"
    page = (ROOT / "docs" / "build-config.md").read_text()
    assert keys_markdown() in page, "docs/build-config.md is out of date: paste keys_markdown()"
    for model in (BuilderSettings, PrecisionSettings, PluginSettings):
        assert all(f.description for f in model.model_fields.values()), model


def test_setting_paths_land_on_the_key() -> None:
    assert setting_path("demo", "dla_core") == ("engines", "demo", "builder", "dla_core")
    assert setting_path("demo", "tactic_shared_memory_kib") == (
        "engines",
        "demo",
        "builder",
        "memory_pool_limits",
        "tactic_shared_memory_kib",
    )
    assert setting_path("demo", "legacy_flags") == ("engines", "demo", "precision", "legacy_flags")
    assert setting_path("demo", "require_creators") == ("engines", "demo", "plugins", "require_creators")


# Real TensorRT log lines: the first measured here (TensorRT-RTX 1.7.1, CPU, tactic_shared_memory_kib = 32),
# the others quoted from NVIDIA/TensorRT issues #3883, #2437 and Lidar_AI_Solution#44.
MYELIN = (
    "IBuilder::buildSerializedNetwork: Error Code 1: Myelin ([myelin_graph.h:1295: attachExceptionMsgToGraph] "
    "MyelinCheckException: kernel_gen_utils.hpp:1032: CHECK_GE(smem_limit, kMinSharedMemory - 1024) failed.\n"
    "  LHS: 31744\n  RHS: 48128\n In compileGraph at /_src/optimizer/myelin/codeGenerator.cpp:2012)"
)
SANITY = (
    "[checkSanity.cpp::checkSanity::148] Error Code 2: Internal Error (Assertion isIOGraph || "
    "tensorInfo.tensors.size() == g.tensors.size() failed. )"
)
CONSEQUENCE = (
    "[builder.cpp::buildSerializedNetwork::743] Error Code 2: Internal Error (Assertion engine != nullptr failed. )"
)
NO_IMPL = (
    "[optimizer.cpp::computeCosts::2033] Error Code 10: Internal Error (Could not find any implementation for node "
    "{ForeignNode[(Unnamed Layer* 7) [Constant] + (Unnamed Layer* 8) [Shuffle]...Transpose_259]}.)"
)


def test_internal_errors_are_recognised_with_their_cause_and_layer() -> None:
    myelin = internal_error([("ERROR", MYELIN)])
    assert myelin is not None and myelin.errorCode == 1
    assert myelin.assertion == "CHECK_GE(smem_limit, kMinSharedMemory - 1024)"
    assert myelin.source == "kernel_gen_utils.hpp:1032" and myelin.function == "compileGraph"
    # the cause, not its consequence, even when the consequence comes last
    sanity = internal_error([{"severity": "ERROR", "msg": SANITY}, {"severity": "ERROR", "msg": CONSEQUENCE}])
    assert sanity is not None and sanity.assertion.startswith("isIOGraph") and sanity.source == "checkSanity.cpp:148"
    no_impl = internal_error([("ERROR", NO_IMPL)])
    assert no_impl is not None and str(no_impl.layer).startswith("{ForeignNode[(Unnamed Layer* 7)")
    assert "Could not find any implementation" in describe(no_impl) and "layer named by the log" in describe(no_impl)
    api = "IBuilderConfig::setFlag: Error Code 3: API Usage Error (Parameter check failed, condition: x)"
    assert internal_error([("ERROR", api), ("WARNING", SANITY)]) is None, "API errors and warnings are not internal"


def test_internal_error_advice_says_a_blind_retry_will_not_help() -> None:
    failure = internal_error([("ERROR", NO_IMPL)])
    advice = retry_advice("failed", "cold", True, None, failure)
    assert advice.policy == "investigate" and "blind retry fails the same way" in advice.rule
    assert "{ForeignNode[" in advice.rule
    # without the record, the old rules still apply (rollback to a good engine)
    assert retry_advice("failed", "cold", True, None, None).policy == "rollback"


def test_a_plugin_library_that_is_a_fifo_or_a_folder_is_said_to_be_no_regular_file(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "libfifo.so")
    (tmp_path / "libdir.so").mkdir()
    loaded = load(tmp_path, '\n[engines.demo.plugins]\nlibraries = ["libfifo.so", "libdir.so", "nothere.so"]\n')
    said = [f.message for f in loaded.findings if f.code == "TRT144"]
    assert said == [
        f"plugin library not a regular file (a folder, a FIFO or a device): {tmp_path / 'libfifo.so'}",
        f"plugin library not a regular file (a folder, a FIFO or a device): {tmp_path / 'libdir.so'}",
        f"plugin library not found: {tmp_path / 'nothere.so'}",
    ], said
