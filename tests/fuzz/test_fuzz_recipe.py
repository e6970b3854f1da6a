"""Hostile TOML never crashes or hangs the recipe parser: only located findings, whatever the text.

`trtls.onnx_files.profile_checks.check_recipe` (the recipe loader, then every engine against its ONNX model's
inputs, with the quick fixes computed for each finding) gets generated recipes (engine and route tables built from
the real key names with random values), mutated copies of the shipped samples (character and line edits) and random
text. Every finding's range must lie inside the document. CI runs TRTLS_FUZZ_EXAMPLES examples per
property (default 200); the long run sets 10000 (see docs/reliability.md).
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trtls.core.findings import Finding
from trtls.onnx_files.onnx_reader import ModelInputsCache
from trtls.onnx_files.profile_checks import check_recipe

EXAMPLES = int(os.environ.get("TRTLS_FUZZ_EXAMPLES", "200"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)
HANG_S = 10  # one parse of a few KiB taking this long is a hang
REPO = Path(__file__).resolve().parents[2]
SEEDS = [
    (REPO / "samples" / "quickstart" / "trtls.toml").read_text(),
    (REPO / "samples" / "route" / "trtls.toml").read_text(),
]

ENGINE_KEYS = [
    "onnx",
    "output",
    "timing_cache",
    "builder",
    "profiles",
    "cancel_grace_s",
    "keep_evidence",
    "builder_module",
    "worker",
]
BUILDER_KEYS = [
    "optimization_level",
    "max_aux_streams",
    "tiling_level",
    "max_num_tactics",
    "avg_timing_iterations",
    "hardware_compatibility_level",
    "compute_capabilities",
    "memory_pool_limits",
]
PROFILE_KEYS = ["input", "min", "opt", "max"]
ROUTE_KEYS = [
    "engine",
    "checkpoint",
    "intended_use",
    "allowed_licenses",
    "bundle",
    "runtime",
    "reference",
    "reference_inputs",
    "canary_inputs",
    "tolerances",
    "thresholds",
    "environment",
    "runtime_options",
    "allow_pickle",
    "baseline",
]
NESTED_KEYS = [
    "path",
    "id",
    "revision",
    "mode",
    "atol",
    "rtol",
    "check_error_stat",
    "latency_p99_ms",
    "memory_mib",
    "builder_module",
    "builder_version",
    "python",
    "logits",
    "workspace_mib",
]
ALL_KEYS = (
    ENGINE_KEYS
    + BUILDER_KEYS
    + PROFILE_KEYS
    + ROUTE_KEYS
    + NESTED_KEYS
    + ["version", "engines", "routes", "demo", "tiny", "x y", "ü", ""]
)


def _quote(s: str) -> str:
    return (
        '"'
        + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
        + '"'
    )


def _key(k: str) -> str:
    return k if k and all(c.isalnum() or c in "_-" for c in k) and k.isascii() else _quote(k)


scalars = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.text(max_size=20).map(lambda s: s.replace("\x00", "")),
    st.sampled_from(
        [
            "models/demo.onnx",
            "build/x.engine",
            "read_write",
            "rw",
            "SM89",
            "SM90",
            "tensorrt_rtx",
            "../../etc/passwd",
            "main",
            "d065c296e0fef52b015f4755c02dda4b3064c1d2",
        ]
    ),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(st.sampled_from(ALL_KEYS), inner, max_size=4)),
    max_leaves=12,
)


def _inline(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v) if isinstance(v, int) else repr(float(v)).replace("inf", "1e308")
    if isinstance(v, str):
        return _quote(v)
    if isinstance(v, list):
        return "[" + ", ".join(_inline(x) for x in v) + "]"
    return "{" + ", ".join(f"{_key(k)} = {_inline(x)}" for k, x in v.items()) + "}"


tables = st.dictionaries(st.sampled_from(ALL_KEYS), values, max_size=8)


@st.composite
def generated_recipe(draw) -> str:
    """[engines.X], [engines.X.builder], [[engines.X.profiles]] and [routes.Y] tables with random content."""
    out = []
    if draw(st.booleans()):
        out.append(f"version = {_inline(draw(scalars))}")
    for _ in range(draw(st.integers(0, 3))):
        name = draw(st.sampled_from(["demo", "large", "tiny", "my engine", "", "a.b"]))
        kind = draw(st.sampled_from(["engines", "routes", "engine", "engines.demo", "routes.tiny"]))
        out.append(f"[{kind}.{_key(name)}]")
        out += [f"{_key(k)} = {_inline(v)}" for k, v in draw(tables).items()]
        if draw(st.booleans()):
            out.append(f"[{kind}.{_key(name)}.builder]")
            out += [
                f"{_key(k)} = {_inline(v)}"
                for k, v in draw(
                    st.dictionaries(st.sampled_from(BUILDER_KEYS + ["colour"]), values, max_size=4)
                ).items()
            ]
        for _ in range(draw(st.integers(0, 2))):
            out.append(f"[[{kind}.{_key(name)}.profiles]]")
            out += [
                f"{_key(k)} = {_inline(v)}"
                for k, v in draw(st.dictionaries(st.sampled_from(PROFILE_KEYS), values, max_size=4)).items()
            ]
    return "\n".join(out) + ("\n" if draw(st.booleans()) else "")


@st.composite
def mutated_seed(draw) -> str:
    text = draw(st.sampled_from(SEEDS))
    alphabet = st.sampled_from(
        list("[]{}=\",.'#\n \t\\0123456789abcdefxyz_-+eE") + ["\r\n", '"""', "'''", "\x00", "ü", "\ufeff"]
    )
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["delete", "insert", "replace", "dup_line", "drop_line", "swap_lines"]))
        n = len(text)
        if op in ("delete", "insert", "replace"):
            at = draw(st.integers(0, n))
            span = draw(st.integers(0, 12))
            new = "" if op == "delete" else "".join(draw(st.lists(alphabet, min_size=1, max_size=6)))
            text = text[:at] + new + text[at + (0 if op == "insert" else span) :]
        else:
            lines = text.split("\n")
            i, j = draw(st.integers(0, len(lines) - 1)), draw(st.integers(0, len(lines) - 1))
            if op == "dup_line":
                lines.insert(j, lines[i])
            elif op == "drop_line":
                del lines[i]
            else:
                lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines)
    return text


