"""Hostile filesystem states for tests/fuzz/test_hostile_fs.py: the site, the catalogue of hostile changes, the
snapshots that judge a command, and the mid-run swap.

Standard library only: `sitecustomize` imports this module inside the `trtls` processes the test starts, to swap
a folder for a symlink at the N-th filesystem event of the command (`install_swap_from_env`).

A site is one folder per generated state:

    root/project/   the recipe folder: trtls.toml, models/demo.onnx and the user's own files beside trtls's
    root/store/     the engine store the recipe names (`path = "../store"`)
    root/outside/   files that are no part of the project: precious files, another project's `.trtls`, old files
                    with names trtls makes, the twins that swapped folders lead to

Hostile targets never leave the site: stand-ins replace `/etc/passwd`, `/`, `~` (a state that still fails would
otherwise destroy the machine's files). Devices are the harmless ones only: /dev/null, /dev/zero, /dev/full (as a
symlink to them or a real node made with mknod, major 1).
"""

from __future__ import annotations

import array
import contextlib
import errno
import fcntl
import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SEED_RUN = "demo-seed"  # replaced by the real seed id
FORGED_ID = "demo-20260101-000001-f0f0f0"  # the known-good record a forged key rides on (`rollback --to`)
ORPHAN_ID = "demo-20260101-000002-0badc0"  # a planted running.json
OTHER_RUN = "demo-20250101-000000-0the12"  # another project's run, in root/outside/other/.trtls/runs
OLD = 3 * 86400  # seconds: older than every age-based sweep trtls knows (store tmp: an hour)
USER_FILES = ("trtls.toml", "models/demo.onnx", "notes.txt", "tmp/old-notes.txt", "models/tmp/old-weights.bin")
USER_TEXT = b"# the user's own notes: trtls must never replace or delete this file\n"


# -- the outside tree (made once per template, copied with the site) ----------------------------------------------
def make_outside(outside: Path, key: str, seed_run: Path) -> None:
    """Precious files, old files whose names trtls would make (a sweep through a link would take them), another
    project's evidence, and the twins a swapped folder leads to."""
    old = time.time() - OLD
    files = {
        "precious.txt": USER_TEXT,
        "precious.engine": bytes(range(256)) * 16,
        "precious.json": b'{"format": "trtls.known-good/1", "builds": []}\n',
        "passwd": b"root:x:0:0:root:/root:/bin/bash\n",  # the stand-in for /etc/passwd
        f"precious.engine.trtls-tmp-{ORPHAN_ID}": b"not trtls's: a name it makes, outside its folder\n",
        f".precious.engine.{'a1' * 4}.tmp": b"not trtls's either\n",
    }
    for name in ("old", "shared/tmp", "twin-build", "twin-runs", "twin-engines", "twin-trtls", "twin-entries",
                 "twin-tmp", "twin-used", "twin-locks", "twin-quarantine", "twin-entry", "x"):  # fmt: skip
        (outside / name).mkdir(parents=True, exist_ok=True)
        files[f"{name}/precious-{name.replace('/', '-')}.txt"] = USER_TEXT
        files[f"{name}/{key}"] = b"a name of the store's, in a folder that is not the store\n"
        files[f"{name}/{OTHER_RUN}.json"] = b"{}\n"
        files[f"{name}/tmp-{OTHER_RUN}"] = b"old\n"
    files["shared/entries-of-someone-else.txt"] = USER_TEXT  # a non-empty folder that is not a store
    files["x/engine"] = bytes(64)
    files["x/entry.json"] = b'{"format": "trtls.store-entry/1"}\n'
    for rel, data in files.items():
        (outside / rel).parent.mkdir(parents=True, exist_ok=True)
        (outside / rel).write_bytes(data)
    other = outside / "other"
    shutil.copytree(seed_run, other / ".trtls" / "runs" / OTHER_RUN)
    (other / "trtls.toml").write_bytes(b"# another project\n")
    for path in sorted(outside.rglob("*"), key=lambda p: -len(p.parts)):  # all of it old, deepest first
        os.utime(path, (old, old), follow_symlinks=False)


def plant_user_files(project: Path) -> None:
    old = time.time() - OLD
    for rel in USER_FILES[2:]:
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_bytes(USER_TEXT)
        if "old" in rel:
            os.utime(project / rel, (old, old))
    (project / "fullout").mkdir(exist_ok=True)


