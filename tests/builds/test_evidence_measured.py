"""Evidence measured, never assumed (issue 12): the environment of a build that fails on its input, an
output folder checked before the build (TRT405), the target inside the buildConfigHash, resource figures
and the OOM verdict, a foreign timing cache reported as unverified."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from trtls.builds.build_facts import build_config_hash
from trtls.builds.supervisor import resources
from trtls.builds.supervisor.outcome_findings import build_findings
from trtls.builds.timing_cache import after_load, plan_cache
from trtls.core.build_target import build_target
from trtls.core.evidence import UNKNOWN, gpu_sku, record_problems
from trtls.core.summary_record import Summary

from .helpers import run_build


def _build(ws: Path, **kw) -> Summary:
    async def go() -> Summary:
        _, build = await run_build(ws, **kw)
        return await build.wait()

    return asyncio.run(go())


def test_a_truncated_onnx_still_records_what_would_have_built_it(workspace: Path) -> None:
    onnx = workspace / "models" / "demo.onnx"
    onnx.write_bytes(onnx.read_bytes()[:5000])
    s = _build(workspace)
    assert s.outcome == "failed" and "ONNX parse failed" in s.error
    assert s.tensorrtVersion not in (None, UNKNOWN) and s.environment.module
    assert s.gpuSku == gpu_sku(s.environment.record()) != UNKNOWN
    env_file = json.loads((Path(s.recipe).parent / ".trtls" / "runs" / s.buildId / "environment.json").read_text())
    assert env_file["version"] == s.tensorrtVersion
    # the cache was never read: not "discarded"
    assert s.timingCacheMode == "not_applicable" and "before the timing cache was read" in s.timingCache["reason"]
    assert s.buildConfigHash is None and record_problems(s.record()) == []
    assert s.resources["peakRssBytes"] > 0 and "getrusage" in s.resources["how"]


def test_an_unwritable_output_folder_fails_before_the_build(workspace: Path) -> None:
    (workspace / "build").write_text("a file where the output folder should be")  # not writable, even for root
    s = _build(workspace)
    assert s.outcome == "failed" and s.error.startswith("TRT405") and s.phaseTree == []
    assert s.outputCheck["writable"] is False and s.workerPid is None
    # no build ran, but the environment was still measured (worker --probe)
    assert s.tensorrtVersion not in (None, UNKNOWN) and s.gpuSku == gpu_sku(s.environment.record()) != UNKNOWN
    findings = build_findings(s)
    trt405 = [f for f in findings if f.code == "TRT405"]
    assert trt405 and trt405[0].path == ("engines", "demo", "output")
    assert record_problems(s.record()) == [], record_problems(s.record())


def test_the_target_is_part_of_the_build_config_hash(tmp_path: Path) -> None:
    onnx = tmp_path / "m.onnx"
    onnx.write_bytes(b"same network")
    env = {"module": "tensorrt_rtx", "version": "1.7", "device_name": None, "compute_capability": None}
    a = build_config_hash(onnx, {}, [], env, build_target(env, {"compute_capabilities": ["SM89"]}))
    b = build_config_hash(onnx, {}, [], env, build_target(env, {"compute_capabilities": ["SM120"]}))
    gpu = dict(env, device_name="NVIDIA RTX 6000", compute_capability="12.0")
    c = build_config_hash(onnx, {}, [], gpu, build_target(gpu, {}))
    d = build_config_hash(onnx, {}, [], env, build_target(env, {}))
    assert len({a, b, c, d}) == 4


def test_gpu_sku_is_measured_or_unknown() -> None:
    assert gpu_sku({}) == UNKNOWN
    assert gpu_sku({"module": "tensorrt_rtx", "device_name": None}) == "no device"
    assert gpu_sku({"module": "tensorrt", "device_name": "NVIDIA H200"}) == "NVIDIA H200"


def test_oom_verdict_and_resource_figures() -> None:
    src = "/sys/fs/cgroup/memory.events"
    assert resources.oom_verdict({"count": 1, "source": src}, {"count": 2, "source": src})["oomKill"] is True
    assert resources.oom_verdict({"count": 1, "source": src}, {"count": 1, "source": src})["oomKill"] is False
    assert resources.oom_verdict(None, None)["oomKill"] is None
    assert resources.vm_hwm_bytes(os.getpid()) > 0
    counter = resources.oom_kill_count()
    assert counter is None or counter["count"] >= 0
    sampler = resources.ResourceSampler(os.getpid(), device=False)
    sampler.sample()
    rec = sampler.record(None, "killed", -9)
    assert rec["peakRssBytes"] > 0 and "lower bound" in rec["how"] and rec["gpuMemory"]["how"] == "no device"
    assert rec["oom"]["exitSignal"] == 9 and "oomKill" in rec["oom"]


def test_a_cache_trtls_did_not_write_is_unverified_not_trusted(tmp_path: Path) -> None:
    cache = tmp_path / "c.timing-cache"
    cache.write_bytes(os.urandom(3000))  # no sidecar
    plan = plan_cache(cache, "read_write", {}, False, 3, tmp_path / "q")
    assert plan.decision == "not_applicable" and "not written by trtls" in plan.reason and plan.data is not None
    logged = [  # what TensorRT-RTX 1.7 logs for any cache on a machine without a CUDA device
        "[defaultAllocator.cpp::allocate] Cuda Runtime (CUDA driver version is insufficient for CUDA runtime version)",
        "Failed to deserialize timing cache. Returning an empty timing cache.",
    ]
    plan = after_load(plan, logged, True, tmp_path)
    assert "unverified" in plan.reason and cache.is_file() and plan.quarantined_to is None
