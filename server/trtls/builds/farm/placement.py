"""Honest scheduling: before anything is submitted, check that some node can hold each cell.

Ray leaves a task whose label no node has pending forever, silently (measured: `../shared/notes/ray.md`), so
a cell no node can satisfy is refused here, at once, with a finding on the recipe key that asked for it and the
labels that do exist. Pure Python over the node inventory (`cluster.nodes()`): no Ray import.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trtls.core.farm import RunOn, gpu_choice
from trtls.core.findings import Finding, Origin, Severity
from trtls.core.vocabulary import BUILDER_MODULES

NOISY_LABELS = ("ray.io/node-id",)  # unique per node: naming them helps nobody


@dataclass(frozen=True)
class Node:
    node_id: str
    labels: dict[str, str]
    resources: dict[str, float]  # totals: CPU, GPU, memory (bytes), …
    hostname: str = ""

    @property
    def gpus(self) -> float:
        return self.resources.get("GPU", 0.0)


@dataclass(frozen=True)
class Request:
    """What one cell holds while it builds, and where it may run."""

    engine: str
    cell: str
    labels: dict[str, str] = field(default_factory=dict)
    num_cpus: float = 1.0
    num_gpus: float | str = "auto"
    memory_mib: int | None = None
    builder: str | None = None  # the module the node's worker imports (builder_of); None: not known here

    @classmethod
    def of(
        cls, engine: str, cell: str, run_on: RunOn | None, labels: dict[str, str], builder: str | None = None
    ) -> Request:
        r = run_on or RunOn()
        return cls(engine, cell, labels, r.num_cpus, r.num_gpus, r.memory_mib, builder)


def builder_of(builder_module: str, external_worker: bool) -> str | None:
    """The TensorRT module a cell's worker will import on its node: the recipe's choice, or for `auto` what the
    worker's own preference (full TensorRT, then TensorRT-RTX) finds installed here — farm nodes run the
    driver's versions (docs/farm.md). Looked up with find_spec: nothing is imported. None for an external worker
    or when neither is installed here (a driver without TensorRT): `builder_module` then says it."""
    if external_worker:
        return None
    if builder_module != "auto":
        return builder_module
    return next((m for m in BUILDER_MODULES if importlib.util.find_spec(m) is not None), None)


@dataclass(frozen=True)
class Placement:
    """A feasible request with `num_gpus` resolved by the builder (core.farm.gpu_choice) and why."""

    request: Request
    num_gpus: float
    candidates: tuple[str, ...]  # node ids that could hold it
    gpu_rule: str = ""  # the sentence the cell's line and evidence show

    def shape(self) -> str:
        """Cells of one shape can share a warm node worker (same labels and resources)."""
        return repr(sorted(self.ray_options().items()))

    def ray_options(self) -> dict[str, Any]:
        opts: dict[str, Any] = {"num_cpus": self.request.num_cpus, "num_gpus": self.num_gpus}
        if self.request.memory_mib:
            opts["memory"] = self.request.memory_mib * 1024 * 1024
        if self.request.labels:
            opts["label_selector"] = dict(self.request.labels)
        return opts


def labels_in(nodes: list[Node]) -> dict[str, list[str]]:
    out: dict[str, set[str]] = {}
    for n in nodes:
        for k, v in n.labels.items():
            if k not in NOISY_LABELS:
                out.setdefault(k, set()).add(v)
    return {k: sorted(v) for k, v in sorted(out.items())}


def _describe(labels: dict[str, list[str]]) -> str:
    if not labels:
        return "no node has any label"
    return "; ".join(f"{k}: {', '.join(v)}" for k, v in labels.items())


def place(request: Request, nodes: list[Node]) -> Placement | Finding:
    """A placement, or a finding located on the recipe key that cannot be satisfied."""
    base = ("engines", request.engine, "run_on")
    existing = labels_in(nodes)
    matching = nodes
    for key, value in request.labels.items():
        matching = [n for n in matching if n.labels.get(key) == value]
        if not matching:
            what = f"no node has label {key}={value}" if key in existing else f"no node has a label {key}"
            if key == "ray.io/accelerator-type" and key not in existing:
                what += " (Ray sets it only on nodes with a GPU it recognises)"
            return Finding(
                "TRT230",
                Severity.error,
                f"cell {request.cell}: {what}; labels in this cluster — {_describe(existing)}",
                (*base, "labels", key),
                Origin.build,
                True,
                {"labels": existing, "cell": request.cell},
            )
    choice = gpu_choice(request.num_gpus, request.builder, any(n.gpus >= 1 for n in matching))
    gpus = choice.num_gpus
    need = {"CPU": float(request.num_cpus), "GPU": float(gpus)}
    if request.memory_mib:
        need["memory"] = request.memory_mib * 1024 * 1024
    fits = [n for n in matching if all(n.resources.get(k, 0.0) >= v for k, v in need.items() if v)]
    if not fits:
        short = next(k for k, v in need.items() if v and not any(n.resources.get(k, 0.0) >= v for n in matching))
        key = {"CPU": "num_cpus", "GPU": "num_gpus", "memory": "memory_mib"}[short]
        most = max((n.resources.get(short, 0.0) for n in matching), default=0.0)
        unit = " MiB" if short == "memory" else ""
        shown = (lambda x: f"{x / 1024 / 1024:.0f}") if short == "memory" else (lambda x: f"{x:g}")
        return Finding(
            "TRT236",
            Severity.error,
            f"cell {request.cell}: no node with the requested labels has {shown(need[short])}{unit} {short} "
            f"(the most any has: {shown(most)}{unit})",
            (*base, key),
            Origin.build,
            True,
        )
    return Placement(request, float(gpus), tuple(n.node_id for n in fits), choice.why)


def place_all(requests: list[Request], nodes: list[Node]) -> tuple[list[Placement], list[Finding]]:
    placements: list[Placement] = []
    findings: list[Finding] = []
    for r in requests:
        got = place(r, nodes)
        (findings if isinstance(got, Finding) else placements).append(got)  # type: ignore[arg-type]
    return placements, findings


@dataclass(frozen=True)
class RemoteSpec:
    """What the supervisor needs to run one cell remotely (Build.remote)."""

    placement: Placement
    queue_timeout_s: float
    shared_dir: Path | None
    keep_warm_s: float = 0.0
    # every node is this machine (a local farm: the embedded instance, or `trtls farm up`'s): the node's worker writes
    # the engine at the requested output itself, as a local build does — nothing to send back (docs/farm.md)
    same_machine: bool = False
    # the driver's plan for the remote engine store (builds/farm/node_store.py): the node publishes a built engine
    store: dict[str, Any] | None = None
