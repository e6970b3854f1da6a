"""The language server's start as an editor sees it: spawn `trtls serve`, send `initialize` over stdio, time the reply.

Each run is a fresh process (`python -m trtls serve`), the clock started just before the spawn and stopped when the
whole reply has been read; then `shutdown` and `exit`. Beside it, the floor no trtls change can go below: a Python
process that imports pygls's language server and lsprotocol's types (what any pygls server must load) and exits,
timed the same way from spawn to exit. Runs alternate between the server and the floor, so load hits both alike.
Beside each wall time, the CPU time of the child (user+sys): the server's read from /proc/PID/stat the moment its
reply has arrived (10 ms ticks), the floor's from spawn to exit. Other processes' load inflates wall time, not this.
Every child runs with its bytecode cached (PYTHONPYCACHEPREFIX in a temp folder, written by a warm-up run), as an
installed trtls has it. `--baseline DIR`: also an older trtls (DIR holds its `server/`), in the same rounds;
`--trtls DIR`: the server under test from DIR's `server/`.

Target (issue 31): initialize from spawn ≤ 300 ms (was 609 ms).
Usage: python benchmarks/bench_server_start.py [--runs N] [--baseline DIR] [--trtls DIR] [--json F]
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import emit, figure, parser

TARGET_MS = 300.0
SERVER = [sys.executable, "-m", "trtls", "serve"]
FLOOR = [sys.executable, "-c", "import pygls.lsp.server, lsprotocol.types"]


def frame(message: dict) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def read_message(stream) -> dict:
    header = b""
    while not header.endswith(b"\r\n\r\n"):
        byte = stream.read(1)
        if not byte:
            raise RuntimeError(f"the server closed its stdout after {header!r}")
        header += byte
    length = next(
        int(line.split(b":")[1]) for line in header.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    return json.loads(stream.read(length))


def process_cpu_ms(pid: int) -> float:
    """user+sys of a live process so far (Linux /proc), in ms."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def initialize_ms(env: dict[str, str], cpu_out: list[float]) -> float:
    """Spawn → initialize's reply read, in ms (its CPU appended to `cpu_out`); the server is then shut down and must
    exit 0."""
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"processId": os.getpid(), "rootUri": None, "capabilities": {}},
    }
    t0 = time.perf_counter()
    proc = subprocess.Popen(SERVER, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(frame(init))
    proc.stdin.flush()
    reply = read_message(proc.stdout)
    elapsed = (time.perf_counter() - t0) * 1000
    cpu_out.append(process_cpu_ms(proc.pid))
    if reply.get("id") != 1 or "result" not in reply:
        raise RuntimeError(f"not an initialize reply: {reply}")
    proc.stdin.write(frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
    proc.stdin.write(frame({"jsonrpc": "2.0", "method": "exit"}))
    _, err = proc.communicate(timeout=30)  # flushes and closes stdin
    if proc.returncode != 0:
        raise RuntimeError(f"trtls serve exited {proc.returncode}: {err.decode(errors='replace')[-1000:]}")
    return elapsed


def floor_ms(env: dict[str, str], cpu_out: list[float]) -> float:
    c0, t0 = children_cpu_ms(), time.perf_counter()
    subprocess.run(FLOOR, check=True, env=env)
    elapsed = (time.perf_counter() - t0) * 1000
    cpu_out.append(children_cpu_ms() - c0)
    return elapsed


def children_cpu_ms() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r.ru_utime + r.ru_stime) * 1000


def env_for(tmp: Path, server: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    if server is not None:
        env["PYTHONPATH"] = str(server)
    return env


def main() -> int:
    ap = parser(__doc__)
    ap.add_argument("--runs", type=int, help="rounds (default 15; --quick: 3)")
    ap.add_argument("--baseline", type=Path, help="a folder holding an older trtls's server/ to measure alongside")
    ap.add_argument("--trtls", type=Path, help="a folder holding the server/ of the trtls under test (default: this)")
    args = ap.parse_args()
    runs = args.runs or (3 if args.quick else 15)
    tmp = Path(tempfile.mkdtemp(prefix="trtls-bench-serve-"))
    cases = {"server": initialize_ms, "floor": floor_ms}
    envs = {"server": env_for(tmp, args.trtls / "server" if args.trtls else None), "floor": env_for(tmp, None)}
    if args.baseline is not None:
        cases["baseline"] = initialize_ms
        envs["baseline"] = env_for(tmp, args.baseline / "server")
    for name, run in cases.items():  # warm-up: bytecode, page cache
        run(envs[name], [])
    got: dict[str, list[float]] = {name: [] for name in cases}
    cpu: dict[str, list[float]] = {name: [] for name in cases}
    names = list(cases)
    for i in range(runs):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            got[name].append(cases[name](envs[name], cpu[name]))
        line = ", ".join(f"{n} {got[n][-1]:.0f} ms (CPU {cpu[n][-1]:.0f})" for n in names)
        print(f"  round {i + 1}/{runs}: {line}, load {os.getloadavg()[0]:.1f}", flush=True)

    def spread(name: str) -> str:
        values = got[name]
        return (
            f"min {min(values):.0f}, max {max(values):.0f} ms over {len(values)} runs; "
            f"CPU of the process {statistics.median(cpu[name]):.0f} ms (median; the server's up to its reply)"
        )

    server = statistics.median(got["server"])
    figures = [
        figure(
            "initialize from spawn (median)",
            round(server),
            "ms",
            f"≤ {TARGET_MS:.0f}",
            server <= TARGET_MS,
            spread("server"),
        ),
        figure(
            "floor: python + import pygls.lsp.server, lsprotocol.types, exit (median)",
            round(statistics.median(got["floor"])),
            "ms",
            None,
            None,
            spread("floor"),
        ),
    ]
    if "baseline" in got:
        figures.append(
            figure(
                "baseline (older trtls) initialize from spawn (median), same rounds",
                round(statistics.median(got["baseline"])),
                "ms",
                None,
                None,
                spread("baseline"),
            )
        )
    emit(
        {
            "title": "Language server: initialize from spawn",
            "figures": figures,
            "notes": [f"{os.cpu_count()} CPUs; bytecode cached for every child (PYTHONPYCACHEPREFIX)"],
        },
        args.json,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