_fired: list[bool] = []
_CACHE = ModelInputsCache()


def _alarm(signum, frame):
    _fired.append(True)  # recorded too: an alarm that lands in a gc callback is swallowed by Python
    raise TimeoutError(f"load_recipe took more than {HANG_S} s")


def check(folder: Path, text: str) -> list[Finding]:
    """Parse; never raise, never hang; every finding located inside the document."""
    _fired.clear()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(HANG_S)
    try:
        loaded = check_recipe(folder / "trtls.toml", text, cache=_CACHE)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    assert not _fired, f"load_recipe took more than {HANG_S} s on {text[:200]!r}"
    lines = text.split("\n")
    for f in loaded.findings:
        assert isinstance(f, Finding) and f.code.startswith("TRT") and f.message
        for edit in (f.data.get("fix") or {}).get("edits", []):  # a quick fix never points outside the text
            sl, sc, el, ec = edit["range"]
            assert 0 <= sl <= el <= len(lines) and sc >= 0 and ec >= 0, (f.code, edit)
        r = loaded.source_map.range(f.path, f.on_value)
        where = f"{f.code} {f.message!r} at {r}"
        assert 0 <= r.start_line <= r.end_line < len(lines), where
        assert (r.start_line, r.start_col) <= (r.end_line, r.end_col), where
        assert 0 <= r.start_col <= len(lines[r.start_line]), where
        assert 0 <= r.end_col <= len(lines[r.end_line]) + 1, where  # +1: an error at the very end of a line
        loaded.location(f)  # the CLI form must always render
    if loaded.recipe is None:
        assert loaded.errors, "a refused recipe says why"
    return loaded.findings


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory, quickstart_models: Path) -> Path:
    d = tmp_path_factory.mktemp("fuzz-recipe")
    (d / "models").mkdir()
    (d / "models" / "demo.onnx").write_bytes((quickstart_models / "demo.onnx").read_bytes())  # a real model
    (d / "models" / "large.onnx").write_bytes(b"not really onnx")
    (d / "model.onnx").write_bytes(b"x")
    return d


def test_seeds_parse_clean_enough(folder: Path) -> None:
    for seed in SEEDS:
        check(folder, seed)  # they may report missing files in this folder, never crash


@FUZZ
@given(text=generated_recipe())
def test_generated_recipes_only_located_findings(folder: Path, text: str) -> None:
    check(folder, text)


@FUZZ
@given(text=mutated_seed())
def test_mutated_samples_only_located_findings(folder: Path, text: str) -> None:
    check(folder, text)


@FUZZ
@given(text=st.text(max_size=400))
def test_random_text_only_located_findings(folder: Path, text: str) -> None:
    findings = check(folder, text)
    assert isinstance(findings, list)