# -- one site ------------------------------------------------------------------------------------------------------
@dataclass
class Site:
    root: Path
    key: str
    seed: str
    victim: tuple[int, str] | None = None  # (pid, start id) of a process that is no part of trtls
    user: list[str] = field(default_factory=lambda: list(USER_FILES))  # project-relative
    names: list[str] = field(default_factory=list)  # what a located message may name
    needs_process: bool = False  # a FIFO, a device or a huge file: never read by the test process itself
    swaps: list[dict[str, Any]] = field(default_factory=list)
    mounts: list[Path] = field(default_factory=list)
    immutable: bool = False

    @property
    def project(self) -> Path:
        return self.root / "project"

    @property
    def store(self) -> Path:
        return self.root / "store"

    @property
    def outside(self) -> Path:
        return self.root / "outside"

    def path(self, token: str) -> Path:
        """`S:rel` in the store, `@rel` outside, `/abs` as is, else inside the project; {key} and {seed} filled."""
        token = token.replace("{key}", self.key).replace("{seed}", self.seed)
        if token.startswith("S:"):
            return self.store / token[2:]
        if token.startswith("@"):
            return self.outside / token[1:]
        if token.startswith("/"):
            return Path(token)
        return self.project / token

    def name(self, *paths: Path | str) -> None:
        for p in paths:
            self.names += [str(p), Path(p).name] if Path(p).name not in ("", ".", "..") else [str(p)]


def copy_site(template: Path, root: Path, key: str, seed: str) -> Site:
    """The template (project, store, outside) copied to `root`, absolute paths in trtls's records rewritten."""
    for part in ("project", "store", "outside"):
        shutil.copytree(template / part, root / part, symlinks=True)
    for folder in (root / "project" / ".trtls", root / "store"):
        for path in folder.rglob("*.json*"):
            if path.is_file() and not path.is_symlink():
                text = path.read_text(encoding="utf-8")
                if str(template) in text:
                    path.write_text(text.replace(str(template), str(root)), encoding="utf-8")
    return Site(root=root, key=key, seed=seed)


