"""10,000 hostile recipes at `trtls check`'s core (`check_recipe`): no traceback, and no recipe that passes can make
trtls write outside its folder, through a symlink, or over a file it reads (issue 22).

Each generated recipe has engines (hostile names), outputs, timing caches, matrix templates and variant names,
route bundles and `allow_outside` drawn from paths that once escaped (`../..`, absolute, the recipe, a model, the lock
file, `.trtls/…`, a symlinked file, a symlinked folder leading out, NUL, `..` as a name) and nesting up to 300 deep.
The site is real: a recipe folder with a model, a symlinked output and a symlinked folder, beside an `elsewhere`
folder. For every recipe that loads without errors, every file a build or a matrix would write — the worker job's
output and timing cache, each cell's output and its evidence folder `.trtls/runs/<build id>` — must be inside the
folder (or under an `allow_outside` entry), not a symlink and not a file trtls reads. Checking writes nothing:
the whole site is compared at the end. No builds run: this is fast.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trtls.builds.build import new_build_id, state_dir, worker_job
from trtls.builds.matrix import plan
from trtls.core.paths import inside, real
from trtls.core.tomlpos import MAX_DEPTH
from trtls.core.write_policy import route_write_findings, write_plan
from trtls.onnx_files.onnx_reader import ModelInputsCache
from trtls.onnx_files.profile_checks import check_recipe

EXAMPLES = int(os.environ.get("TRTLS_POLICY_EXAMPLES", "10000"))
POLICY = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
HOSTILE_PATHS = [
    "build/x.engine",
    "build/demo.engine",
    "out/{cell}.engine",
    "trtls.toml",
    "./trtls.toml",
    "models/../trtls.toml",
    "models/demo.onnx",
    "models/link.onnx",
    "trtls.lock.json",
    ".trtls/runs/x",
    ".trtls",
    "out_link.engine",
    "build_link/x.engine",
    "build_link/../x.engine",
    "../x.engine",
    "../../x.engine",
    "../elsewhere/x.engine",
    "/tmp/trtls-fuzz-abs.engine",
    "/etc/passwd",
    "build/../../x",
    ".",
    "..",
    "",
    "build/",
    "a\u0000b",
    "x" * 300,
    "ü/ü.engine",
]
HOSTILE_NAMES = ["..", ".", "../../x/PWNED", "../../../../x/PWNED", "a/b", "", "ü", "x" * 200, "a\u0000b"]
TEMPLATES = [
    "build/{engine}-{cell}.engine",
    "build/{precision}.engine",
    "{precision}",
    "../{cell}",
    "build/{profiles}/{precision}",
    "{engine}",
    "/tmp/{cell}",
]


def _q(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)  # JSON escapes are TOML basic-string escapes


# Half the draws are ordinary, so that many recipes pass the check and the property has writes to judge.
ordinary_paths = st.sampled_from(["build/a.engine", "build/b.engine", "out/c.engine", "d.engine", "build/e.cache"])
paths = st.one_of(ordinary_paths, st.sampled_from(HOSTILE_PATHS), st.text(alphabet="ab./\\_-~ü", max_size=12))
ordinary_names = st.sampled_from(["demo", "large", "fp16", "a.b", "x-1"])
names = st.one_of(ordinary_names, st.sampled_from(HOSTILE_NAMES), st.text(alphabet="ab./_-", min_size=0, max_size=8))


def _nested(depth: int, kind: str) -> str:
    return ("{a = " * depth + "1" + "}" * depth) if kind == "table" else ("[" * depth + "]" * depth)


@st.composite
def hostile_recipe(draw) -> str:
    """Half the recipes are hostile everywhere; the other half are ordinary but for one slot (one name, path or
    nesting), so that many of them pass the check and each hostile value is judged on its own."""
    calm = draw(st.booleans())
    hostile_at = draw(st.integers(0, 12))
    slot = -1

    def pick(hostile: st.SearchStrategy, ordinary: st.SearchStrategy):
        nonlocal slot
        slot += 1
        return draw(hostile if not calm or slot == hostile_at else ordinary)

    out: list[str] = []
    if draw(st.booleans()):
        out.append(f"allow_outside = [{', '.join(_q(p) for p in pick(st.lists(paths, max_size=2), st.just([])))}]")
    engines: list[str] = []
    for _ in range(draw(st.integers(1, 3))):
        name = pick(names, ordinary_names)
        if name in engines:
            continue  # a table defined twice is only a syntax error
        engines.append(name)
        out.append(f"[engines.{_q(name)}]")
        out.append(f"onnx = {_q(pick(paths, st.sampled_from(['models/demo.onnx', 'models/link.onnx'])))}")
        out.append(f"output = {_q(pick(paths, st.just(f'build/{len(engines)}.engine')))}")
        if draw(st.booleans()):
            mode = draw(st.sampled_from(["read_write", "read", "off"]))
            cache = pick(paths, st.just(f"build/{len(engines)}.cache"))
            out.append(f"timing_cache = {{ path = {_q(cache)}, mode = {_q(mode)} }}")
        out += [f"[[engines.{_q(name)}.profiles]]", 'input = "input"']
        out += ["min = [1, 3, 32, 32]", "opt = [1, 3, 32, 32]", "max = [1, 3, 32, 32]"]
        if draw(st.booleans()):
            out.append(f"[engines.{_q(name)}.matrix]")
            out.append(f"output = {_q(pick(st.sampled_from(TEMPLATES) | paths, st.just(TEMPLATES[0])))}")
            variant = pick(names, ordinary_names)
            onnx = pick(paths, st.just("models/demo.onnx"))
            out.append(f'precision = {{ {_q(variant)} = {_q(onnx)}, fp32 = "models/demo.onnx" }}')
            if draw(st.booleans()):
                out.append("optimization_level = [0, 1]")
    if pick(st.booleans(), st.just(False)):  # nesting where the schema takes any value (shallow nesting passes)
        depth = draw(st.sampled_from([1, 10, MAX_DEPTH - 4, MAX_DEPTH + 1, 100, 300]))
        out.append(f"[cluster]\nruntime_env = {{ deep = {_nested(depth, draw(st.sampled_from(['table', 'array'])))} }}")
    if draw(st.booleans()):
        out.append(f"[routes.{_q(pick(names, ordinary_names))}]")
        if engines and draw(st.integers(0, 3)) > 0:
            out.append(f"engine = {_q(engines[0])}")
        elif draw(st.booleans()):
            out.append(f"onnx = {_q(pick(paths, st.just('export/route.onnx')))}")
        out.append(f"bundle = {_q(pick(paths, st.just('dist/route.bundle')))}")
        out.append('checkpoint = { path = "models", revision = "main" }')
        out.append('intended_use = "fuzz"\nallowed_licenses = ["mit"]')
    return "\n".join(out) + "\n"


def _tree(root: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = Path(dirpath) / n
            out[str(p)] = ("-> " + os.readlink(p)) if p.is_symlink() else "dir" if p.is_dir() else p.read_bytes().hex()
    return out


@pytest.fixture(scope="module")
def fuzz_site(tmp_path_factory: pytest.TempPathFactory, quickstart_models: Path) -> Path:
    root = tmp_path_factory.mktemp("policy")
    folder = root / "recipe"
    (folder / "models").mkdir(parents=True)
    (folder / "build").mkdir()
    (folder / "models" / "demo.onnx").write_bytes((quickstart_models / "demo.onnx").read_bytes())
    elsewhere = root / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious.bin").write_bytes(b"precious\n")
    (folder / "out_link.engine").symlink_to(elsewhere / "precious.bin")
    (folder / "build_link").symlink_to(elsewhere)
    (folder / "models" / "link.onnx").symlink_to(folder / "models" / "demo.onnx")
    (folder / "trtls.lock.json").write_text("{}\n")
    return folder


def _allowed(target: Path, root: Path, allowed: list[Path]) -> bool:
    return inside(target, root) or any(inside(target, a) for a in allowed)


def _assert_safe(loaded) -> None:
    recipe = loaded.recipe
    safe_routes = [name for name in recipe.routes if not route_write_findings(loaded, name)]
    wp = write_plan(loaded, recipe, routes=True)
    allowed = [a for _, a in wp.allowed]
    root = wp.root
    reads = {p for p in wp.protected}
    for w, placed in wp.writes:
        if w.where[:1] == ("routes",) and w.where[1] not in safe_routes:
            continue  # `trtls route build` refuses this route: its writes never happen
        target = real(placed) if w.folder else placed
        assert _allowed(target, root, allowed), (w, placed)
        if not w.folder:
            assert not placed.is_symlink(), (w, placed)
            assert placed not in reads or wp.protected[placed] == w.what, (w, placed, wp.protected.get(placed))
            assert not any(inside(placed, f) for f in wp.protected_folders), (w, placed)
    runs = real(state_dir(loaded.path) / "runs")
    for cell in plan(loaded, list(recipe.engines), True, {}):
        build_id = new_build_id(cell.engine if cell.cell is None else f"{cell.engine}.{cell.cell.name}")
        evidence = Path(os.path.normpath(runs / build_id))
        assert evidence.parent == runs, (cell.key, build_id)  # one folder inside .trtls/runs, never out of it
        job = worker_job(loaded, cell.engine, build_id, cell.overrides)
        output = Path(job["output"])
        assert _allowed(output, root, allowed) and not output.is_symlink(), (cell.key, output)
        assert str(output) not in (str(loaded.path), job["onnx"]), (cell.key, output)
        if job["timing_cache"] and job["timing_cache"]["mode"] == "read_write":
            assert _allowed(Path(job["timing_cache"]["path"]), root, allowed), (cell.key, job["timing_cache"])


def test_no_hostile_recipe_passes_the_check_with_a_write_outside_the_folder(fuzz_site: Path) -> None:
    before = _tree(fuzz_site.parent)
    cache = ModelInputsCache()
    passed = 0

    @POLICY
    @given(hostile_recipe())
    def one(text: str) -> None:
        nonlocal passed
        loaded = check_recipe(fuzz_site / "trtls.toml", text, cache)  # any exception fails the test
        if loaded.recipe is not None:
            passed += 1
            _assert_safe(loaded)

    one()
    assert passed > 0, "some generated recipes must pass, or the property says nothing"
    assert _tree(fuzz_site.parent) == before, "checking must never write"
