"""GPU placement follows the builder (core.farm.gpu_choice), on the real test cluster with a node that advertises a
GPU (Ray accepts a GPU count on a node that has none: the resource is what is scheduled).

An ahead-of-time TensorRT-RTX cell (`num_gpus = "auto"` → 0) lands beside a cell that holds the node's one GPU
instead of queueing behind it; a cell that asks for the GPU (`num_gpus = 1`) gets it, and Ray's
CUDA_VISIBLE_DEVICES with it. The cells' lines and evidence say which they chose and why."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.farm.conftest import LABEL, engine_table, farm_recipe, gpu_node
from trtls.builds.farm.placement import Node, Request, place
from trtls.builds.farm.submit import prepare
from trtls.builds.supervisor.matrix import plan
from trtls.builds.supervisor.supervisor import Supervisor
from trtls.cli.matrix_view import cell_line
from trtls.core.farm import gpu_choice
from trtls.core.recipe import load_recipe

GPU_NODE = Node("g" * 56, {LABEL: "gpu"}, {"CPU": 2, "GPU": 1})


def test_the_rule_follows_the_builder() -> None:
    assert gpu_choice("auto", "tensorrt_rtx", gpu_nodes=True).num_gpus == 0.0
    assert gpu_choice("auto", "tensorrt", gpu_nodes=False).num_gpus == 1.0
    assert gpu_choice(1, "tensorrt_rtx", gpu_nodes=True).num_gpus == 1.0
    assert gpu_choice(0.5, "tensorrt", gpu_nodes=True).num_gpus == 0.5
    assert "TensorRT-RTX" in gpu_choice("auto", "tensorrt_rtx", True).why
    assert "as the recipe asks" in gpu_choice(1, "tensorrt_rtx", True).why
    # an external worker: not known here, so a GPU node's build holds a whole GPU, as before
    assert gpu_choice("auto", None, gpu_nodes=True).num_gpus == 1.0
    assert gpu_choice("auto", None, gpu_nodes=False).num_gpus == 0.0


def test_placement_of_an_rtx_cell_on_a_gpu_node_holds_no_gpu_and_full_tensorrt_needs_one() -> None:
    rtx = place(Request("e", "c", {LABEL: "gpu"}, builder="tensorrt_rtx"), [GPU_NODE])
    full = place(Request("e", "c", {LABEL: "gpu"}, builder="tensorrt"), [GPU_NODE])
    assert rtx.ray_options()["num_gpus"] == 0.0 and "ahead of time" in rtx.gpu_rule  # type: ignore[union-attr]
    assert full.ray_options()["num_gpus"] == 1.0 and "times tactics" in full.gpu_rule  # type: ignore[union-attr]
    cpu_only = Node("c" * 56, {LABEL: "cpu"}, {"CPU": 2})
    refused = place(Request("e", "c", {LABEL: "cpu"}, builder="tensorrt"), [cpu_only])
    assert getattr(refused, "code", None) == "TRT236"  # full TensorRT cannot build where there is no GPU


async def _prepared(ws: Path, address: str, name: str, model: str, extra: str):
    path = farm_recipe(ws, address, engine_table(name, model, f'{{ "{LABEL}" = "gpu" }}', extra))
    text = path.read_text().replace(f"[engines.{name}]\n", f'[engines.{name}]\nbuilder_module = "tensorrt_rtx"\n', 1)
    path.write_text(text)
    loaded = load_recipe(path)
    specs = await prepare(loaded, plan(loaded, [name], False, {}))
    assert isinstance(specs, dict), specs
    return loaded, specs[name]


async def test_an_rtx_cell_is_not_queued_behind_a_cell_that_holds_the_gpu(ray_cluster, tmp_path: Path) -> None:
    gpu_node(ray_cluster)
    sup = Supervisor()
    loaded, spec = await _prepared(tmp_path / "holder", ray_cluster.address, "large", "large", "num_gpus = 1\n")
    assert spec.placement.num_gpus == 1.0
    holder = sup.start(loaded, "large", remote=spec)
    building = asyncio.Event()
    holder.listeners.append(lambda b, ev: building.set() if ev is not None and ev.type == "phase_start" else None)
    try:
        await asyncio.wait_for(building.wait(), 300)
        loaded, spec = await _prepared(tmp_path / "aot", ray_cluster.address, "demo", "demo", "")
        assert spec.placement.num_gpus == 0.0 and "TensorRT-RTX" in spec.placement.gpu_rule
        aot = sup.start(loaded, "demo", remote=spec)
        holder_running_when_placed: list[bool] = []
        aot.listeners.append(
            lambda b, ev: (
                holder_running_when_placed.append(holder.running) if ev is not None and ev.type == "placed" else None
            )
        )
        summary = await aot.wait()
        assert summary.outcome == "built", summary.error
        # the GPU was held by `large` the whole time: the AOT cell ran beside it, not after it
        assert holder_running_when_placed == [True] and holder.running
        node = summary.node
        assert node["numGpus"] == 0.0 and node["gpuIds"] == [] and "TensorRT-RTX" in node["gpuRule"]
        assert node["labels"][LABEL] == "gpu"
        assert holder.node_view()["gpuIds"] == ["0"] and holder.node_view()["cudaVisibleDevices"] == "0"
        assert "no GPU" in cell_line(aot) and "TensorRT-RTX" in cell_line(aot)
    finally:
        holder.cancel("api")
        held = await holder.wait()
    assert held.outcome == "cancelled", held.error
    assert held.node["numGpus"] == 1.0 and held.node["cudaVisibleDevices"] == "0"
    assert "as the recipe asks" in held.node["gpuRule"]
