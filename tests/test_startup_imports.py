"""What `trtls build` and `trtls serve` load before the moment a person waits for (issue 31): the build's worker is
started before the recipe models, pydantic and the store are imported (its Python and TensorRT start-up run beside
them), the CUDA probe runs no child process (ldconfig, gcc, ld), an entry that declined the fast path does not have it
tried a second time, the fast path holds for the same interpreter by another name, and the language server answers
`initialize` before the command line's parser or any recipe model is imported (and a shutdown with no build to stop
imports no build core either).

Each runs real processes: a driver script with an audit hook (a snapshot of `sys.modules` at the worker's start, the
child processes started, the memo reads) or a stdout that snapshots `sys.modules` at the server's first reply. A worker
the entry starts parked (builds/supervisor/worker_launch.py: the store may still serve the build) loads nothing until
it is told to start, so its start is that moment (`released`), and one dropped unstarted is listed apart
(`parked_kills`) from the workers that had started (`group_kills`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from trtls.builds.supervisor.speculation import CHECKED_NOTE, NOTE

# Loaded before the worker starts, they put ~0.3 s of imports (and the store's) ahead of its start.
LATE_FOR_A_BUILD = (
    "pydantic",
    "trtls.core.recipe",
    "trtls.builds.avoidance.lookup",
    "trtls.builds.supervisor.build",
    "trtls.store.key",
)
# Not needed to answer initialize: the command line's parser and the models a request loads on first use.
LATE_FOR_INITIALIZE = (
    "argparse",
    "trtls.cli.main",
    "pydantic",
    "trtls.core.recipe",
    "trtls.builds.supervisor.supervisor",
)

BUILD_DRIVER = """
import json, sys, threading
report = {"at_spawn": None, "children": [], "memo_reads": 0, "recipe_reads": 0, "at_cuda": None, "cuda_thread": None,
          "group_kills": [], "parked": [], "released": [], "parked_kills": []}
def hook(event, args):
    if event == "ctypes.dlopen" and "cuda" in str(args[0]) and report["at_cuda"] is None:
        report["at_cuda"], report["cuda_thread"] = sorted(sys.modules), threading.current_thread().name
    elif event == "subprocess.Popen":
        argv = [str(a) for a in (args[1] or [])]
        report["children"].append(argv)
        # a worker started parked loads nothing until it is told to start: its start is the release (below)
        if report["at_spawn"] is None and "trtls.builds.worker" in argv and "--parked" not in argv:
            report["at_spawn"] = sorted(sys.modules)
    elif event == "os.killpg":
        parked = args[0] in report["parked"] and args[0] not in report["released"]
        report["parked_kills" if parked else "group_kills"].append(list(args))
    elif event == "open" and str(args[0]).endswith("demo.hit.json") and not (args[2] or 0) & 0o3:  # O_RDONLY
        report["memo_reads"] += 1
    elif event == "open" and str(args[0]).endswith("trtls.toml") and not (args[2] or 0) & 0o3:
        report["recipe_reads"] += 1
sys.addaudithook(hook)
import trtls.builds.supervisor.worker_launch as launch  # the entry's first import anyway
_start_now, _take_ahead = launch.start_now, launch.take_ahead
def start_now(preload, parked=False):
    proc = _start_now(preload, parked=parked)
    if parked:
        report["parked"].append(proc.pid)
    return proc
def take_ahead(preload):
    ahead = launch._AHEAD
    worker = _take_ahead(preload)
    if worker is not None and ahead is not None and ahead.pid in report["parked"]:
        report["released"].append(worker.pid)
        if report["at_spawn"] is None:
            report["at_spawn"] = sorted(sys.modules)
    return worker
launch.start_now, launch.take_ahead = start_now, take_ahead
from trtls.cli.entry import main
code = main(sys.argv[2:])
with open(sys.argv[1], "w") as fh:
    json.dump({**report, "code": code}, fh)
sys.exit(code)
"""

SERVE_DRIVER = """
import io, json, os, sys
class FirstWrite(io.RawIOBase):
    seen = False
    def writable(self):
        return True
    def write(self, data):
        if not FirstWrite.seen:
            FirstWrite.seen = True
            with open(sys.argv[1], "w") as fh:
                json.dump(sorted(sys.modules), fh)
        view = memoryview(data)
        while view:
            view = view[os.write(1, view):]
        return len(data)
