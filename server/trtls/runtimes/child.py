"""Entry point of a runtime's child process: `python -m trtls.runtimes.child REQUEST.json` (internal).

Reads the request `runtime_calls` wrote, loads the adapter, refuses malformed inputs, runs the mode
(probe, run, bench, paired, concurrent), writes the outputs and a result record, and exits with a code that says
how it went. Separate from the adapters so the protocol with the parent is in one place.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from trtls.fs import Kind, atomic_write_text, parse_json, read_text
from trtls.runtimes.adapters import _ADAPTERS, Unavailable
from trtls.runtimes.contract import RuntimeSpec, load_npz, save_npz, validate_feed

REQUEST_LIMIT = 16 * 1024 * 1024  # the request names its files; the arrays are in the .npz files
# child exit codes (python adapters)
_EXIT_OK, _EXIT_ERROR, _EXIT_UNAVAILABLE = 0, 3, 4


class _Refused(Exception):
    """A malformed input refused before running (the documented clean rejection)."""


def paired(
    candidate: Callable[[dict[str, np.ndarray]], Any],
    baseline: Callable[[dict[str, np.ndarray]], Any],
    feeds: list[dict[str, np.ndarray]],
    warmup: int,
    pairs: int,
) -> dict[str, list[float] | list[int]]:
    """The candidate and the baseline in one process, request by request: pair k runs feeds[k % len(feeds)] on both,
    back to back, the order alternating (baseline first on even pairs), so the machine's drift and another process's
    burst land on both sides alike. Each request's wall time (perf_counter) and CPU time (process_time: every thread
    of this process, so a runtime's own thread pool counts, and time spent preempted by another process does not)."""
    for _ in range(warmup):
        baseline(feeds[0])
        candidate(feeds[0])
    out: dict[str, list[Any]] = {k: [] for k in ("input", "cand_wall_s", "cand_cpu_s", "base_wall_s", "base_cpu_s")}
    for k in range(pairs):
        feed = feeds[k % len(feeds)]
        order = (("base", baseline), ("cand", candidate)) if k % 2 == 0 else (("cand", candidate), ("base", baseline))
        for side, run in order:
            c0, w0 = time.process_time(), time.perf_counter()
            run(feed)
            w1, c1 = time.perf_counter(), time.process_time()
            out[f"{side}_wall_s"].append(w1 - w0)
            out[f"{side}_cpu_s"].append(c1 - c0)
        out["input"].append(k % len(feeds))
    return out


def _child_main(request_path: str) -> int:
    req = parse_json(read_text(request_path, limit=REQUEST_LIMIT, follow=False))
    spec = RuntimeSpec(**req["spec"])
    result_path = Path(req["result"])
    scratch = result_path.parent  # the call's private scratch folder: every file this child writes stays in it
    record: dict[str, Any] = {"status": "ok", "message": ""}

    def finish(status: str, message: str, code: int) -> int:
        record["status"], record["message"] = status, message
        atomic_write_text(result_path, json.dumps(record), kind=Kind.scratch, within=scratch)
        return code

    try:
        t = time.perf_counter()
        adapter = _ADAPTERS[spec.kind](spec)
        record["load_s"] = time.perf_counter() - t
    except Unavailable as exc:
        return finish("unavailable", str(exc), _EXIT_UNAVAILABLE)
    except Exception as exc:
        return finish("error", f"cannot load the model: {type(exc).__name__}: {exc}", _EXIT_ERROR)
    if req["mode"] == "probe":
        return finish("ok", "loaded", _EXIT_OK)
    baseline = None
    if req["mode"] == "paired":  # the baseline artifact, loaded in this same process (see `paired`)
        try:
            baseline = _ADAPTERS[spec.kind](RuntimeSpec(**req["baseline_spec"]))
        except Unavailable as exc:
            return finish("unavailable", f"the baseline: {exc}", _EXIT_UNAVAILABLE)
        except Exception as exc:
            return finish("error", f"cannot load the baseline model: {type(exc).__name__}: {exc}", _EXIT_ERROR)

    rng = np.random.default_rng(spec.perturb_seed)
    rng_lock = threading.Lock()

    def prepared(path: str) -> dict[str, np.ndarray]:
        try:
            feed = load_npz(path)
        except Exception as exc:
            raise _Refused(f"unreadable input {Path(path).name}: {exc}") from None
        problems = validate_feed(feed, adapter.signature, spec.max_input_bytes) if spec.validate_inputs else []
        if problems:
            raise _Refused("malformed input refused: " + "; ".join(problems))
        return feed

    def inject(outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if not spec.perturb:
            return outputs
        with rng_lock:  # FAULT INJECTION: deliberate drift, see trtls.runtimes
            return {
                k: (v + spec.perturb * rng.standard_normal(v.shape)).astype(v.dtype) if v.dtype.kind == "f" else v
                for k, v in outputs.items()
            }

    try:
        feeds = [prepared(p) for p in req["inputs"]]
        run = adapter.runner()
        mode, outs = req["mode"], req["outputs"]
        if mode == "run":
            for w in range(req["warmup"]):
                t = time.perf_counter()
                run(feeds[0])
                if w == 0:
                    record["first_run_s"] = time.perf_counter() - t
            lat = []
            for feed, out in zip(feeds, outs, strict=True):
                t = time.perf_counter()
                result = run(feed)
                lat.append(time.perf_counter() - t)
                save_npz(out, inject(result), within=scratch)
            record.setdefault("first_run_s", lat[0] if lat else None)
            record["latencies_s"] = lat
        elif mode == "bench":
            lat = []
            t_loop = None
            for k in range(req["warmup"] + req["iterations"]):
                if k == req["warmup"]:
                    t_loop = time.perf_counter()
                t = time.perf_counter()
                run(feeds[k % len(feeds)])
                dt = time.perf_counter() - t
                if k == 0:
                    record["first_run_s"] = dt
                if k >= req["warmup"]:
                    lat.append(dt)
            record["latencies_s"] = lat
            record["timed_wall_s"] = time.perf_counter() - t_loop if t_loop is not None else None
        elif mode == "paired":
            assert baseline is not None
            record["paired"] = paired(run, baseline.runner(), feeds, req["warmup"], req["iterations"])
        elif mode == "concurrent":
            n = req["concurrency"]
            runners = [run] + [adapter.runner() for _ in range(n - 1)]
            results: list[Any] = [None] * n
            barrier = threading.Barrier(n)

            def worker(k: int) -> None:
                try:
                    barrier.wait(timeout=30)
                    results[k] = runners[k](feeds[0])
                except Exception as exc:
                    results[k] = exc

            threads = [threading.Thread(target=worker, args=(k,)) for k in range(n)]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            for k, r in enumerate(results):
                if isinstance(r, Exception):
                    return finish("error", f"concurrent request {k} failed: {type(r).__name__}: {r}", _EXIT_ERROR)
                save_npz(outs[k], inject(r), within=scratch)
        else:
            return finish("error", f"unknown mode {mode!r}", _EXIT_ERROR)
    except _Refused as exc:
        return finish("error", str(exc), _EXIT_ERROR)
    except Exception as exc:
        return finish("error", f"{type(exc).__name__}: {str(exc)[:1000]}", _EXIT_ERROR)
    if adapter.gpu_mem_bytes is not None:
        record["gpu_mem_bytes"] = adapter.gpu_mem_bytes
    return finish("ok", "", _EXIT_OK)


if __name__ == "__main__":  # pragma: no cover - exercised through child processes
    sys.exit(_child_main(sys.argv[1]))
