"""The store's statistics as recorded (issue 32, item 10): every hit and miss appended to `<store>/stats/<day>.<uid>
.jsonl` through the door, whole lines under concurrent writers and two real accounts, nothing in a store this
process does not write, old days pruned once a day, and hostile lines skipped by `trtls store stats` — against a
real store and its real entries, through the real CLI."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time
from pathlib import Path

from tests.store.test_two_accounts import ALICE, BOB, GID, as_account, team_store  # noqa: F401 (a fixture)
from trtls.store.entries import Entry, Store
from trtls.store.key import key_of_parts
from trtls.store.stats import KEEP_DAYS, LINE_LIMIT, miss_buckets, record_hit, record_miss, stats

DAY = 86400


def _day(t: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(t))


def _published(root: Path, tmp_path: Path, name: str = "demo", trust: str = "user") -> tuple[Store, Entry]:
    """A real store holding one real entry whose producing build took 12.5 s."""
    store = Store(root, trust=trust)
    store.check()
    engine = tmp_path / f"{name}.engine"
    engine.write_bytes(name.encode() * 1000)
    parts = {"format": "test", "engine": name}
    entry = store.publish(key_of_parts(parts), parts, engine, {"buildId": f"{name}-1", "durationS": 12.5}, None)
    return store, entry


def _lines(root: Path) -> list[dict]:
    return [json.loads(line) for f in sorted((root / "stats").glob("*.jsonl")) for line in f.read_text().splitlines()]


def trtls(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "trtls", *args], capture_output=True, text=True, timeout=120,
                          env=env, cwd=cwd)  # fmt: skip


def test_a_hit_and_a_miss_are_one_line_each_in_todays_file_of_this_account(tmp_path: Path) -> None:
    store, entry = _published(tmp_path / "store", tmp_path)
    record_miss(store, entry.key, "demo", ["first build of this engine table"])
    record_hit(store, entry, "demo", "restored")
    (f,) = (tmp_path / "store" / "stats").iterdir()
    assert f.name == f"{_day(time.time())}.{os.geteuid()}.jsonl"
    miss, hit = _lines(tmp_path / "store")
    assert miss["event"] == "miss" and miss["reasons"] == ["first build of this engine table"]
    assert hit["event"] == "hit" and hit["how"] == "restored" and hit["savedS"] == 12.5 and hit["size"] == entry.size
    assert {miss["key"], hit["key"]} == {entry.key} and hit["host"] == os.uname().nodename
    counted = stats(store)
    assert counted["hits"] == {"total": 1, "restored": 1, "kept": 0, "fast": 0, "node": 0}
    assert counted["misses"] == {"total": 1, "byReason": {"first build of this engine table": 1}}
    assert counted["timeSavedS"] == 12.5 and counted["hitRate"] == 0.5
    assert counted["entries"] == 1 and counted["size"] == entry.size


def _hammer(root: str, n: int) -> None:
    store = Store(Path(root))
    entry = store.get(next(p.name for p in (Path(root) / "entries").iterdir()))
    assert entry is not None
    for i in range(n):
        if i % 2:
            record_hit(store, entry, "demo", "fast")
        else:
            record_miss(store, entry.key, "demo", [f"optimization_level {i} → {i + 1}", "x" * 250] * 6)


def test_concurrent_writers_never_interleave_a_line(tmp_path: Path) -> None:
    store, _ = _published(tmp_path / "store", tmp_path)
    spawn = multiprocessing.get_context("spawn")
    writers = [spawn.Process(target=_hammer, args=(str(store.root), 200)) for _ in range(6)]
    for w in writers:
        w.start()
    for w in writers:
        w.join(120)
        assert w.exitcode == 0
    lines = _lines(store.root)  # every line parses: no two writes interleaved
    assert len(lines) == 1200
    counted = stats(store)
    assert counted["hits"]["fast"] == 600 and counted["misses"]["total"] == 600
    assert counted["misses"]["byReason"] == {"settings": 600, "other": 600} and counted["skippedLines"] == 0


def test_a_line_stays_under_the_atomic_append_size_and_says_what_it_dropped(tmp_path: Path) -> None:
    store, entry = _published(tmp_path / "store", tmp_path)
    record_miss(store, entry.key, "e" * 5000, [f"setting_{i} {'a' * 900} → b" for i in range(40)])
    raw = (tmp_path / "store" / "stats" / f"{_day(time.time())}.{os.geteuid()}.jsonl").read_bytes()
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1 and len(raw) < LINE_LIMIT
    (line,) = _lines(tmp_path / "store")
    assert line["reasonsDropped"] > 0 and len(line["reasons"]) + line["reasonsDropped"] == 40
    assert miss_buckets(line["reasons"]) == ["settings"]


def test_a_store_this_process_does_not_write_records_nothing(tmp_path: Path) -> None:
    writer, entry = _published(tmp_path / "store", tmp_path)
    reader = Store(tmp_path / "store", "read")
    record_hit(reader, entry, "demo", "restored")
    record_miss(reader, entry.key, "demo", ["--rebuild"])
    unwritable = Store(tmp_path / "store")
    unwritable.unwritable = "TRT331 a test says so"  # what check() sets for another account's folder
    record_hit(unwritable, entry, "demo", "kept")
    assert list((tmp_path / "store" / "stats").iterdir()) == []
    record_hit(writer, entry, "demo", "kept")  # the same store, written: one line
    assert len(_lines(tmp_path / "store")) == 1


def test_recording_never_raises_nor_writes_through_a_link(tmp_path: Path) -> None:
    store, entry = _published(tmp_path / "store", tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (store.root / "stats").rmdir()
    (store.root / "stats").symlink_to(elsewhere)
    record_hit(store, entry, "demo", "restored")
    record_miss(store, entry.key, "demo", ["--rebuild"])
    assert list(elsewhere.iterdir()) == []
    (store.root / "stats").unlink()
    (store.root / "stats").write_text("a file where the folder goes")
    record_hit(store, entry, "demo", "restored")  # no exception
    assert (store.root / "stats").read_text() == "a file where the folder goes"
    plain = tmp_path / "plain"  # a folder trtls did not make a store: nothing is created in it
    plain.mkdir()
    record_miss(Store(plain), entry.key, "demo", ["--rebuild"])
    assert list(plain.iterdir()) == []


def test_days_older_than_the_bound_are_pruned_once_a_day_and_never_counted(tmp_path: Path) -> None:
    store, entry = _published(tmp_path / "store", tmp_path)
    folder = store.root / "stats"
    now = time.time()
    old_line = json.dumps({"time": now - 100 * DAY, "event": "miss", "engine": "demo", "key": entry.key,
                           "reasons": ["--rebuild"]}) + "\n"  # fmt: skip
    old = [folder / f"{_day(now - 100 * DAY)}.{os.geteuid()}.jsonl", folder / f"{_day(now - 91 * DAY)}.40001.jsonl"]
    recent = folder / f"{_day(now - 10 * DAY)}.40001.jsonl"
    foreign = [folder / "notes.txt", folder / f"{_day(now - 200 * DAY)}.0.jsonl.bak"]
    for f in [*old, recent, *foreign]:
        f.write_text(old_line)
    assert stats(store)["misses"]["total"] == 0  # older than the bound: not counted, though still there
    record_miss(store, entry.key, "demo", ["--rebuild"])  # this account's first event today: prunes
    assert not any(f.exists() for f in old)
    assert recent.exists() and all(f.exists() for f in foreign)
    late = folder / f"{_day(now - 120 * DAY)}.40002.jsonl"
    late.write_text(old_line)
    record_hit(store, entry, "demo", "kept")  # not the first today: no second sweep
    assert late.exists()
    assert stats(store, days=KEEP_DAYS)["misses"]["total"] == 1
    assert stats(store, days=5)["hits"]["total"] == 1 and stats(store, days=5)["since"] == _day(now - 5 * DAY)


HOSTILE = [
    b"not json at all\n",
    b"[1, 2, 3]\n",
    b'{"time": 1, "event": "hit"' + b" " * 10000 + b"}\n",  # longer than a line trtls writes
    b'{"time": NOW, "event": "hit", "how": "fast", "engine": "\\u001b]52;c;cm0gLXJmIH4K\\u0007PWNED-ENGINE",'
    b' "key": "KEY", "size": 1, "savedS": 1}\n',
    b'{"time": NOW, "event": "hit", "how": "fast", "engine": "demo", "key": "../../etc", "size": 1, "savedS": 1}\n',
    b'{"time": NOW, "event": "hit", "how": "fast", "engine": "demo", "key": "KEY", "size": -5, "savedS": 1}\n',
    b'{"time": NOW, "event": "hit", "how": "fast", "engine": "demo", "key": "KEY", "size": 1, "savedS": NaN}\n',
    b'{"time": NOW, "event": "hit", "how": "stolen", "engine": "demo", "key": "KEY", "size": 1, "savedS": 1}\n',
    b'{"time": NOW, "event": "miss", "engine": "demo", "key": "KEY", "reasons": "--rebuild"}\n',
    b"\xff\xfe binary\n",
]


def test_hostile_lines_are_skipped_and_counted_never_shown(tmp_path: Path) -> None:
    store, entry = _published(tmp_path / "store", tmp_path)
    record_hit(store, entry, "demo", "restored")  # the one good line
    now = str(int(time.time())).encode()
    bad = b"".join(line.replace(b"NOW", now).replace(b"KEY", entry.key.encode()) for line in HOSTILE)
    (store.root / "stats" / f"{_day(time.time())}.40009.jsonl").write_bytes(bad + b'{"unterminated": ')
    os.mkfifo(store.root / "stats" / f"{_day(time.time())}.40010.jsonl")  # never opened for reading: no hang
    (store.root / "stats" / f"{_day(time.time())}.40011.jsonl").symlink_to("/etc/passwd")
    env = {**os.environ, "TRTLS_STORE": str(store.root)}
    shown = trtls("store", "stats", "--json", env=env, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    counted = json.loads(shown.stdout)
    assert counted["hits"]["total"] == 1 and counted["misses"]["total"] == 0
    assert counted["skippedLines"] == len(HOSTILE) + 1 and list(counted["perEngine"]) == ["demo"]
    text = trtls("store", "stats", env=env, cwd=tmp_path)
    assert text.returncode == 0 and "Traceback" not in text.stderr + text.stdout
    assert "\x1b" not in text.stdout and "PWNED-ENGINE" not in text.stdout and "root:" not in text.stdout
    assert f"{len(HOSTILE) + 1} line(s) of {store.root}/stats skipped" in text.stdout


def test_an_empty_store_says_it_has_no_statistics(tmp_path: Path) -> None:
    Store(tmp_path / "store").check()
    env = {**os.environ, "TRTLS_STORE": str(tmp_path / "store")}
    shown = trtls("store", "stats", env=env, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "no hits or misses recorded in this store yet" in shown.stdout
    assert json.loads(trtls("store", "stats", "--json", env=env, cwd=tmp_path).stdout)["hits"]["total"] == 0
    refused = trtls("store", "stats", "--days", "400", env=env, cwd=tmp_path)
    assert refused.returncode == 2 and "from 1 to 90" in refused.stderr


ACCOUNT_RECORDS = """
import json, sys
from pathlib import Path
from trtls.store.entries import Store
from trtls.store.stats import record_hit, record_miss
store = Store(Path(sys.argv[1]))
store.check()
entry = store.get(sys.argv[2])
record_miss(store, entry.key, sys.argv[3], ["--rebuild"])
record_hit(store, entry, sys.argv[3], "kept")
"""


def test_two_accounts_each_append_their_own_file_and_are_counted_together(team_store: Path, tmp_path: Path) -> None:  # noqa: F811
    store, entry = _published(team_store, tmp_path, trust="group")
    (team_store / "stats" / f"{_day(time.time() - 100 * DAY)}.{ALICE}.jsonl").write_text("old\n")
    os.chown(team_store / "stats" / f"{_day(time.time() - 100 * DAY)}.{ALICE}.jsonl", ALICE, GID)
    for uid, engine in ((ALICE, "alice"), (BOB, "bob")):
        done = as_account(uid, ACCOUNT_RECORDS, str(team_store), entry.key, engine)
        assert done.returncode == 0, done.stderr
    names = sorted(p.name for p in (team_store / "stats").iterdir())
    assert names == [f"{_day(time.time())}.{ALICE}.jsonl", f"{_day(time.time())}.{BOB}.jsonl"]  # Alice's old day went
    assert all((team_store / "stats" / n).stat().st_mode & 0o020 for n in names)  # group-writable: prunable by all
    counted = stats(store)
    assert counted["hits"]["kept"] == 2 and counted["misses"]["byReason"] == {"--rebuild": 2}
    assert set(counted["perEngine"]) == {"alice", "bob"} and counted["timeSavedS"] == 25.0