sys.stdout = io.TextIOWrapper(io.BufferedWriter(FirstWrite()), write_through=True)
from trtls.cli.entry import main
code = main(["serve"])
with open(sys.argv[2], "w") as fh:
    json.dump(sorted(sys.modules), fh)
sys.exit(code)
"""


def build_report(tmp_path: Path, *argv: str, env: dict[str, str] | None = None, expect: int = 0) -> dict:
    out = tmp_path / f"report-{len(list(tmp_path.glob('report-*')))}.json"
    proc = subprocess.run(
        [sys.executable, "-c", BUILD_DRIVER, str(out), *argv], capture_output=True, text=True, env=env, timeout=600
    )
    assert proc.returncode == expect, proc.stderr[-3000:]
    return json.loads(out.read_text())


def test_a_build_starts_its_worker_before_the_recipe_models_and_probes_cuda_without_child_processes(
    workspace: Path, tmp_path: Path
) -> None:
    report = build_report(tmp_path, "build", str(workspace), "--engine", "demo", "--no-store")
    assert report["code"] == 0
    assert report["at_spawn"] is not None, "no worker was started"
    loaded = [m for m in LATE_FOR_A_BUILD if m in report["at_spawn"]]
    assert loaded == [], f"imported before the worker started: {loaded}"
    probes = [argv for argv in report["children"] if Path(argv[0]).name in ("ldconfig", "gcc", "ld", "cc")]
    assert probes == [], f"the CUDA probe ran {probes}"


def test_a_certain_build_starts_its_worker_before_it_hashes_the_inputs_for_the_job_ahead(
    workspace: Path, tmp_path: Path
) -> None:
    """`--no-store` builds whatever the memo says, so its worker starts as soon as the recipe names the builder; the
    memo's look (reading the job kept by the last build, hashing every input the key reads) runs while the worker
    imports TensorRT, and its job still goes ahead."""
    first = build_report(tmp_path, "build", str(workspace), "--engine", "demo", "--no-store")  # keeps its job
    assert first["code"] == 0 and (workspace / ".trtls" / "engines" / "demo.job.json").is_file()
    report = build_report(tmp_path, "build", str(workspace), "--engine", "demo", "--no-store")
    assert report["code"] == 0
    assert report["at_spawn"] is not None, "no worker was started"
    assert "trtls.builds.avoidance.memo" not in report["at_spawn"], "the memo was looked at before the spawn"
    runs = sorted((workspace / ".trtls" / "runs").glob("demo-*/summary.json"), key=lambda p: p.stat().st_mtime)
    summary = json.loads(runs[-1].read_text())
    assert NOTE in (summary.get("notes") or []), "the job did not go ahead"


def test_the_cuda_driver_probe_of_the_store_key_starts_beside_the_recipe_load(workspace: Path, tmp_path: Path) -> None:
    """The key's device probe (a process's first cuInit: ~0.2 s on a machine with a GPU) is started on a thread of its
    own before the recipe models load, not after them in the lookup (here libcuda's dlopen is the observable start)."""
    report = build_report(tmp_path, "build", str(workspace), "--engine", "demo", "--no-store")
    assert report["code"] == 0
    assert report["at_cuda"] is not None, "the driver was never probed"
    loaded = [m for m in LATE_FOR_A_BUILD if m in report["at_cuda"]]
    assert loaded == [], f"imported before the driver probe started: {loaded}"
    assert report["cuda_thread"] == "trtls-cuda-warm"


def test_a_fresh_store_miss_reads_the_fast_path_memo_once(workspace: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    env = {**os.environ, "TRTLS_STORE": str(store)}
    first = build_report(tmp_path, "build", str(workspace), "--engine", "demo", env=env)  # builds, remembers the key
    assert first["code"] == 0 and (workspace / ".trtls" / "engines" / "demo.hit.json").is_file()
    shutil.rmtree(store)  # the same key, an empty store: the entry's fast path declines, the full path builds
    again = build_report(tmp_path, "build", str(workspace), "--engine", "demo", env=env)
    assert again["code"] == 0
    assert again["memo_reads"] == 1, f"the memo was read {again['memo_reads']} times"


def test_a_build_whose_key_the_fast_path_found_missing_from_the_store_starts_its_worker_before_the_recipe_models(
    workspace: Path, tmp_path: Path
) -> None:
    """The memo holds (nothing the key reads changed) and the store lacks the key: the build is certain, so its worker
    starts at once and imports TensorRT while the recipe loads. With no memo the key is unknown until the recipe is
    loaded, and a hit (a team's store) is as likely as a miss: the worker then starts after the lookup."""
    store = tmp_path / "store"
    env = {**os.environ, "TRTLS_STORE": str(store)}
    first = build_report(tmp_path, "build", str(workspace), "--engine", "demo", env=env)  # no memo yet
    assert first["code"] == 0 and first["at_spawn"] is not None
    assert "trtls.core.recipe" in first["at_spawn"], "a build the store might serve started its worker before looking"
    # the worker the entry started parked was dropped unstarted: no memo, the lookup decides (the full path's worker)
    assert len(first["parked"]) == 1 and first["released"] == [] and len(first["parked_kills"]) == 1, first
    shutil.rmtree(store)  # the same key, an empty store: a known miss
    again = build_report(tmp_path, "build", str(workspace), "--engine", "demo", env=env)
    assert again["code"] == 0 and again["at_spawn"] is not None, "no worker was started"
    # the known miss started the very worker the entry had started parked: its interpreter's start was behind it
    assert again["released"] == again["parked"] and len(again["parked"]) == 1, again
    # the store's own modules are loaded by then: the fast path looked the key up with them
    loaded = [m for m in LATE_FOR_A_BUILD if m in again["at_spawn"] and not m.startswith("trtls.store.")]
    assert loaded == [], f"imported before the worker started: {loaded}"
    # started from the fast path itself, as soon as the miss was known (the memo and the store's entry folder looked at,
    # builds/avoidance/memo.look): before the store's own modules, the command line's parser and asyncio
    # (builds/supervisor/adopted_worker.py adopts it once the event loop runs)
    # and before `dataclasses` (with inspect, ast, dis, tokenize: ~6 ms here): memo.Looked is a NamedTuple
    early = [m for m in ("asyncio", "trtls.cli.main", "trtls.store.entries", "dataclasses") if m in again["at_spawn"]]
    assert early == [], f"imported before a known miss started its worker: {early}"
    # and before the raw recipe's TOML is parsed: the memo's job names the builder to preload, and the parse that
    # confirms it runs while the worker starts (spawn.preload_of_job)
    parsed = [m for m in ("tomllib", "trtls.core.toml_bounded") if m in again["at_spawn"]]
    assert parsed == [], f"the raw recipe was parsed before a known miss started its worker: {parsed}"
    # the memo's device check: the driver's probe started at the entry, before the fast path's own modules loaded
    for report in (first, again):
        assert report["cuda_thread"] == "trtls-cuda-warm"
        assert "trtls.builds.avoidance.reuse" not in report["at_cuda"]
    runs = sorted((workspace / ".trtls" / "runs").glob("demo-*/summary.json"))
    assert [json.loads(r.read_text())["outcome"] for r in runs] == ["built", "built"]


def _miss_with_the_store_emptied(workspace: Path, tmp_path: Path, store: Path, env: dict[str, str]) -> list[dict]:
    """A build of `demo` after its store was emptied: it builds, with its worker started before the recipe models and
    nothing killed; the evidence of the three builds so far (built, reused, built), oldest first."""
    shutil.rmtree(store)
    miss = build_report(tmp_path, "build", str(workspace), "--engine", "demo", env=env)
    assert miss["code"] == 0 and miss["group_kills"] == []
    assert [m for m in LATE_FOR_A_BUILD if m in miss["at_spawn"]] == []
    runs = sorted((workspace / ".trtls" / "runs").glob("demo-*/summary.json"), key=lambda p: p.stat().st_mtime)
    summaries = [json.loads(r.read_text()) for r in runs]
    assert [s["outcome"] for s in summaries] == ["built", "reused", "built"]
    return summaries


def test_an_edited_recipe_starts_its_worker_before_the_lookup_and_a_hit_kills_it_unused(
    workspace: Path, tmp_path: Path
) -> None:
    """After an edit to the engine's own table the memo is there but no longer holds: the key is known only once the
    recipe loads, and most lookups after an edit miss, so the worker starts before the recipe models. Here the edit
    is the engine's output (in its job, not in its key: the same engine key) and the store serves it: the
    worker, sent this build's checked job before the lookup (held: it writes nothing before a commit), is killed at
    once (its session's group, SIGKILL) rather than waited for, and nothing else was built. Another such edit with the
    store emptied builds with the worker started ahead (sent no job before the check: the engine's view changed; its
    own checked job as soon as the recipe was checked: tests/builds/test_checked_job_ahead.py); an edit the recipe's
    check refuses kills it too."""
    store = tmp_path / "store"
    env = {**os.environ, "TRTLS_STORE": str(store)}
    first = build_report(tmp_path, "build", str(workspace), "--engine", "demo", env=env)
    assert first["code"] == 0 and first["group_kills"] == []
    recipe = workspace / "trtls.toml"
    output = 'output = "build/demo{}.engine"'
    recipe.write_text(recipe.read_text().replace(output.format(""), output.format("-1")))
    hit = build_report(tmp_path, "build", str(workspace), "--engine", "demo", env=env)
    assert hit["code"] == 0
    assert hit["at_spawn"] is not None, "no worker was started ahead of the lookup"
    loaded = [m for m in LATE_FOR_A_BUILD if m in hit["at_spawn"]]
    assert loaded == [], f"imported before an edited recipe's worker started: {loaded}"
    assert [k[1] for k in hit["group_kills"]] == [9], f"the unused worker was not killed: {hit['group_kills']}"
    recipe.write_text(recipe.read_text().replace(output.format("-1"), output.format("-2")))
    summaries = _miss_with_the_store_emptied(workspace, tmp_path, store, env)
    assert NOTE not in summaries[-1]["notes"]  # the engine's own table changed: the last build's job did not go ahead
    # this build's own checked job did, once the recipe was checked: the worker started ahead got it before the store
    # was looked up, held its commit, and wrote the engine only after it (built, published)
    assert CHECKED_NOTE in summaries[-1]["notes"], summaries[-1]["notes"]
    assert summaries[-1]["outcome"] == "built" and summaries[-1]["engineArtifact"]["sha256"]
    # an edit that the recipe's check refuses (an optimization level TensorRT has not): the worker started ahead of
    # the check is killed as the refusal is said, not waited for; exit 2, nothing built
    recipe.write_text(recipe.read_text().replace("optimization_level = 3", "optimization_level = 99"))
    refused = build_report(tmp_path, "build", str(workspace), "--engine", "demo", env=env, expect=2)
    assert refused["code"] == 2 and refused["at_spawn"] is not None
    assert [k[1] for k in refused["group_kills"]] == [9], refused["group_kills"]
    assert len(list((workspace / ".trtls" / "runs").glob("demo-*/summary.json"))) == 3


def test_an_edit_outside_the_engines_view_is_a_known_miss_or_a_hit_that_starts_no_worker(
    workspace: Path, tmp_path: Path
) -> None:
    """A comment, another engine's table and the engine's own cancel grace (the supervisor's: no job reads it) edited
    (builds/avoidance/recipe_view.py): the engine's job, so its key, is the memo's. With the key in the store no worker
    starts at all (the full path checks the edit, then serves it); with the store emptied the miss is known before the
    recipe models load, and the memo's job goes ahead with the worker, committed after the check found the same job. An
    edit the check refuses after such a job went ahead kills its worker: nothing is built and nothing written."""
    store = tmp_path / "store"
    env = {**os.environ, "TRTLS_STORE": str(store)}
    assert build_report(tmp_path, "build", str(workspace), "--engine", "demo", env=env)["code"] == 0
    recipe = workspace / "trtls.toml"
    large_grace = "cancel_grace_s = {}\nkeep_evidence = false"
    demo_grace = "cancel_grace_s = {}\n\n[engines.demo.builder]"
    text = recipe.read_text().replace(large_grace.format(10), large_grace.format(20))
    recipe.write_text("# a comment\n" + text.replace(demo_grace.format(10), demo_grace.format(11)))
    hit = build_report(tmp_path, "build", str(workspace), "--engine", "demo", env=env)
    assert hit["code"] == 0 and hit["at_spawn"] is None and hit["group_kills"] == []
    # the one worker the entry started parked was never told to start, and was ended before the command returned
    assert len(hit["parked"]) == 1 and hit["released"] == [], hit
    assert [k for k, _ in hit["parked_kills"]] == hit["parked"], hit["parked_kills"]
    # the recipe read once for every question asked of it (the early worker, the store's say, the memo's hash, the
    # engine's view, the check, the evidence's retention): core.recipe_file.recipe_snapshot
    assert hit["recipe_reads"] == 1, hit["recipe_reads"]
    recipe.write_text(recipe.read_text() + "\n# another comment\n")
    summaries = _miss_with_the_store_emptied(workspace, tmp_path, store, env)
    assert NOTE in summaries[-1]["notes"] and summaries[-1]["engineArtifact"]["sha256"]
    # another engine's table made invalid: the whole recipe is refused; the job sent ahead is never committed
    engine = workspace / "build" / "demo.engine"
    before = engine.read_bytes()
    recipe.write_text(recipe.read_text().replace(large_grace.format(20), large_grace.format('"soon"')))
    shutil.rmtree(store)
    refused = build_report(tmp_path, "build", str(workspace), "--engine", "demo", env=env, expect=2)
    assert refused["at_spawn"] is not None and [k[1] for k in refused["group_kills"]] == [9]
    assert engine.read_bytes() == before and not list(engine.parent.glob("*.trtls-tmp-*"))
    assert len(list((workspace / ".trtls" / "runs").glob("demo-*/summary.json"))) == 3


def test_a_recipe_without_routes_is_checked_without_the_route_models(workspace: Path) -> None:
    """The route models (~13 ms of imports here) load only for a recipe that has routes: a build's check of one without
    them, on the critical path after an edit to the engine's table, does not pay for them; one with a route still
    gets its route findings, located."""
    probe = (
        "import json, sys\n"
        "from trtls.onnx_files.profile_checks import check_recipe\n"
        "loaded = check_recipe(sys.argv[1])\n"
        "print(json.dumps({'route': 'trtls.core.route' in sys.modules, 'codes': [f.code for f in loaded.findings]}))\n"
    )
    recipe = workspace / "trtls.toml"
    plain = json.loads(
        subprocess.run([sys.executable, "-c", probe, str(recipe)], capture_output=True, text=True, check=True).stdout
    )
    assert plain == {"route": False, "codes": []}
    recipe.write_text(recipe.read_text() + '\n[routes."bad name!"]\nengine = "demo"\n')
    routed = json.loads(
        subprocess.run([sys.executable, "-c", probe, str(recipe)], capture_output=True, text=True, check=True).stdout
    )
    assert routed["route"] is True and "TRT108" in routed["codes"]


def test_the_fast_path_holds_for_the_same_interpreter_by_another_name(workspace: Path, tmp_path: Path) -> None:
    other = Path(sys.executable).with_name("python3")
    if not other.exists() or other.name == Path(sys.executable).name:
        pytest.skip(f"no second name for {sys.executable} beside it")
    env = {**os.environ, "TRTLS_STORE": str(tmp_path / "store")}
    cmd = ["-m", "trtls", "build", str(workspace), "--engine", "demo", "--json"]
    built = subprocess.run([sys.executable, *cmd], capture_output=True, text=True, env=env, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    reused = subprocess.run([str(other), *cmd], capture_output=True, text=True, env=env, timeout=600)
    assert reused.returncode == 0, reused.stderr[-3000:]
    summary = json.loads(reused.stdout.strip().splitlines()[-1])["summary"]
    assert summary["outcome"] == "reused"
    assert summary["store"]["source"] == "memo", f"{other.name} took the full path: {summary['store']}"


def test_the_language_server_answers_initialize_before_the_cli_parser_or_a_recipe_model_loads(tmp_path: Path) -> None:
    out, at_exit = tmp_path / "modules.json", tmp_path / "modules-at-exit.json"
    proc = subprocess.Popen(
        [sys.executable, "-c", SERVE_DRIVER, str(out), str(at_exit)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )

    def send(message: dict) -> None:
        body = json.dumps(message).encode()
        assert proc.stdin is not None
        proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        proc.stdin.flush()

    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"processId": None, "capabilities": {}}})
    assert proc.stdout is not None
    header = b""
    while not header.endswith(b"\r\n\r\n"):
        byte = proc.stdout.read(1)
        assert byte, proc.stderr.read().decode() if proc.stderr else "no reply"
        header += byte
    length = int(header.split(b"Content-Length:")[1].split(b"\r\n")[0])
    reply = json.loads(proc.stdout.read(length))
    assert reply["id"] == 1 and reply["result"]["serverInfo"]["name"] == "trtls"
    send({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
    send({"jsonrpc": "2.0", "method": "exit"})
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err.decode()[-3000:]
    loaded = [m for m in LATE_FOR_INITIALIZE if m in json.loads(out.read_text())]
    assert loaded == [], f"imported before initialize was answered: {loaded}"
    assert "trtls.builds.supervisor.supervisor" not in json.loads(at_exit.read_text()), (
        "a shutdown with no build loaded it"
    )
