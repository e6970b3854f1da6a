"""Hostile filesystem states around every trtls command that writes, deletes or kills (issue 27): no file outside
the project changes, no file of the user's inside it changes, no traceback, exit 0/1/2 (the documented decisions
of gates and routes too) and, when not 0, a message naming the path; an unrelated process is never killed.

A state is a command and one to three hostile changes drawn from `hostile_states.apply`'s catalogue: symlinks
(dangling, leading out of the folder, to /dev/zero or /dev/null, swapped for a folder's twin outside *mid-run*, at
the N-th filesystem event of the command — an audit hook, in the test process or through `sitecustomize` in a
child), FIFOs, real device nodes (mknod 1,3/1,5/1,7), sparse 16 GiB records, immutable files and folders
(`chattr +i`, by ioctl), full and read-only disks (a real tmpfs mounted over the folder, just larger than what it
holds), and forged records (a `running.json` naming a live process that is no part of trtls with its true start
id; a known-good record whose key is `../../outside/x`; store entries rewritten; a fast-path memo whose output is
elsewhere; `[store] path` at `.`, `..`, `models`, `.trtls`, a folder of someone else's). Hostile targets stay in
the site: stand-ins replace /etc/passwd, `/` and `~`, since a state that still fails would destroy real files.

"Outside" is everything in the site but the project and the store; the user's files are the recipe, the model and
files planted beside them. One exception: a `-o` file lands where the user pointed it, through a link to a folder too
(the door judges a report inside its own real folder), so that one file is not counted. A refusal (exit not 0) must
name a path the state made hostile, unless the state's ordinary changes alone (a file gone, old runs) end the same
way; a state of ordinary changes only must give a located message (a path and a TRT code).

Two real builds per session (the quickstart's `demo`, into a store: the seed, and a larger profile whose engine is
left at the output so `rollback` and a store hit have work to do); every state works on a copy of that site. How the
states split (TRTLS_HOSTILE_EXAMPLES = N, default 2,000; about 5.5 min on 2 shared CPUs, the slowest quarter of it
fixtures and real builds):

* in process (~88 % of N): `trtls.cli.main.main(argv)` itself, stdout and stderr captured, for `build` (a store hit;
  a real TensorRT build when the state breaks the store), `rollback`, `engines`, `gc`, `store gc/ls`,
  `report/trace/schema -o`. No FIFO, device or huge file here: those would hang or exhaust the test process.
* in real `.venv/bin/trtls` processes (~8 %): the same commands plus `build --no-store` and `build --rebuild`
  (real builds), and every change including FIFOs, devices and 16 GiB files (each process bounded: 6 GiB of
  address space, 256 MiB per file written, a timeout — a hang is a failure).
* route commands in processes (~3 %): `route build`, `route promote`, `gates -o` on the route sample taken to
  `supported` once per session.
* the language server (~1 %): a real `trtls serve` over stdio opens the folder (orphan recovery) and runs
  `trtls.buildEngine` to its end.

Figures and the long run: docs/reliability.md. 20,000 states once:
    TRTLS_HOSTILE_EXAMPLES=20000 .venv/bin/python -m pytest tests/fuzz/test_hostile_fs.py -p no:cacheprovider -q -s
A failing state is shrunk by hypothesis and printed as data; replay one with
    TRTLS_HOSTILE_REPLAY='<the printed state>' .venv/bin/python -m pytest tests/fuzz/test_hostile_fs.py -k replay -s
TRTLS_HOSTILE_SURVEY=1 runs every state without stopping at the first failure and prints the smallest state of
each distinct failure (each shrunk by dropping changes); TRTLS_HOSTILE_VERBOSE=1 prints one line per state.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tests.fuzz import hostile_states as hs
from tests.fuzz.hostile_states import (
    BUILD_ENGINE,
    DEVICES,
    IN_PROCESS,
    IN_PROCESS_CHANGES,
    LSP_CHANGES,
    PROCESS_CHANGES,
    PROCESS_ONLY,
    ROUTE,
    ROUTE_CHANGES,
    ROUTE_TARGETS,
    TARGETS,
    Command,
    route_user,
)

EXAMPLES = int(os.environ.get("TRTLS_HOSTILE_EXAMPLES", "2000"))
SHARE = {"in_process": 88, "process": 8, "route": 3, "lsp": 1}
SURVEY = os.environ.get("TRTLS_HOSTILE_SURVEY") == "1"
VERBOSE = os.environ.get("TRTLS_HOSTILE_VERBOSE") == "1"  # one line per state on stderr
# The same states on every run unless asked to explore: a run that draws new states is a search (the long runs of
# docs/reliability.md), and what it finds is replayed on every run (FOUND_BY_THE_LONG_RUN); a CI run is a check, and
# says the same on a rerun.
EXPLORE = os.environ.get("TRTLS_HOSTILE_EXPLORE") == "1"
TRTLS = Path(sys.executable).with_name("trtls")
FUZZ = Path(__file__).resolve().parent
DEMO = """[engines.demo]
onnx = "models/demo.onnx"
output = "build/demo.engine"
timing_cache = { path = "build/demo.timing-cache", mode = "read_write" }