def _clear(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()


def _make_parent(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)


# -- immutable files (chattr +i) by ioctl, so cleanup never opens a FIFO ------------------------------------------
_GETFLAGS, _SETFLAGS, _IMMUTABLE = 0x80086601, 0x40086602, 0x10


def set_immutable(path: Path, on: bool) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        return False
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        flags = array.array("l", [0])
        fcntl.ioctl(fd, _GETFLAGS, flags, True)
        flags[0] = (flags[0] | _IMMUTABLE) if on else (flags[0] & ~_IMMUTABLE)
        fcntl.ioctl(fd, _SETFLAGS, flags, True)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def _mount_small(site: Site, path: Path, slack: int, read_only: bool) -> None:
    """A real tmpfs just large enough for what the folder holds plus `slack` bytes, its content copied in."""
    if path.is_symlink() or not path.is_dir() or not str(os.path.realpath(path)).startswith(str(site.root)):
        return
    used = sum(4096 + (p.stat().st_size + 4095) // 4096 * 4096 for p in path.rglob("*") if not p.is_symlink())
    hidden = path.with_name(path.name + ".before-mount")
    path.rename(hidden)
    path.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={max(used + slack, 8192)}", "tmpfs", str(path)],
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0:
        path.rmdir()
        hidden.rename(path)
        raise OSError(errno.EPERM, f"mount failed: {done.stderr.strip()}", str(path))
    site.mounts.append(path)
    with contextlib.suppress(OSError, shutil.Error):
        shutil.copytree(hidden, path, symlinks=True, dirs_exist_ok=True)
    shutil.rmtree(hidden)
    if read_only:
        subprocess.run(["mount", "-o", "remount,ro", str(path)], capture_output=True, check=True)


# -- the catalogue: every hostile change is a tuple, so a failing state prints (and shrinks) as data ---------------
def apply(site: Site, change: tuple[Any, ...], ctx: dict[str, Any]) -> None:
    """Apply one hostile change (see tests/fuzz/test_hostile_fs.py for the lists they are drawn from)."""
    what, where = change[0], change[1]
    if what in ("store", "orphan", "known-good", "entry", "memo"):
        _forge(site, change, ctx)
        return
    path = site.path(where)
    site.name(path, where.replace("S:", "").replace("{key}", site.key).replace("{seed}", site.seed))
    if where.startswith("S:"):
        site.names.append(site.key[:12])  # messages name a store entry by its key's first 12 digits
    if what == "link":
        target = site.path(change[2])
        _clear(path)
        _make_parent(path)
        path.symlink_to(target)
        site.needs_process |= str(target).startswith("/dev/")
        site.name(target)
    elif what == "fifo":
        _clear(path)
        _make_parent(path)
        os.mkfifo(path)
        site.needs_process = True
    elif what == "node":  # a real character device inside the folder: null (1,3), zero (1,5) or full (1,7)
        _clear(path)
        _make_parent(path)
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, {"null": 3, "zero": 5, "full": 7}[change[2]]))
        site.needs_process = True
    elif what == "huge":  # a sparse 16 GiB file: a read without a bound exhausts memory
        _clear(path)
        _make_parent(path)
        with open(path, "wb") as fh:
            fh.truncate(1 << 34)
        site.needs_process = True
    elif what == "immutable":
        if not os.path.lexists(path):
            _make_parent(path)
            path.write_bytes(b"")
        site.immutable |= set_immutable(path, True)
    elif what in ("full", "ro"):
        _mount_small(site, path, change[2] if what == "full" else 0, read_only=what == "ro")
    elif what == "swap":
        twin = site.outside / change[2]
        site.swaps.append({"path": str(path), "twin": str(twin), "at": change[3]})
        site.name(twin)
    elif what == "gone":
        _clear(path)
    elif what == "user":  # a file of the user's at a name trtls writes (a -o target, a route's onnx)
        _clear(path)
        _make_parent(path)
        path.write_bytes(USER_TEXT)
        site.user.append(str(path.relative_to(site.project)))
    elif what == "blob":  # the Hugging Face cache layout: the model is a link to a blob inside the folder
        blob = site.project / "blobs" / "demo-blob.onnx"
        _make_parent(blob)
        shutil.copy2(path, blob)
        path.unlink()
        path.symlink_to(Path("..") / "blobs" / blob.name)
        site.user.append("blobs/demo-blob.onnx")
    elif what == "aged":  # old runs that gc may take (copies of the seed's evidence)
        for i in range(3):
            run = site.project / ".trtls" / "runs" / f"demo-20250101-00000{i}-a9ed0{i}"
            shutil.copytree(site.project / ".trtls" / "runs" / site.seed, run)
            for p in [run, *run.iterdir()]:
                os.utime(p, (time.time() - 100 * 86400,) * 2)
    else:
        raise ValueError(f"unknown hostile change {change!r}")


def _forge(site: Site, change: tuple[Any, ...], ctx: dict[str, Any]) -> None:
    what, variant = change[0], change[1]
    if what == "store":  # `[store] path = …` (and mode) in the recipe
        recipe = site.project / "trtls.toml"
        text = recipe.read_text().replace('path = "../store"', f"path = {json.dumps(variant)}")
        recipe.write_text(text + (f'mode = "{change[2]}"\n' if len(change) > 2 else ""))
        site.name("trtls.toml", variant)
    elif what == "orphan":
        _forge_running(site, variant, ctx)
    elif what == "known-good":
        _forge_known_good(site, variant)
    elif what == "entry":
        _forge_entry(site, variant)
    else:
        _forge_memo(site, variant, ctx)


def _forge_running(site: Site, variant: str, ctx: dict[str, Any]) -> None:
    """A `running.json` planted as if a killed build had left it: its worker is the victim (a process that is no
    part of trtls, with its real start id), its supervisor a dead pid."""
    run = site.project / ".trtls" / "runs" / ORPHAN_ID
    run.mkdir(parents=True, exist_ok=True)
    pid, start = site.victim or (0, None)
    output = site.outside / "precious.engine" if variant.startswith("outside") else site.project / "build/demo.engine"
    record = {
        "buildId": ORPHAN_ID,
        "engine": "demo",
        "supervisorPid": ctx["dead_pid"],
        "supervisorStart": "boot:1",
        "workerPid": pid,
        "workerStart": start if variant != "reused-pid" else "boot:2",  # reused-pid: alive, but another process
        "workerNonce": "0" * 32,
        "output": str(output),
        "job": {"output": str(output), "keep_evidence": variant.endswith("keep")},
        "owner": {"kind": "trtls build (CLI)", "pid": ctx["dead_pid"]},
    }
    (run / "running.json").write_text(json.dumps(record))
    site.name(run / "running.json", ORPHAN_ID)


