"""Why does a `large` build on the farm cost more CPU than the same build started by hand? (issue 31, 2026-12-04)

1. What a Ray actor's process (and so the worker it spawns) inherits: the variables Ray sets for its workers.
2. 16 bare `large` builds side by side under each environment a farm worker could have, wall and CPU-s of each set.
Run on the 16-core host: python3 benchmarks/_farm_env_probe.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODEL = HERE.parent / "samples" / "quickstart" / "models" / "large.onnx"
KEYS = ("OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RAY_LOCAL_MODE",
        "LD_PRELOAD", "MALLOC_ARENA_MAX", "PYTHONMALLOC")  # fmt: skip


def actor_env() -> dict:
    import ray

    ray.init(num_cpus=16, include_dashboard=False, log_to_driver=False)

    @ray.remote(num_cpus=0)
    class Zero:
        def env(self) -> dict:
            return {k: os.environ.get(k) for k in KEYS} | {"affinity": len(os.sched_getaffinity(0))}

    @ray.remote(num_cpus=1)
    class One:
        def env(self) -> dict:
            return {k: os.environ.get(k) for k in KEYS} | {"affinity": len(os.sched_getaffinity(0))}

    out = {"num_cpus=0": ray.get(Zero.remote().env.remote()), "num_cpus=1": ray.get(One.remote().env.remote())}
    ray.shutdown()
    return out


def bare(n: int, env: dict[str, str], out: Path) -> dict:
    t0 = time.monotonic()
    full = {**os.environ, **env}
    for k, v in env.items():
        if v is None:
            full.pop(k, None)
    procs = [subprocess.Popen([sys.executable, str(HERE / "_bare_build.py"), str(MODEL), str(out / f"b{i}.engine")],
                              env=full) for i in range(n)]  # fmt: skip
    cpu = 0.0
    for p in procs:
        _, status, ru = os.wait4(p.pid, 0)
        cpu += ru.ru_utime + ru.ru_stime
    return {"wallS": round(time.monotonic() - t0, 2), "cpuS": round(cpu, 1)}


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 16
    if "--alternate" in sys.argv:  # the second run: only the variable that differed, alternated to see past the noise
        variants = [("OMP_NUM_THREADS=1", {"OMP_NUM_THREADS": "1"}), ("plain", {})] * 2
    else:
        print("actor env:", json.dumps(actor_env()), flush=True)
        variants = [("plain", {}), ("OMP_NUM_THREADS=1", {"OMP_NUM_THREADS": "1"}),
                    ("CUDA_VISIBLE_DEVICES=''", {"CUDA_VISIBLE_DEVICES": ""}), ("plain again", {})]  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        for name, env in variants:
            print(f"{n} bare large, {name}:", bare(n, env, Path(tmp)), flush=True)


if __name__ == "__main__":
    main()
