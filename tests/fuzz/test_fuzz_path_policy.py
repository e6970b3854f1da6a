"""10,000 hostile recipes at `trtls check`'s core (`check_recipe`), and a sample of them at a real language server and
real `trtls check` processes: no traceback, and no recipe that passes can make
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
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from tests.lsp.raw_stdio import RawServer

from trtls.builds.supervisor.job import new_build_id, state_dir, worker_job
from trtls.builds.supervisor.matrix import plan
from trtls.core.paths import inside, real
from trtls.core.toml_bounded import MAX_DEPTH
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


PROFILE = '{ input = "input", min = [1, 3, 32, 32], opt = [1, 3, 32, 32], max = [1, 3, 32, 32] }'


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
            if draw(st.booleans()):  # profile variant names become cell names and paths just as precision's do
                out.append(f"profiles = {{ {_q(pick(names, ordinary_names))} = [{PROFILE}], base = [{PROFILE}] }}")
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


def make_site(root: Path, quickstart_models: Path) -> Path:
    """The recipe folder (returned) inside `root`, beside `root/elsewhere`: a model, a symlinked output leading to
    `elsewhere/precious.bin`, a symlinked folder leading to `elsewhere`, a symlinked model and a lock file."""
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


@pytest.fixture(scope="module")
def fuzz_site(tmp_path_factory: pytest.TempPathFactory, quickstart_models: Path) -> Path:
    return make_site(tmp_path_factory.mktemp("policy"), quickstart_models)


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


# -- the same recipes at the real faces: one language server over stdio, and `trtls check` processes ---------------
SERVER_EXAMPLES = int(os.environ.get("TRTLS_POLICY_SERVER_EXAMPLES", "300"))
CLI_EXAMPLES = int(os.environ.get("TRTLS_POLICY_CLI_EXAMPLES", "40"))
ABSOLUTE = Path("/tmp/trtls-fuzz-abs.engine")  # the one absolute write target the generator names outside /tmp/pytest
ORDINARY = """[engines.demo]
onnx = "models/demo.onnx"
output = "build/demo.engine"
[[engines.demo.profiles]]
input = "input"
min = [1, 3, 32, 32]
opt = [1, 3, 32, 32]
max = [1, 3, 32, 32]
"""


def sample(n: int) -> list[str]:
    """`n` recipes from the same generator, the same ones on every run (derandomized, no shrinking)."""
    out: list[str] = []

    @settings(
        max_examples=n,
        derandomize=True,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(hostile_recipe())
    def collect(text: str) -> None:
        out.append(text)

    collect()
    return out


def deep_site(tmp_path: Path, quickstart_models: Path) -> Path:
    """The site four folders below tmp_path: every `../` the generator writes (up to four) still lands inside
    tmp_path, so the tree compared before and after covers it."""
    folder = make_site(tmp_path / "d1" / "d2" / "d3", quickstart_models)
    (folder / "trtls.toml").write_text(ORDINARY)
    return folder


def _next_publish(s: RawServer, start: int, uri: str, timeout: float) -> dict:
    end = time.monotonic() + timeout
    with s._lock:
        while True:
            for m in s.messages[start:]:
                if m.get("method") == "textDocument/publishDiagnostics" and m["params"]["uri"] == uri:
                    return m
            left = end - time.monotonic()
            if left <= 0 or s.proc.poll() is not None:
                return {}
            s._lock.wait(min(left, 1.0))


def test_the_language_server_takes_hostile_recipes_with_no_traceback_and_no_write(
    tmp_path: Path, quickstart_models: Path
) -> None:
    """One real server over stdio: each recipe is a didChange of one open trtls.toml, and the next is sent only once
    the diagnostics of this one are published (a check that raised would publish nothing). Every tenth recipe is
    also read by a command (listTargets) and asked for lenses. Nothing outside the recipe folder changes."""
    folder = deep_site(tmp_path, quickstart_models)
    texts = sample(SERVER_EXAMPLES)
    had_absolute = ABSOLUTE.exists()
    before = _tree(tmp_path)
    s = RawServer(cwd=folder)
    try:
        s.initialize(folder)
        uri = (folder / "trtls.toml").as_uri()
        start = len(s.messages)
        s.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "toml", "version": 1,
                                                           "text": ORDINARY}})  # fmt: skip
        assert _next_publish(s, start, uri, 60), s.stderr.decode(errors="replace")[-3000:]
        for version, text in enumerate([*texts, ORDINARY], start=2):
            start = len(s.messages)
            change = {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]}
            s.notify("textDocument/didChange", change)
            published = _next_publish(s, start, uri, 60)
            assert published, (
                f"no diagnostics for recipe {version - 2}:\n{text}\n{s.stderr.decode(errors='replace')[-3000:]}"
            )
            if version % 10 == 0:
                listed = s.request(
                    "workspace/executeCommand", {"command": "trtls.listTargets", "arguments": [{"uri": uri}]}
                )
                lenses = s.request("textDocument/codeLens", {"textDocument": {"uri": uri}})
                for response in (listed, lenses):
                    assert response.get("error", {}).get("code") != -32603, (response, text)
        hover = s.request(
            "textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 10}}, timeout=30
        )
        assert "error" not in hover and hover["result"] is not None, hover
        assert s.proc.poll() is None
    finally:
        code = s.close()
    internal = [m for m in s.messages if m.get("error", {}).get("code") == -32603]
    assert not internal, internal[:3]
    assert s.shown_messages() == [], "no window/showMessage 'Error in server'"
    err = s.stderr.decode(errors="replace")
    assert "Traceback" not in err, err[-3000:]
    assert code == 0, err[-3000:]
    assert _tree(tmp_path) == before, "the server wrote under the site"
    assert ABSOLUTE.exists() == had_absolute


def test_trtls_check_processes_take_hostile_recipes_with_exit_0_or_2_and_no_write(
    tmp_path: Path, quickstart_models: Path
) -> None:
    """Real `trtls check` processes, one per recipe (the recipe written to the folder's trtls.toml): exit 0 or 2,
    never a traceback, and nothing on disk changes but the recipe the test writes."""
    folder = deep_site(tmp_path, quickstart_models)
    had_absolute = ABSOLUTE.exists()
    before = _tree(tmp_path)
    codes: set[int] = set()
    for i, text in enumerate(sample(CLI_EXAMPLES)):
        (folder / "trtls.toml").write_text(text, encoding="utf-8")
        done = subprocess.run(
            [sys.executable, "-m", "trtls", "check", str(folder)], capture_output=True, text=True, timeout=120
        )
        assert done.returncode in (0, 2) and "Traceback" not in done.stderr, (i, text, done.returncode, done.stderr)
        codes.add(done.returncode)
        (folder / "trtls.toml").write_text(ORDINARY)
        assert _tree(tmp_path) == before, (i, text)
    assert codes == {0, 2}, "some recipes pass and some are refused, or the sample says little"
    assert ABSOLUTE.exists() == had_absolute