def _forge_known_good(site: Site, key: str) -> None:
    """A known-good record whose key is no store key (`../../outside/x`, an absolute path, `..`)."""
    path = site.project / ".trtls" / "engines" / "demo.json"
    data = json.loads(path.read_text())
    forged = dict(data["builds"][-1], buildId=FORGED_ID, key=key.replace("{outside}", str(site.outside)))
    data["builds"].append(forged)
    path.write_text(json.dumps(data))
    site.name(path, FORGED_ID, key)


def _forge_entry(site: Site, variant: str) -> None:
    folder = site.store / "entries" / site.key
    record_path, engine = folder / "entry.json", folder / "engine"
    record = json.loads(record_path.read_text())
    if variant == "consistent":  # engine bytes and its record rewritten together (item 12)
        data = bytearray(engine.read_bytes())
        data[200] ^= 0xFF
        engine.write_bytes(bytes(data))
        record["sha256"] = hashlib.sha256(data).hexdigest()
    elif variant == "key":
        record["key"] = "0" * 64
    elif variant == "size":
        record["size"] = 1 << 44
    elif variant == "sha":
        record["sha256"] = "0" * 64
    elif variant == "truncated":
        engine.write_bytes(engine.read_bytes()[:1000])
    elif variant == "garbage":
        record_path.write_bytes(b"\x00\xff not json")
        site.name(record_path, site.key[:12])
        return
    record_path.write_text(json.dumps(record))
    site.name(folder, record_path, site.key[:12])


def _forge_memo(site: Site, target: str, ctx: dict[str, Any]) -> None:
    """`.trtls/engines/demo.hit.json` that the fast path would accept (true stats of this site's files and of the
    installed trtls code) but whose `output` is elsewhere."""
    path = site.project / ".trtls" / "engines" / "demo.hit.json"
    if not path.is_file():
        return
    memo = json.loads(path.read_text())
    model = site.project / "models" / "demo.onnx"
    st = os.stat(model)
    memo["files"] = {str(model): [st.st_size, st.st_mtime_ns, st.st_ino]}
    memo["recipeSha256"] = hashlib.sha256((site.project / "trtls.toml").read_bytes()).hexdigest()
    memo["code"] = ctx.get("code_stats", memo.get("code"))
    memo["output"] = str(site.path(target))
    path.write_text(json.dumps(memo))
    site.name(path, site.path(target))


# -- the mid-run swap: at the N-th filesystem event of the command, a folder becomes a symlink to a twin outside ---
SWAP_ENV = "TRTLS_HOSTILE_SWAP"
PATH_EVENTS = {"open", "os.mkdir", "os.rename", "os.remove", "os.rmdir", "os.symlink", "os.utime", "os.chmod",
               "os.truncate", "os.listdir", "os.scandir", "shutil.rmtree", "os.link", "shutil.copyfile"}  # fmt: skip
_plan: dict[str, Any] | None = None
_busy = False
_hooked = False


def _swap_now(swap: dict[str, Any]) -> None:
    path = swap["path"]
    if os.path.realpath(os.path.dirname(path)) != os.path.normpath(os.path.dirname(path)):
        # an earlier change linked a folder on the way: the swap would be the harness itself writing through that
        # link into the outside tree (what the property forbids trtls, not the attacker); the link is hostile enough
        swap["done"] = "through a link"
        return
    try:
        if os.path.lexists(path):
            os.rename(path, path + ".swapped")
        os.symlink(swap["twin"], path)
        swap["done"] = True
    except OSError:
        swap["done"] = "refused"


