"""Orphan recovery through the one door (issue 27): it kills only a process that proves to be the trtls worker of
that build (item 8), and it hashes each output once per pass, not once per stale record (item 22).

Real processes throughout: a real `trtls build` whose worker is a recipe's own command, a real unrelated process
named by a planted `running.json` with its correct start id, a real supervisor SIGKILLed with its worker still
running."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

import trtls.builds.supervisor.orphan_output as orphan_output
from trtls.builds.supervisor.orphans import process_alive, process_start_id, recover_orphans
from trtls.fs.kill import NONCE_ENV

EXTERNAL = Path(__file__).parents[1] / "data" / "external_worker.py"
# A builder that hangs: it takes its job and then neither reads its input nor ends (a C++ call that never returns).
HUNG = "import sys, time\nsys.stdin.readline()\nwhile True:\n    time.sleep(1)\n"


def _recipe(ws: Path, worker: list[str]) -> Path:
    ws.mkdir(parents=True, exist_ok=True)
    command = ", ".join(json.dumps(part) for part in worker)
    text = f'[engines.svc]\nonnx = "none.onnx"\noutput = "out/svc.engine"\nworker = [{command}]\n'
    (ws / "trtls.toml").write_text(text)
    return ws / "trtls.toml"


def _trtls(*args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "trtls", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _wait_gone(pid: int, timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while process_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


@pytest.fixture
def stranger():
    """A live process group leader that is not a trtls worker: a user's long job that a planted record names."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait()


def _plant(ws: Path, build_id: str, pid: int, **extra: object) -> Path:
    """What an attacker can write: a world-readable pid and its start id (both public in /proc) in running.json."""
    run = ws / ".trtls" / "runs" / build_id
    run.mkdir(parents=True)
    record = {
        "buildId": build_id,
        "engine": "svc",
        "output": str(ws / "out" / "svc.engine"),
        "supervisorPid": _dead_pid(),
        "workerPid": pid,
        "workerStart": process_start_id(pid),
        "job": {"output": str(ws / "out" / "svc.engine")},
        **extra,
    }
    (run / "running.json").write_text(json.dumps(record))
    return run


@pytest.mark.parametrize("nonce", [None, "0" * 32], ids=["no-nonce", "a-guessed-nonce"])
def test_a_planted_record_never_kills_a_real_unrelated_process_through_trtls_build(
    tmp_path: Path, stranger: subprocess.Popen, nonce: str | None
) -> None:
    """Before: the pid and its start id were proof enough, so `trtls build` SIGKILLed the stranger's process group."""
    ws = tmp_path / "ws"
    _recipe(ws, [sys.executable, str(EXTERNAL)])
    run = _plant(ws, "svc-planted", stranger.pid, **({"workerNonce": nonce} if nonce else {}))
    cli = _trtls("build", str(ws), "--engine", "svc", "--json")
    out, err = cli.communicate(timeout=120)
    assert cli.returncode == 0, err[-2000:]
    assert stranger.poll() is None and process_alive(stranger.pid), "trtls build killed a process it did not start"
    (recovered,) = [json.loads(ln) for ln in err.splitlines() if ln.startswith('{"type": "orphan_recovered"')]
    assert "not proved to be this build's worker" in recovered["message"] and "left alone" in recovered["message"]
    why = "carries no run nonce" if nonce is None else "does not carry this run's nonce"
    assert why in recovered["message"]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["outcome"] == "killed" and "left alone" in summary["notes"][0]


def test_recovery_leaves_a_stranger_alive_even_with_the_nonce_of_another_run(
    tmp_path: Path, stranger: subprocess.Popen
) -> None:
    """A process that carries *a* trtls nonce (another build's worker, here a stand-in) is not the worker of a record
    naming another nonce."""
    carrier = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"],
        start_new_session=True,
        env={**os.environ, NONCE_ENV: "1" * 32},
    )
    try:
        _plant(tmp_path, "svc-other-run", carrier.pid, workerNonce="2" * 32)
        (found,) = recover_orphans(tmp_path / ".trtls")
        assert carrier.poll() is None and "left alone" in found.message
    finally:
        carrier.kill()
        carrier.wait()