[[engines.demo.profiles]]
input = "input"
min = [1, 3, 32, 32]
opt = [4, 3, 32, 32]
max = [8, 3, 32, 32]

[store]
path = "../store"
"""


def examples(runner: str) -> int:
    return max(1, EXAMPLES * SHARE[runner] // 100)


# -- the session: one real build, the route sample, a victim process, what this machine allows -------------------
@dataclass
class Template:
    root: Path
    key: str
    seed: str
    user: tuple[str, ...] = hs.USER_FILES


SITECUSTOMIZE: list[Path] = []  # the folder of the sitecustomize that arms mid-run swaps in trtls processes


def _env(site: Site | None = None, swaps: list[dict[str, Any]] | None = None) -> dict[str, str]:
    path = [*map(str, SITECUSTOMIZE), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {**os.environ, "TRTLS_STORE": "off", "PYTHONPATH": os.pathsep.join(path)}
    env.pop(hs.SWAP_ENV, None)
    if site is not None and swaps:
        env[hs.SWAP_ENV] = json.dumps({"swaps": swaps, "roots": [str(site.project), str(site.store)]})
    return env


Site = hs.Site


@pytest.fixture(scope="session")
def sitecustomize(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`sitecustomize.py` on the PYTHONPATH of every trtls process this test starts: it imports hostile_states and
    arms the swaps that process was given (hostile_states.install_swap_from_env)."""
    site = tmp_path_factory.mktemp("hostile-site")
    (site / "sitecustomize.py").write_text(
        "import os, sys\n"
        f"if {hs.SWAP_ENV!r} in os.environ:\n"
        f"    sys.path.insert(0, {str(FUZZ)!r})\n"
        "    import hostile_states\n"
        "    hostile_states.install_swap_from_env()\n"
    )
    SITECUSTOMIZE[:] = [site]
    return site


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory, quickstart_models: Path, sitecustomize: Path) -> Template:
    """The quickstart's `demo` built for real (twice), published to the store beside it; the outside tree."""
    root = tmp_path_factory.mktemp("hostile") / "template"
    project = root / "project"
    (project / "models").mkdir(parents=True)
    shutil.copy2(quickstart_models / "demo.onnx", project / "models" / "demo.onnx")
    (project / "trtls.toml").write_text(DEMO)
    hs.plant_user_files(project)
    # two real builds: the seed (the recipe as it stays) and one with a larger profile, whose engine stays at the
    # output; so a build of the recipe restores the seed from the store and `rollback` has an engine to go back to
    for text in (DEMO, DEMO.replace("max = [8, 3, 32, 32]", "max = [16, 3, 32, 32]")):
        (project / "trtls.toml").write_text(text)
        done = subprocess.run([str(TRTLS), "build", str(project), "--engine", "demo"], capture_output=True,
                              text=True, env=_env(), timeout=900)  # fmt: skip
        assert done.returncode == 0, done.stderr
    (project / "trtls.toml").write_text(DEMO)
    runs = sorted(
        (project / ".trtls" / "runs").iterdir(), key=lambda r: json.loads((r / "summary.json").read_text())["startedAt"]
    )
    run = runs[0]
    summary = json.loads((run / "summary.json").read_text())
    key = summary["engineKey"]
    hs.make_outside(root / "outside", key, run)
    shutil.copytree(root / "store" / "entries" / key, root / "outside" / "twin-entry", dirs_exist_ok=True)
    return Template(root, key, run.name)