def _audit(event: str, args: tuple[Any, ...]) -> None:
    global _busy
    plan = _plan
    if plan is None or _busy or event not in PATH_EVENTS or not args or isinstance(args[0], int) or args[0] is None:
        return
    try:
        name = os.fsdecode(args[0])
    except TypeError:
        return
    if os.path.isabs(name) and not name.startswith(tuple(plan["roots"])):
        return
    plan["count"] += 1
    for swap in plan["swaps"]:
        if swap["at"] == plan["count"] and "done" not in swap:
            _busy = True
            try:
                _swap_now(swap)
            finally:
                _busy = False


def arm(swaps: list[dict[str, Any]], roots: list[str]) -> dict[str, Any] | None:
    """Swap each `path` for a link to its `twin` at the `at`-th filesystem event under `roots` (or with a relative
    name: the door's dir_fd calls) from now on. Returns the plan, whose `count` says how many events there were."""
    global _plan, _hooked
    if not _hooked:
        sys.addaudithook(_audit)
        _hooked = True
    _plan = {"swaps": swaps, "roots": [r.rstrip("/") + "/" for r in roots], "count": 0}
    return _plan


def disarm() -> None:
    global _plan
    _plan = None


def install_swap_from_env() -> None:
    """Called by the test's sitecustomize: arm the swaps this one process was given (its children are not)."""
    spec = os.environ.pop(SWAP_ENV, None)
    if spec:
        data = json.loads(spec)
        arm(data["swaps"], data["roots"])


# -- judging: snapshots before and after -----------------------------------------------------------------------------
def where_now(site: Site, path: Path) -> Path:
    """Where a user's file is after the run: a mid-run swap (`_swap_now`) moved the folder it was in to
    `<folder>.swapped` — the attacker moved it, not trtls — so it is judged there, not through the link left behind."""
    for swap in site.swaps:
        folder = Path(swap["path"])
        moved = Path(f"{folder}.swapped")
        if path.is_relative_to(folder) and os.path.lexists(moved) and os.path.islink(folder):
            return moved / path.relative_to(folder)
    return path


def entry_of(path: Path) -> tuple[Any, ...] | None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    kind = stat.S_IFMT(st.st_mode)
    base = (kind, stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, st.st_ino, st.st_mtime_ns)
    if stat.S_ISLNK(st.st_mode):
        return (*base, "->", os.readlink(path))
    if stat.S_ISREG(st.st_mode):
        digest = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        return (*base, st.st_size, digest.hexdigest())
    if stat.S_ISDIR(st.st_mode):
        return (*base, tuple(sorted(os.listdir(path))))
    return (*base, st.st_rdev)


