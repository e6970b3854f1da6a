"""The flat setting keys of a worker job that `builds.worker.build_config_apply` owns (stdlib only: the worker
imports this, and the worker imports no pydantic). `core.build_config` checks its models against them."""

from __future__ import annotations

POOL_KEYS = (
    "workspace_mib",
    "tactic_dram_mib",
    "tactic_shared_memory_kib",
    "dla_managed_sram_mib",
    "dla_local_dram_mib",
    "dla_global_dram_mib",
)
FLAG_KEYS = (
    "tf32",
    "sparse_weights",
    "refit",
    "strip_weights",
    "weight_streaming",
    "version_compatible",
    "exclude_lean_runtime",
    "tactic_sources",
    "profiling_verbosity",
    "dla_core",
    "allow_gpu_fallback",
    "runtime_platform",
    "l2_limit_for_tiling",
)