@pytest.fixture(scope="session")
def route_template(tmp_path_factory: pytest.TempPathFactory, sitecustomize: Path) -> Template:
    """The route sample taken to `supported` for real (tests/route/_lifecycle_sample.py), once."""
    from tests.route._lifecycle_sample import supported_sample

    root = tmp_path_factory.mktemp("hostile-route") / "template"
    project = supported_sample(root / "project")
    (project / "notes.txt").write_bytes(hs.USER_TEXT)
    (project / "fullout").mkdir()
    (root / "store").mkdir()
    hs.make_outside(root / "outside", "0" * 64, project / ".trtls")  # "another project's run": its evidence
    user = [str(p.relative_to(project)) for p in sorted(project.rglob("*")) if p.is_file() and route_user(p, project)]
    return Template(root, "0" * 64, "none", tuple(user))


class Victim:
    """A process that is no part of trtls, leading its own process group: a forged running.json names it."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(["sleep", "1000000"], start_new_session=True)
        self.start = hs.start_id(self.proc.pid)

    def alive(self) -> bool:
        return self.proc.poll() is None and hs.start_id(self.proc.pid) == self.start


@pytest.fixture(scope="session")
def victim() -> Any:
    box = [Victim()]
    yield box
    box[0].proc.kill()
    box[0].proc.wait()


def _capabilities(base: Path) -> dict[str, str]:
    """What this machine refuses (a strategy left out, with the reason)."""
    refused: dict[str, str] = {}
    probe = base / "probe"
    probe.mkdir()
    (probe / "f").write_bytes(b"")
    if not hs.set_immutable(probe / "f", True):
        refused["immutable"] = "chattr +i (FS_IOC_SETFLAGS) is refused on this filesystem or for this user"
    hs.set_immutable(probe / "f", False)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(probe)], capture_output=True)
    if mounted.returncode != 0:
        refused["full"] = refused["ro"] = f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}"
    else:
        subprocess.run(["umount", str(probe)], check=True)
    shutil.rmtree(probe)
    return refused


# -- running one command ------------------------------------------------------------------------------------------
@dataclass
class Outcome:
    code: int | None
    out: str
    err: str
    exception: str | None = None
    hung: bool = False
    events: int | None = None  # filesystem events the command made (in process: the mid-run swap's clock)


def run_in_process(site: Site, argv: list[str]) -> Outcome:
    from trtls.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    plan = hs.arm(site.swaps, [str(site.project), str(site.store)])
    code: int | None = None
    exc = None
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 2)
    except Exception:
        exc = traceback.format_exc()
    finally:
        hs.disarm()
    return Outcome(code, out.getvalue(), err.getvalue(), exc, events=plan["count"] if plan else None)


def _bounded() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (6 << 30, 6 << 30))
    resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 20, 256 << 20))


def run_process(site: Site, argv: list[str], timeout: float = 120) -> Outcome:
    proc = subprocess.Popen([str(TRTLS), *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(site, site.swaps), start_new_session=True, preexec_fn=_bounded)  # fmt: skip
    try:
        out, err = proc.communicate(timeout=timeout)
        return Outcome(proc.returncode, out, err)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, 9)
        out, err = proc.communicate()
        return Outcome(None, out, err, hung=True)


def run_language_server(site: Site, argv: list[str]) -> Outcome:
    """A real `trtls serve` over stdio opens the project (orphan recovery) and builds `demo` to the end."""
    from tests.lsp.raw_stdio import RawServer

    saved = dict(os.environ)
    os.environ.update(_env(site, site.swaps))
    try:
        s = RawServer(cwd=site.project, preexec_fn=_bounded)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    said: list[Any] = []
    hung = False
    try:
        s.initialize(site.project)
        args = {"uri": (site.project / "trtls.toml").as_uri(), "engine": "demo"}
        reply = s.request("workspace/executeCommand", {"command": "trtls.buildEngine", "arguments": [args]}, 120)
        said.append(reply)
        build_id = (reply.get("result") or {}).get("buildId")
        end = time.monotonic() + 180
        ended_at = None  # the outcome is listed before its record is written (the output's sha is re-read first):
        # the build is at its end once its record is written or said unwritable, or 10 s after its outcome
        while build_id and (reply.get("result") or {}).get("status") == "started" and time.monotonic() < end:
            rows = s.request("workspace/executeCommand", {"command": "trtls.listBuilds", "arguments": [{}]}, 60)
            row = next((r for r in (rows.get("result") or {}).get("builds", []) if r["buildId"] == build_id), {})
            if row.get("status") not in ("running", "starting", "stopping", None):
                ended_at = ended_at or time.monotonic()
            if row.get("evidencePath") or row.get("evidenceError") or (ended_at and time.monotonic() - ended_at > 10):
                said.append(row)
                break
            time.sleep(0.25)
        else:
            hung = bool(build_id) and time.monotonic() >= end
    except AssertionError:
        hung = True
    finally:
        code = s.close(timeout=60)
    internal = [m for m in s.messages if m.get("error", {}).get("code") == -32603]
    # what the editor shows of a failed build: its messages, the recipe's diagnostics, the build tree's outcome
    shown = [m.get("params") for m in s.messages
             if m.get("method") in ("textDocument/publishDiagnostics", "trtls/buildTree")]  # fmt: skip
    text = json.dumps(said + s.shown_messages() + shown + internal, default=str)
    # as an exit code: the server's own when not 0 (never expected), 2 for a refusal (-32602, a located error),
    # 1 for a build that ended failed, else 0
    refused = bool(said) and "error" in said[0]
    failed = len(said) > 1 and said[-1].get("status") == "failed"
    rc = (100 + code) if code else 2 if refused else 1 if failed else 0
    return Outcome(rc, text, s.stderr.decode(errors="replace"), json.dumps(internal) if internal else None, hung)


# -- one state, judged -----------------------------------------------------------------------------------------------
PHASE = {"store": 0, "blob": 0, "aged": 0, "gone": 1, "user": 1, "orphan": 1, "known-good": 1, "entry": 1, "memo": 2,
         "link": 3, "fifo": 3, "node": 3, "huge": 3, "full": 4, "ro": 4, "immutable": 5, "swap": 6}  # fmt: skip


@dataclass
class Runner:
    name: str
    template: Template
    victim: list[Victim]
    root: Path
    calm: dict[tuple[str, str | None, tuple[Any, ...]], int | None] = field(default_factory=dict)
    count: int = 0  # generated states
    sites: int = 0  # every site made (the survey's reductions too)
    failures: dict[tuple[Any, ...], str] | None = None  # survey mode: the smallest state of each failure

    def state(self, command: Command, target: str | None, changes: tuple[tuple[Any, ...], ...]) -> None:
        self.count += 1
        problems, text = self.evaluate(command, target, changes)
        if not problems:
            return
        if self.failures is None:
            raise AssertionError(text)
        kinds = {p.split(":")[0] for p in problems}
        for change in changes:  # the survey's shrink: drop each change while the same kinds of problem remain
            if len(changes) == 1:
                break
            fewer = tuple(c for c in changes if c != change)
            again, again_text = self.evaluate(command, target, fewer)
            if kinds <= {p.split(":")[0] for p in again}:
                changes, text = fewer, again_text
        sig = (self.name, command.name, tuple(sorted(kinds)), tuple(sorted(str(c[:3]) for c in changes)))
        self.failures.setdefault(sig, text)

    def evaluate(
        self, command: Command, target: str | None, changes: tuple[tuple[Any, ...], ...]
    ) -> tuple[list[str], str]:
        self.sites += 1
        tpl = self.template
        site = hs.copy_site(tpl.root, self.root / f"s{self.sites}", tpl.key, tpl.seed)
        site.user = list(tpl.user)
        site.victim = (self.victim[0].proc.pid, self.victim[0].start or "")
        ctx = {"dead_pid": _dead_pid(), "code_stats": _code_stats()}
        applied: list[str] = []
        try:
            for change in sorted(changes, key=lambda c: PHASE[c[0]]):
                try:
                    hs.apply(site, change, ctx)
                    applied.append(repr(change))
                except (OSError, ValueError, KeyError) as exc:
                    applied.append(f"{change!r} (not applied: {exc})")
            argv = command.argv(site, target)
            before_out = hs.tree(site.root, skip=(site.project, site.store))
            before_user = {u: hs.entry_of(site.project / u) for u in site.user}
            outcome = self.run(site, command, argv)
            for swap in site.swaps:  # whether the swap happened (its path is a link now) or the command ended first
                swapped = os.path.islink(swap["path"])
                applied.append(f"swap of {swap['path']} at event {swap['at']}: {'done' if swapped else 'not reached'}")
            problems = judge(site, command, target, changes, outcome, before_out, before_user, self)
        finally:
            hs.cleanup(site)
        if VERBOSE:
            last = (outcome.err.strip() or outcome.out.strip()).splitlines()[-1:] or [""]
            print(f"[{self.name}] {command.name} {target or ''} {list(changes)} -> {outcome.code} "
                  f"({outcome.events} events; swaps {[s.get('done', 'no') for s in site.swaps]}) "
                  f"{len(problems)} problems | {last[0][:160]}", file=sys.stderr)  # fmt: skip
        state = json.dumps({"runner": self.name, "command": command.name, "target": target,
                            "changes": [list(c) for c in changes]})  # fmt: skip
        text = (
            f"hostile state: {state}\n  applied: {'; '.join(applied)}\n  argv: trtls {' '.join(argv)}\n"
            f"  exit: {outcome.code}{' (hung)' if outcome.hung else ''}\n  problems:\n    - "
            + "\n    - ".join(problems)
            + f"\n  stdout: {outcome.out[-1500:]}\n  stderr: {outcome.err[-2500:]}\n"
            + (f"  exception: {outcome.exception[-2500:]}\n" if outcome.exception else "")
        )
        return problems, text

    def ordinary_exit(self, command: Command, target: str | None, ordinary: tuple[Any, ...]) -> int | None:
        """The exit of `command` in a site with only these ordinary changes (computed once per combination)."""
        key = (command.name, target, ordinary)
        if key not in self.calm:
            self.sites += 1
            site = hs.copy_site(self.template.root, self.root / f"s{self.sites}", self.template.key, self.template.seed)
            try:
                for change in ordinary:
                    hs.apply(site, change, {})
                self.calm[key] = self.run(site, command, command.argv(site, target)).code
            finally:
                hs.cleanup(site)
        return self.calm[key]

    def run(self, site: Site, command: Command, argv: list[str]) -> Outcome:
        if self.name == "in_process":
            return run_in_process(site, argv)
        if self.name == "lsp":
            return run_language_server(site, argv)
        return run_process(site, argv, timeout=command.timeout)


def judge(site: Site, command: Command, target: str | None, changes: tuple[tuple[Any, ...], ...], outcome: Outcome,
          before_out: dict[str, Any], before_user: dict[str, Any], runner: Runner) -> list[str]:  # fmt: skip
    """Every problem as `kind: detail` (the survey groups by kind)."""
    after_out = hs.tree(site.root, skip=(site.project, site.store))
    # a `-o` file goes where the user pointed it, through a link to a folder too (the door judges it inside its own
    # real folder): that one file is theirs to ask for, wherever it lands
    asked = os.path.realpath(site.project / target) if target else None
    problems = [f"outside the project changed: {c}" for c in hs.changes(before_out, after_out, asked)]
    after_user = {u: hs.entry_of(hs.where_now(site, site.project / u)) for u in site.user}
    problems += [f"user file changed: {c}" for c in hs.changes(before_user, after_user)]
    if outcome.exception:
        problems.append(f"traceback: {outcome.exception.strip().splitlines()[-1][:300]}")
    text = outcome.out + outcome.err
    if "Traceback (most recent call last)" in text:
        problems.append("traceback printed: " + text[text.index("Traceback") :].strip().splitlines()[-1][:300])
    if outcome.hung:
        problems.append(f"hung: no exit within {command.timeout} s")
    elif outcome.code not in command.codes:
        problems.append(f"exit code: {outcome.code}, not one of {sorted(command.codes)}")
    elif outcome.code != 0:
        names = [n for n in [*site.names, *([target] if target else [])] if n]
        ordinary = tuple(c for c in changes if _ordinary(c))
        if ordinary == changes:  # nothing hostile to name: a located message (a path of the site, a TRT code)
            named = str(site.root) in text and "TRT" in text
        else:  # the hostile path, unless the ordinary changes alone end the same way (nothing to roll back to …)
            named = any(n in text for n in names) or outcome.code == runner.ordinary_exit(command, target, ordinary)
        if not named:
            problems.append(f"no path named: exit {outcome.code}; none of {sorted(set(names))[:6]} in the message")
    if not runner.victim[0].alive():
        problems.append(f"killed an unrelated process: pid {runner.victim[0].proc.pid}, named by a forged record")
        runner.victim[0] = Victim()
    return problems


def _code_stats() -> list[Any]:
    import trtls
    from trtls.builds.avoidance.memo import KEY_CODE

    pkg = Path(trtls.__file__).parent
    out = []
    for rel in KEY_CODE:
        try:
            s = os.stat(pkg / rel)
            out.append([s.st_size, s.st_mtime_ns, s.st_ino])
        except OSError:
            out.append(None)
    return out


@functools.cache
def _dead_pid() -> int:
    """A pid whose process has ended (a forged record's supervisor)."""
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


# -- strategies and the tests ---------------------------------------------------------------------------------------
def state_strategy(commands: list[Command], pool: list[tuple[Any, ...]], targets: list[str],
                   refused: dict[str, str]) -> Any:  # fmt: skip
    """(command, -o target, one to three distinct changes); a swap draws the filesystem event it happens at."""
    usable = [c for c in pool if c[0] not in refused]

    def at_event(change: tuple[Any, ...]) -> Any:
        # half early (most commands that do not build make fewer than ten filesystem events), half anywhere in a build
        at = st.one_of(st.integers(1, 8), st.integers(9, 200))
        return at.map(lambda n: (*change[:3], n)) if change[0] == "swap" else st.just(change)

    changes = st.sampled_from(usable).flatmap(at_event)
    return st.tuples(
        st.sampled_from(commands),
        st.sampled_from(targets),
        st.lists(changes, min_size=1, max_size=3, unique_by=lambda c: (c[0], c[1])),
    )


def explore(runner: Runner, commands: list[Command], pool: list[tuple[Any, ...]], refused: dict[str, str],
            targets: list[str] = TARGETS) -> None:  # fmt: skip
    n = examples(runner.name)
    runner.failures = {} if SURVEY else None
    t0 = time.monotonic()

    @settings(
        max_examples=n,
        deadline=None,
        database=None,
        derandomize=not EXPLORE,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )
    @given(state_strategy(commands, pool, targets, refused))
    def one(state: tuple[Command, str, list[tuple[Any, ...]]]) -> None:
        command, target, changes = state
        runner.state(command, target if command.takes_target else None, tuple(changes))

    try:
        one()
    finally:
        said = f"{runner.name}: {runner.count} states ({runner.sites} sites) in {time.monotonic() - t0:.0f} s"
        left = "; ".join(f"{k}: {why}" for k, why in refused.items())
        print(f"\n[hostile] {said}" + (f"; left out: {left}" if left else ""), file=sys.stderr)
    if runner.failures:
        texts = list(runner.failures.values())
        pytest.fail(f"{len(texts)} distinct failures in {runner.count} states:\n\n" + "\n".join(texts), False)


def _ordinary(change: tuple[Any, ...]) -> bool:
    """A change any checkout may have: a file gone, old runs, a model through a link, a read-only store mode."""
    return change[0] in ("gone", "aged", "blob") or change == ("store", "../store", "read")


def _template_unchanged(template: Template, before: dict[str, Any]) -> None:
    assert hs.changes(before, hs.tree(template.root)) == [], "a state reached the session's template"


def test_hostile_states_in_process(template: Template, victim: list[Victim], tmp_path: Path) -> None:
    before = hs.tree(template.root)
    refused = _capabilities(tmp_path)
    explore(Runner("in_process", template, victim, tmp_path), IN_PROCESS, IN_PROCESS_CHANGES, refused)
    _template_unchanged(template, before)


def test_hostile_states_in_trtls_processes(template: Template, victim: list[Victim], tmp_path: Path) -> None:
    before = hs.tree(template.root)
    refused = _capabilities(tmp_path)
    commands = IN_PROCESS + PROCESS_ONLY
    explore(Runner("process", template, victim, tmp_path), commands, PROCESS_CHANGES + DEVICES, refused)
    _template_unchanged(template, before)


def test_hostile_states_at_route_commands(route_template: Template, victim: list[Victim], tmp_path: Path) -> None:
    before = hs.tree(route_template.root)
    refused = _capabilities(tmp_path)
    explore(Runner("route", route_template, victim, tmp_path), ROUTE, ROUTE_CHANGES, refused, ROUTE_TARGETS)
    _template_unchanged(route_template, before)


def test_hostile_states_at_the_language_server(template: Template, victim: list[Victim], tmp_path: Path) -> None:
    before = hs.tree(template.root)
    refused = _capabilities(tmp_path)
    explore(Runner("lsp", template, victim, tmp_path), [BUILD_ENGINE], LSP_CHANGES, refused)
    _template_unchanged(template, before)


def _replay(request: pytest.FixtureRequest, victim: list[Victim], tmp_path: Path, state: dict[str, Any]) -> None:
    everything = {c.name: c for c in [*IN_PROCESS, *PROCESS_ONLY, *ROUTE, BUILD_ENGINE]}
    tpl = request.getfixturevalue("route_template" if state["runner"] == "route" else "template")
    runner = Runner(state["runner"], tpl, victim, tmp_path)
    runner.state(everything[state["command"]], state["target"], tuple(tuple(c) for c in state["changes"]))


@pytest.mark.skipif(not os.environ.get("TRTLS_HOSTILE_REPLAY"), reason="set TRTLS_HOSTILE_REPLAY to a printed state")
def test_replay(request: pytest.FixtureRequest, victim: list[Victim], tmp_path: Path) -> None:
    """One printed state again (TRTLS_HOSTILE_REPLAY='{"runner": …, "command": …, "target": …, "changes": …}')."""
    _replay(request, victim, tmp_path, json.loads(os.environ["TRTLS_HOSTILE_REPLAY"]))


# what the 20,000-state run of 2026-12-03 found (docs/reliability.md), replayed on every run
FOUND_BY_THE_LONG_RUN = [
    # `.trtls` swapped for a dangling link mid-rollback: "no earlier known-good engine", no path named
    {"runner": "in_process", "command": "rollback", "target": None, "changes": [["swap", ".trtls", "twin-trtls", 5]]},
    # a user's file at the route's bundle path: replaced, exit 0
    {"runner": "route", "command": "route build", "target": None, "changes": [["user", "build/tiny_ort.bundle"]]},
    # a FIFO at the output, built from the editor: the failure named no path (not reproduced since; kept as a guard)
    {"runner": "lsp", "command": "trtls.buildEngine", "target": None, "changes": [["fifo", "build/demo.engine"]]},
    # found the same day by a 2,000-state run on the fixed code: a user's file at the bundle path, `route promote`
    # refused (exit 3) saying "bundle sha256:… → sha256:…" with no path
    {"runner": "route", "command": "route promote", "target": None, "changes": [["user", "build/tiny_ort.bundle"]]},
    # found by CI's run on 2026-12-03: the bundle's sidecar a symlink to a file outside; TRT122 named the bundle but
    # not the sidecar it refused to read
    {
        "runner": "route",
        "command": "route build",
        "target": None,
        "changes": [["link", "build/tiny_ort.bundle.trtls.json", "@precious.txt"]],
    },
    # found by a 2,000-state run on 2026-12-04: `.trtls` swapped for a link out of the project before `route
    # promote` read the gates run; it read the other folder and said "no complete gates run", no path named
    {"runner": "route", "command": "route promote", "target": None, "changes": [["swap", ".trtls", "twin-trtls", 4]]},
    # found by the 20,000-state run of 2026-12-04 afternoon: the same swap one event later, as the read walked the
    # path (ELOOP, an OSError, taken for "no complete gates run"): no path named
    {"runner": "route", "command": "route promote", "target": None, "changes": [["swap", ".trtls", "twin-trtls", 5]]},
]


@pytest.mark.parametrize("state", FOUND_BY_THE_LONG_RUN, ids=lambda s: f"{s['runner']}-{s['command']}")
def test_the_states_the_long_run_found(
    request: pytest.FixtureRequest, victim: list[Victim], tmp_path: Path, state: dict[str, Any]
) -> None:
    _replay(request, victim, tmp_path, state)