def tree(root: Path, skip: tuple[Path, ...] = ()) -> dict[str, tuple[Any, ...] | None]:
    """Every entry under `root` (not following links), minus the subtrees in `skip` (their names in root stay)."""
    out: dict[str, tuple[Any, ...] | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if any(here == s for s in skip):
            dirnames[:] = []
            continue
        out[str(here)] = entry_of(here)
        for n in filenames + [d for d in dirnames if (here / d).is_symlink()]:
            out[str(here / n)] = entry_of(here / n)
    return out


def _what_changed(b: tuple[Any, ...], a: tuple[Any, ...]) -> str:
    if b[0] != a[0]:
        return "replaced by another kind of file"
    if stat.S_ISDIR(b[0]) and b[-1] != a[-1]:
        added, gone = sorted(set(a[-1]) - set(b[-1])), sorted(set(b[-1]) - set(a[-1]))
        return f"entries added {added[:4]} removed {gone[:4]}"
    fields = ["type", "mode", "uid", "gid", "inode (replaced)", "mtime"] + (
        ["size", "content"] if stat.S_ISREG(b[0]) else ["link target"] if stat.S_ISLNK(b[0]) else ["entries"]
    )
    said = [f for f, x, y in zip(fields, b, a, strict=False) if x != y and f != "type"]
    if stat.S_ISDIR(b[0]) and said == ["mtime"]:
        return "mtime changed (an entry was created there and removed)"
    return ", ".join(said) + " changed"


def changes(before: dict[str, Any], after: dict[str, Any], asked: str | None = None) -> list[str]:
    """What differs. `asked`: a file the user asked for by name (a `-o` target, resolved): its creation or
    replacement, and its folder gaining it, are not changes."""
    said = []
    for path in sorted(set(before) | set(after)):
        b, a = before.get(path), after.get(path)
        if asked is not None and path == asked:
            continue
        if asked is not None and path == os.path.dirname(asked) and b is not None and a is not None:
            gone = {os.path.basename(asked)}  # the asked file may appear there, or (refused) not: either is no change
            b, a = b[:5] + b[6:-1] + (set(b[-1]) - gone,), a[:5] + a[6:-1] + (set(a[-1]) - gone,)
        if b != a:
            said.append(f"{path}: {'created' if b is None else 'removed' if a is None else _what_changed(b, a)}")
    return said


def cleanup(site: Site) -> None:
    """Unmount, clear immutable flags, remove the site."""
    for mount in reversed(site.mounts):
        if subprocess.run(["umount", str(mount)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(mount)], capture_output=True)
    if site.immutable:
        for dirpath, dirnames, filenames in os.walk(site.root):
            for n in dirnames + filenames:
                set_immutable(Path(dirpath) / n, False)
        set_immutable(site.root, False)
    shutil.rmtree(site.root, ignore_errors=True)


def start_id(pid: int) -> str | None:
    """`<boot id>:<start time>` as trtls records a process (fs.kill.process_start_id)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except (OSError, IndexError):
        return None
    return f"{boot}:{fields[19].decode()}"


# -- the catalogue the test draws from ------------------------------------------------------------------------------
@dataclass(frozen=True)
class Command:
    name: str
    args: tuple[str, ...]
    codes: frozenset[int] = frozenset({0, 1, 2})
    timeout: float = 60

    @property
    def takes_target(self) -> bool:
        return "{T}" in self.args

    def argv(self, site: Site, target: str | None) -> list[str]:
        fill = {"{P}": str(site.project), "{T}": str(site.project / (target or "report.out")), "{seed}": site.seed,
                "{forged}": FORGED_ID}  # fmt: skip
        return [fill.get(a, a) for a in self.args]


def _cmd(name: str, *args: str, codes: tuple[int, ...] = (0, 1, 2), timeout: float = 60) -> Command:
    return Command(name, args, frozenset(codes), timeout)


IN_PROCESS = [
    _cmd("build", "build", "{P}", "--engine", "demo", timeout=300),
    _cmd("build --json", "build", "{P}", "--engine", "demo", "--json", timeout=300),
    _cmd("rollback", "rollback", "demo", "{P}"),
    _cmd("rollback --to seed", "rollback", "demo", "{P}", "--to", "{seed}"),
    _cmd("rollback --to forged", "rollback", "demo", "{P}", "--to", "{forged}"),
    _cmd("engines", "engines", "demo", "{P}"),
    _cmd("engines --json", "engines", "demo", "{P}", "--json"),
    _cmd("gc", "gc", "{P}"),
    _cmd("gc --keep-runs 1", "gc", "{P}", "--keep-runs", "1"),
    _cmd("gc --max-age-days 1", "gc", "{P}", "--max-age-days", "1"),
    _cmd("store gc", "store", "gc", "{P}"),
    _cmd("store gc --max-size 1", "store", "gc", "{P}", "--max-size", "1"),
    _cmd("store ls", "store", "ls", "{P}"),
    _cmd("schema -o", "schema", "-o", "{T}"),
    _cmd("report -o", "report", "--recipe", "{P}", "-o", "{T}"),
    _cmd("report", "report", "{seed}", "--recipe", "{P}"),
    _cmd("trace -o", "trace", "--recipe", "{P}", "-o", "{T}"),
    _cmd("trace", "trace", "{seed}", "--recipe", "{P}"),
]
PROCESS_ONLY = [
    _cmd("build --no-store", "build", "{P}", "--engine", "demo", "--no-store", timeout=300),
    _cmd("build --rebuild", "build", "{P}", "--engine", "demo", "--rebuild", timeout=300),
]
ROUTE = [
    _cmd("route build", "route", "build", "{P}", "--route", "tiny_ort", codes=(0, 1, 2, 4), timeout=300),
    _cmd("route promote", "route", "promote", "tiny_ort", "--recipe", "{P}", "--approver", "fuzz", codes=(0, 2, 3, 4)),
    *[
        _cmd(
            f"gates {fmt} -o",
            "gates",
            "{P}",
            "--route",
            "tiny_ort",
            "--gate",
            gate,
            "--format",
            fmt,
            "-o",
            "{T}",
            codes=(0, 1, 2, 3, 4),  # 1: the decision stands unrecorded (TRT412: its evidence could not be written)
            timeout=300,
        )
        for gate, fmt in (("1", "json"), ("1", "junit"), ("2", "text"))
    ],
]
BUILD_ENGINE = _cmd("trtls.buildEngine", "serve", timeout=300)
ROUTE_TARGETS = ["report.out", "new/report.out", "trtls.toml", "trtls.lock.json", "notes.txt", "build/tiny_ort.onnx",
                 "build/tiny_ort.bundle", "planted.out", "fullout/report.out", ".trtls/report.out"]  # fmt: skip
TARGETS = ["report.out", "new/report.out", "trtls.toml", "models/demo.onnx", "notes.txt", "build/demo.engine",
           "planted.out", "fullout/report.out", ".trtls/report.out"]  # fmt: skip

_RUN = ".trtls/runs/{seed}"
_ENTRY = "S:entries/{key}"
LINKS = [("link", p, t) for p, t in [
    ("build/demo.engine", "@precious.engine"), ("build/demo.engine", "@missing.engine"), ("build", "@twin-build"),
    ("build/demo.timing-cache", "@precious.txt"), (".trtls", "@other/.trtls"), (".trtls/runs", "@other/.trtls/runs"),
    (".trtls/engines", "@twin-engines"), (".trtls/engines/demo.json", "@precious.json"),
    (".trtls/engines/demo.hit.json", "@precious.json"), (_RUN, f"@other/.trtls/runs/{OTHER_RUN}"),
    (".trtls/runs/demo-20240101-000000-11aa22", f"@other/.trtls/runs/{OTHER_RUN}"),
    (f"{_RUN}/summary.json", "@precious.json"), (".trtls/history.json", "@precious.json"),
    (".trtls/digests.json", "@precious.json"), (".trtls/onnx-external.json", "@precious.json"),
    (".trtls/locks", "@twin-locks"), ("S:tmp", "@old"), ("S:locks/{key}.lock", "@precious.txt"),
    ("S:locks/{key}.lock", "@missing.lock"), ("S:used/{key}", "@precious.txt"), ("S:used/{key}", "@missing.used"),
    (_ENTRY, "@twin-entry"), (_ENTRY, "@x"), (f"{_ENTRY}/engine", "@precious.engine"),
    (f"{_ENTRY}/entry.json", "@precious.json"), ("S:quarantine", "@twin-quarantine"), ("S:entries", "@twin-entries"),
    ("S:used", "@twin-used"), ("S:locks", "@twin-locks"), ("planted.out", "@precious.txt"),
    ("planted.out", "@missing.out"), ("fullout", "@twin-build"),
]]  # fmt: skip
DEVICES = [
    ("link", f"{_ENTRY}/engine", "/dev/zero"), ("link", f"{_ENTRY}/entry.json", "/dev/zero"),
    ("link", "build/demo.engine", "/dev/null"), ("link", "build/demo.engine", "/dev/full"),
    ("link", "planted.out", "/dev/null"), ("link", ".trtls/engines/demo.json", "/dev/zero"),
    ("link", f"{_RUN}/summary.json", "/dev/zero"), ("node", f"{_ENTRY}/engine", "zero"),
    ("node", "build/demo.engine", "null"), ("node", "planted.out", "full"), ("node", ".trtls/history.json", "zero"),
    ("node", "S:used/{key}", "null"), ("huge", f"{_ENTRY}/entry.json"), ("huge", ".trtls/engines/demo.json"),
    ("huge", f"{_RUN}/summary.json"),
    *[("fifo", p) for p in ["build/demo.engine", f"{_ENTRY}/engine", f"{_ENTRY}/entry.json",
                            ".trtls/engines/demo.json", ".trtls/engines/demo.hit.json", f"{_RUN}/summary.json",
                            f"{_RUN}/events.jsonl", "S:used/{key}", "S:locks/{key}.lock", "planted.out",
                            ".trtls/history.json", ".trtls/digests.json", ".trtls/onnx-external.json"]],
]  # fmt: skip
IMMUTABLE = [("immutable", p) for p in [
    "build/demo.engine", "build", ".trtls", ".trtls/runs", _RUN, ".trtls/engines", ".trtls/engines/demo.json",
    _ENTRY, "S:entries", "S:tmp", "S:used", "S:used/{key}", "S:locks", "S:quarantine", "planted.out", "fullout",
]]  # fmt: skip
MOUNTS = [("full", p, s) for p in ["build", ".trtls", "S:", "fullout"] for s in (0, 4096, 65536)] + [
    ("ro", p) for p in ["build", ".trtls", "S:", "fullout"]
]
SWAPS = [("swap", p, t, 0) for p, t in [
    (".trtls", "twin-trtls"), (".trtls/runs", "twin-runs"), (".trtls/engines", "twin-engines"), ("build", "twin-build"),
    ("S:entries", "twin-entries"), ("S:tmp", "twin-tmp"), ("S:used", "twin-used"), ("S:locks", "twin-locks"),
    (_ENTRY, "twin-entry"), ("S:quarantine", "twin-quarantine"), ("fullout", "twin-build"),
]]  # fmt: skip
FORGED = [
    *[("orphan", v) for v in ("victim", "victim-keep", "outside", "outside-keep", "reused-pid")],
    *[("known-good", k) for k in ("../../outside/x", "{outside}/x", "..", "../quarantine", "0" * 64)],
    *[("entry", v) for v in ("consistent", "key", "size", "sha", "truncated", "garbage")],
    *[("memo", t) for t in ("@precious.engine", "@missing.engine", "@twin-build/demo.engine")],
    *[("store", p) for p in (".", "..", "models", ".trtls", "build", "../outside/shared", "../outside",
                             "../outside/precious.txt")],
    ("store", "../store", "read"), ("gone", "build/demo.engine"), ("gone", _ENTRY),
    ("gone", ".trtls/engines/demo.json"), ("gone", ".trtls/engines/demo.hit.json"), ("user", "planted.out"),
    ("blob", "models/demo.onnx"), ("aged", ".trtls/runs"),
]  # fmt: skip
IN_PROCESS_CHANGES = LINKS + IMMUTABLE + MOUNTS + SWAPS + FORGED
PROCESS_CHANGES = IN_PROCESS_CHANGES
LSP_CHANGES = IN_PROCESS_CHANGES + DEVICES

_ROUTE_OUT = [
    "build/tiny_ort.onnx",
    "build/tiny_ort.bundle",
    "build/tiny_ort.bundle.trtls.json",
    "build/tiny_ort.bundle.cdx.json",
    "trtls.promotions.jsonl",
    ".trtls/digests.json",
    "planted.out",
]
ROUTE_CHANGES = [
    *[("link", p, t) for p in _ROUTE_OUT for t in ("@precious.txt", "@missing.out")],
    ("link", "build", "@twin-build"), ("link", "releases", "@twin-build"), ("link", ".trtls", "@other/.trtls"),
    ("link", ".trtls/routes", "@twin-runs"), ("link", "releases/tiny_ort-previous.bundle", "@precious.txt"),
    ("link", "trtls.promotions.jsonl", "/dev/full"), ("link", "build/tiny_ort.onnx", "/dev/zero"),
    *[("fifo", p) for p in _ROUTE_OUT], ("node", "build/tiny_ort.onnx", "zero"),
    *[("immutable", p) for p in [*_ROUTE_OUT, "build", ".trtls", "releases", "fullout"]],
    *[("full", p, s) for p in ["build", ".trtls", "fullout"] for s in (0, 4096)], ("ro", "build"), ("ro", ".trtls"),
    *[("swap", p, t, 0) for p, t in [("build", "twin-build"), (".trtls", "twin-trtls"), ("releases", "twin-build"),
                                     ("fullout", "twin-build")]],
    *[("user", p) for p in ["build/tiny_ort.onnx", "build/tiny_ort.bundle", "planted.out"]],
]  # fmt: skip


def route_user(path: Path, project: Path) -> bool:
    """The route sample's files that are the user's: the recipe, its lock, the checkpoint, the inputs, scripts."""
    rel = path.relative_to(project).parts
    return (
        rel[0] in ("checkpoints", "inputs")
        or path.name in ("trtls.toml", "trtls.lock.json", "notes.txt")
        or (len(rel) == 1 and path.suffix in (".py", ".sh"))
    )