def test_a_real_orphaned_worker_is_still_proved_and_killed(tmp_path: Path) -> None:
    """The supervisor (a real `trtls build`) is SIGKILLed while its worker hangs: the worker got the nonce from its
    supervisor, the record (0600) holds it, and recovery proves and kills it."""
    ws = tmp_path / "ws"
    hung = tmp_path / "hung_worker.py"
    hung.write_text(HUNG)
    _recipe(ws, [sys.executable, str(hung)])
    cli = _trtls("build", str(ws), "--engine", "svc", "--json")
    try:
        record, running = None, None
        deadline = time.monotonic() + 120
        while record is None:
            assert time.monotonic() < deadline and cli.poll() is None, "no running.json with the worker"
            for running in (ws / ".trtls" / "runs").glob("*/running.json") if (ws / ".trtls" / "runs").is_dir() else []:
                state = json.loads(running.read_text())
                record = state if state.get("workerPid") else None
            time.sleep(0.02)
        assert running is not None
        assert stat.S_IMODE(running.stat().st_mode) == 0o600, "the nonce must not be readable by other accounts"
        worker = record["workerPid"]
        environ = Path(f"/proc/{worker}/environ").read_bytes().split(b"\0")
        assert f"{NONCE_ENV}={record['workerNonce']}".encode() in environ and len(record["workerNonce"]) == 32
        cli.send_signal(signal.SIGKILL)
        cli.wait()
        time.sleep(0.2)  # nothing stops a hung worker by itself: it must still be there for recovery to kill
        assert process_alive(worker), "the hung worker died with its supervisor; nothing left to recover"
        (found,) = recover_orphans(ws / ".trtls")
        assert _wait_gone(worker), "recovery left the proved worker running"
        assert "proved to be this build's worker" in found.message and "was killed" in found.message
        assert not running.exists() and json.loads(running.with_name("summary.json").read_text())["outcome"] == "killed"
    finally:
        if cli.poll() is None:
            cli.kill()
            cli.wait()


def test_three_hundred_stale_records_hash_the_output_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: each stale record re-read and hashed the engine (300 records of a 100 MB engine: two minutes before a
    one-second build). Now one pass hashes each file on disk once and lists each output's folder once."""
    ws = tmp_path / "ws"
    engine = ws / "out" / "svc.engine"
    other = ws / "out" / "other.engine"
    engine.parent.mkdir(parents=True)
    engine.write_bytes(os.urandom(1 << 20))
    other.write_bytes(b"another engine")
    calls = {"sha256": 0, "listing": 0}
    real_sha, real_list = orphan_output.sha256_file, orphan_output.temp_files_near

    def counted_sha(path, *args, **kwargs):
        calls["sha256"] += 1
        return real_sha(path, *args, **kwargs)

    def counted_list(*args, **kwargs):
        calls["listing"] += 1
        return real_list(*args, **kwargs)

    monkeypatch.setattr(orphan_output, "sha256_file", counted_sha)
    monkeypatch.setattr(orphan_output, "temp_files_near", counted_list)
    dead = _dead_pid()
    for i in range(300):
        run = ws / ".trtls" / "runs" / f"svc-stale-{i:03d}"
        run.mkdir(parents=True)
        output = engine if i < 299 else other
        (output.parent / f"{output.name}.trtls-tmp-svc-stale-{i:03d}").write_bytes(b"partial")
        (run / "running.json").write_text(
            json.dumps({"buildId": run.name, "engine": "svc", "output": str(output), "supervisorPid": dead})
        )
    found = recover_orphans(ws / ".trtls")
    assert len(found) == 300 and all("removed 1 orphaned temp file(s)" in f.message for f in found)
    assert calls == {"sha256": 2, "listing": 2}  # one per output on disk (the old code: 300 and 300)
    summaries = [json.loads(p.read_text()) for p in sorted((ws / ".trtls" / "runs").glob("*/summary.json"))]
    assert len(summaries) == 300 and len({s["engineOnDisk"]["sha256"] for s in summaries}) == 2
    assert not list((ws / ".trtls" / "runs").glob("*/running.json"))


def test_a_planted_record_that_cannot_be_read_or_names_another_build_is_skipped(tmp_path: Path) -> None:
    """A record whose build id is not its folder's, one that is a FIFO, one that is a symlink: no traceback, nothing
    signalled, nothing written."""
    runs = tmp_path / ".trtls" / "runs"
    (runs / "svc-a").mkdir(parents=True)
    (runs / "svc-a" / "running.json").write_text(json.dumps({"buildId": "../../elsewhere", "supervisorPid": "x"}))
    (runs / "svc-b").mkdir()
    os.mkfifo(runs / "svc-b" / "running.json")
    (runs / "svc-c").mkdir()
    (tmp_path / "target.json").write_text(json.dumps({"buildId": "svc-c", "supervisorPid": _dead_pid()}))
    (runs / "svc-c" / "running.json").symlink_to(tmp_path / "target.json")
    assert recover_orphans(tmp_path / ".trtls") == []
    assert not list(runs.glob("*/summary.json"))


def test_a_planted_record_naming_an_output_elsewhere_deletes_nothing_there(tmp_path: Path) -> None:
    """A record can name any output: the temp files of another project's build in progress (names trtls makes) are
    not looked for outside this recipe's folder."""
    elsewhere = tmp_path / "other-project" / "build"
    elsewhere.mkdir(parents=True)
    theirs = elsewhere / "demo.engine.trtls-tmp-svc-planted"
    theirs.write_bytes(b"another build's engine, half written")
    ws = tmp_path / "ws"
    run = ws / ".trtls" / "runs" / "svc-planted"
    run.mkdir(parents=True)
    (run / "running.json").write_text(
        json.dumps({"buildId": "svc-planted", "output": str(elsewhere / "demo.engine"), "supervisorPid": _dead_pid()})
    )
    (found,) = recover_orphans(ws / ".trtls")
    assert theirs.read_bytes() == b"another build's engine, half written"
    assert "were not looked for" in found.message
