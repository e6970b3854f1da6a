"""Placement over node inventories (pure, no Ray): labels, GPUs by the builder (num_gpus auto), located refusals."""

from __future__ import annotations

from trtls.builds.farm.placement import Node, Request, place, place_all
from trtls.core.findings import Finding

GPU_NODE = Node("a" * 56, {"ray.io/accelerator-type": "L4", "trtls/cc": "SM89"}, {"CPU": 16, "GPU": 4, "memory": 64e9})
CPU_NODE = Node("b" * 56, {"trtls/pool": "cpu-aot", "ray.io/node-id": "b" * 56}, {"CPU": 2, "memory": 8e9})


def test_auto_gpus_follows_the_builder_and_an_unknown_builder_holds_a_gpu_only_where_there_is_one() -> None:
    """num_gpus = "auto": 0 for TensorRT-RTX (ahead of time, no GPU), 1 exclusive GPU for full TensorRT (it times
    tactics on the GPU); a builder not known here (an external worker) holds one on a GPU node and none elsewhere."""
    for builder, gpus in (("tensorrt_rtx", 0.0), ("tensorrt", 1.0)):
        got = place(Request("e", "c", {"ray.io/accelerator-type": "L4"}, builder=builder), [GPU_NODE, CPU_NODE])
        assert not isinstance(got, Finding) and got.num_gpus == gpus and got.ray_options()["num_gpus"] == gpus
    on_gpu = place(Request("e", "c", {"ray.io/accelerator-type": "L4"}), [GPU_NODE, CPU_NODE])
    on_cpu = place(Request("e", "c", {"trtls/pool": "cpu-aot"}), [GPU_NODE, CPU_NODE])
    assert not isinstance(on_gpu, Finding) and on_gpu.num_gpus == 1.0 and on_gpu.candidates == (GPU_NODE.node_id,)
    assert on_gpu.ray_options()["label_selector"] == {"ray.io/accelerator-type": "L4"}
    assert not isinstance(on_cpu, Finding) and on_cpu.num_gpus == 0.0 and on_cpu.ray_options()["num_gpus"] == 0.0


def test_missing_label_names_the_labels_that_exist() -> None:
    got = place(Request("e", "SM120", {"trtls/cc": "SM120"}), [GPU_NODE, CPU_NODE])
    assert isinstance(got, Finding) and got.code == "TRT230"
    assert got.path == ("engines", "e", "run_on", "labels", "trtls/cc") and got.on_value
    assert "trtls/cc=SM120" in got.message and "trtls/cc: SM89" in got.message and "trtls/pool: cpu-aot" in got.message
    assert "ray.io/node-id" not in got.message  # unique per node: noise


def test_accelerator_label_on_a_cluster_without_gpus_says_why() -> None:
    got = place(Request("e", "c", {"ray.io/accelerator-type": "H100"}), [CPU_NODE])
    assert isinstance(got, Finding) and "only on nodes with a GPU" in got.message


def test_resources_no_labelled_node_has_are_refused_on_their_key() -> None:
    gpus = place(Request("e", "c", {"trtls/cc": "SM89"}, num_gpus=8), [GPU_NODE])
    mem = place(Request("e", "c", {"trtls/pool": "cpu-aot"}, memory_mib=16384), [CPU_NODE])
    assert (
        isinstance(gpus, Finding)
        and gpus.code == "TRT236"
        and gpus.path[-1] == "num_gpus"
        and "most any has: 4" in gpus.message
    )
    assert isinstance(mem, Finding) and mem.path[-1] == "memory_mib" and "16384 MiB" in mem.message


def test_place_all_reports_every_bad_cell_and_places_the_rest() -> None:
    reqs = [Request("e", "ok", {"trtls/cc": "SM89"}), Request("e", "bad", {"trtls/cc": "SM75"})]
    placements, findings = place_all(reqs, [GPU_NODE])
    assert [p.request.cell for p in placements] == ["ok"] and [f.data["cell"] for f in findings] == ["bad"]
