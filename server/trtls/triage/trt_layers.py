"""The TensorRT engine's layer-wise comparison — the child process's side, the only module of `trtls.triage` that
imports TensorRT (`python -m trtls.triage.trt_layers JOB.json`, started by `trt_layers_run`).

Every layer's outputs are marked as network outputs (`INetworkDefinition.mark_output`), the network is built
(`build_serialized_network`, one profile at the inputs' shapes), deserialized and run (`IExecutionContext` with
tensor addresses, device memory and copies through Polygraphy's CUDA wrapper), and every tensor is compared with the
reference ONNX run through ONNX Runtime by the same comparator as the ONNX Runtime search (`diverge.compare_values`).

Execution is checked again here, at runtime: a machine without a device answers `not_checked` before building, and
an engine the runtime does not deserialize (TensorRT-RTX refusing the device) answers `not_checked` with TensorRT's
own error — never a verdict.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

from trtls.fs.models import load_npz, load_onnx, require_regular


def mark_every_layer(network: Any) -> list[str]:
    """Mark every output of every layer as a network output; the names, in layer order (already-marked outputs
    included, each once)."""
    marked: list[str] = []
    for i in range(network.num_layers):
        layer = network.get_layer(i)
        for j in range(layer.num_outputs):
            tensor = layer.get_output(j)
            if tensor is None or tensor.name in marked:
                continue
            if not tensor.is_network_output:
                network.mark_output(tensor)
            marked.append(tensor.name)
    return marked


def network_outputs(network: Any) -> list[str]:
    return [network.get_output(i).name for i in range(network.num_outputs)]


class Logged:
    """TensorRT's log lines of error severity, kept for the reason a step failed."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def __call__(self, severity: str, message: str) -> None:
        if severity in ("ERROR", "INTERNAL_ERROR"):
            self.errors.append(message)


def parse_marked(bm: Any, onnx_path: Path, logged: Logged) -> tuple[Any, Any, Any, list[str]]:
    """(builder, network, parser, marked names) for `onnx_path`, every layer output marked. The parser is returned
    to be kept alive as long as the network (it owns the weights)."""
    from trtls.builds.worker.adapter import make_logger

    trt = bm.trt
    logger = make_logger(bm, logged)
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    try:
        require_regular(onnx_path)  # a FIFO or a device named as the model: said, never handed to the parser
    except OSError as exc:
        raise RuntimeError(f"the ONNX parser cannot read {onnx_path}: {exc.strerror or exc}") from None
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(str(onnx_path)):
        errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
        raise RuntimeError(f"the ONNX parser refused {onnx_path.name}: {'; '.join(errors) or logged.errors}")
    return builder, network, parser, mark_every_layer(network)


def build_marked(bm: Any, builder: Any, network: Any, feed: dict[str, np.ndarray], logged: Logged) -> bytes:
    """The marked network built with one optimization profile at the inputs' shapes."""
    config = builder.create_builder_config()
    profile = builder.create_optimization_profile()
    for i in range(network.num_inputs):
        tensor = network.get_input(i)
        shape = tuple(feed[tensor.name].shape)
        profile.set_shape(tensor.name, shape, shape, shape)
    config.add_optimization_profile(profile)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise RuntimeError(f"the marked network did not build: {'; '.join(logged.errors) or 'no error logged'}")
    return bytes(serialized)


def run_engine(bm: Any, serialized: bytes, feed: dict[str, np.ndarray], logged: Logged) -> dict[str, Any] | str:
    """Every output of the engine on `feed`, or the reason the runtime refused the engine (a str)."""
    from polygraphy import cuda

    from trtls.builds.worker.adapter import make_logger

    trt = bm.trt
    runtime = trt.Runtime(make_logger(bm, logged))
    engine = runtime.deserialize_cuda_engine(serialized)
    if engine is None:
        return "the TensorRT runtime refused the engine on this device: " + ("; ".join(logged.errors) or "no error")
    context = engine.create_execution_context()
    stream = cuda.Stream()
    buffers: dict[str, Any] = {}
    names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
    for name in names:
        if engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT:
            host = np.ascontiguousarray(feed[name])
            context.set_input_shape(name, host.shape)
            buffers[name] = cuda.DeviceArray(shape=host.shape, dtype=host.dtype).copy_from(host, stream)
            context.set_tensor_address(name, buffers[name].ptr)
    outputs: dict[str, np.ndarray] = {}
    for name in names:
        if engine.get_tensor_mode(name) == trt.TensorIOMode.OUTPUT:
            shape = tuple(context.get_tensor_shape(name))
            outputs[name] = np.empty(shape, dtype=trt.nptype(engine.get_tensor_dtype(name)))
            buffers[name] = cuda.DeviceArray(shape=shape, dtype=outputs[name].dtype)
            context.set_tensor_address(name, buffers[name].ptr)
    if not context.execute_async_v3(stream.ptr):
        return "the engine did not execute: " + ("; ".join(logged.errors) or "no error")
    for name, host in outputs.items():
        buffers[name].copy_to(host, stream)
    stream.synchronize()
    return outputs


def layerwise(job: dict[str, Any], check_device: bool = True) -> dict[str, Any]:
    """The whole comparison for a job (the parent's JSON). `check_device=False` builds even where no device was
    found (a test of the refusal path: the runtime's own answer)."""
    import onnx_graphsurgeon as gs

    from trtls.builds.worker.adapter import load_builder_module
    from trtls.triage.diverge import RULE, compare_values
    from trtls.triage.probe import every_tensor_session
    from trtls.triage.trt_layers_run import execution_blocker, not_checked

    if check_device and (blocker := execution_blocker()) is not None:
        return not_checked(blocker, detected="in the child, before building")
    feed = load_npz(job["inputs"])
    bm = load_builder_module(job.get("builder") or "auto")
    logged = Logged()
    builder, network, _parser, marked = parse_marked(bm, Path(job["onnx"]), logged)
    serialized = build_marked(bm, builder, network, feed, logged)
    got = run_engine(bm, serialized, feed, logged)
    base = {"module": bm.name, "version": bm.version, "markedOutputs": len(marked), "engineBytes": len(serialized)}
    if isinstance(got, str):
        return not_checked(got, detected="deserializing the built engine", **base)
    reference = load_onnx(job["reference"])
    session = every_tensor_session(reference)
    ref_names = [o.name for o in session.get_outputs()]
    ref = dict(zip(ref_names, session.run(ref_names, feed), strict=True))
    graph = gs.import_onnx(reference)
    graph.toposort()
    tolerances = {k: (float(v[0]), float(v[1])) for k, v in (job.get("outputTolerances") or {}).items()}
    comp = compare_values(graph, ref, got, float(job["rtol"]), tolerances)
    return {"status": "compared", "rule": RULE, **base, **comp.verdict()}


def main(argv: list[str]) -> int:
    from trtls.builds.roots import state_root
    from trtls.fs import Kind, atomic_write_text, parse_json, read_text
    from trtls.triage.diverge import standard_json

    job = parse_json(read_text(argv[0], limit=1 << 20))  # the parent's job.json, written by the door beside it
    try:
        result = layerwise(job)
    except Exception as exc:  # a parser or builder refusal: the parent reports it, never a verdict
        result = {"status": "error", "reason": f"{type(exc).__name__}: {exc}"}
    out = Path(job["result"])
    text = json.dumps(standard_json(result), indent=2, allow_nan=False)
    atomic_write_text(out, text, kind=Kind.evidence, within=state_root(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
