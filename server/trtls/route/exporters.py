"""Checkpoint → ONNX exporters, chosen by config.json `model_type`. They read safetensors weights (a data format:
a JSON header and raw tensors; nothing runs) and return the ONNX as bytes; `route.writes` puts it on disk."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from trtls.core.recipe import EngineRecipe
from trtls.route.checkpoint import CheckpointState, read_verified
from trtls.route.errors import RouteBuildError
from trtls.route.pooling import PoolingSpec

if TYPE_CHECKING:
    from trtls.core.summary_record import Summary

MAX_WEIGHTS = 2 * 1024 * 1024 * 1024  # the in-memory exporters refuse larger weight sets


def _load_weights(state: CheckpointState) -> dict[str, Any]:
    from safetensors.numpy import load  # a data format: parses a JSON header and raw tensors, runs nothing

    shards = sorted(r for r in state.files if r.endswith(".safetensors") and "/" not in r)
    if not shards:
        raise RouteBuildError(
            "no top-level *.safetensors weights in the checkpoint (pickle weights are never loaded)",
            ("checkpoint", "path"),
        )
    if sum(state.files[r]["size"] for r in shards) > MAX_WEIGHTS:
        raise RouteBuildError(f"weights larger than {MAX_WEIGHTS} bytes: this exporter holds them in memory")
    from trtls.checkpoint.sniff import safetensors_problems

    weights: dict[str, Any] = {}
    for rel in shards:
        problems = safetensors_problems(state.real[rel])  # before the loader, which raises on a lying header
        if problems:
            raise RouteBuildError(
                "safetensors header does not describe its bytes: " + "; ".join(problems), ("checkpoint", "path")
            )
        try:
            tensors = load(read_verified(state, rel, MAX_WEIGHTS))
        except Exception as exc:  # safetensors' own SafetensorError on anything the header check did not foresee
            raise RouteBuildError(f"{rel}: the safetensors loader refused it: {exc}", ("checkpoint", "path")) from None
        for name, arr in tensors.items():
            if name in weights:
                raise RouteBuildError(f"tensor {name!r} appears in two weight shards")
            weights[name] = arr
    return weights


def export_mlp(weights: Mapping[str, Any], config: Mapping[str, Any]) -> Any:
    """`input [batch, d_in] → fc1 → Relu → … → fcN → logits [batch, d_out]` (Gemm, transB=1), opset 17."""
    import numpy as np
    from onnx import TensorProto, checker, helper, numpy_helper

    n = 0
    while f"fc{n + 1}.weight" in weights:
        n += 1
    if n == 0:
        raise RouteBuildError("mlp exporter: no fc1.weight tensor")
    inits, nodes = [], []
    x, width = "input", None
    dtype = weights["fc1.weight"].dtype
    onnx_type = {np.dtype("float32"): TensorProto.FLOAT, np.dtype("float16"): TensorProto.FLOAT16}.get(np.dtype(dtype))
    if onnx_type is None:
        raise RouteBuildError(f"mlp exporter: weights of dtype {dtype} are not supported (float32, float16)")
    for i in range(1, n + 1):
        w, b = weights[f"fc{i}.weight"], weights.get(f"fc{i}.bias")
        if (
            w.ndim != 2
            or w.dtype != dtype
            or (width is not None and w.shape[1] != width)
            or (b is not None and b.shape != (w.shape[0],))
        ):
            raise RouteBuildError(
                f"mlp exporter: fc{i} has shape {w.shape} (bias {None if b is None else b.shape}), which does not chain"
            )
        names = [x, f"fc{i}.weight"] + ([f"fc{i}.bias"] if b is not None else [])
        inits += [numpy_helper.from_array(np.ascontiguousarray(w), f"fc{i}.weight")]
        if b is not None:
            inits.append(numpy_helper.from_array(np.ascontiguousarray(b), f"fc{i}.bias"))
        out = "logits" if i == n else ("h" if i == 1 else f"h{i}")  # layer 1 named as samples/route/make_onnx.py
        nodes.append(helper.make_node("Gemm", names, [out], transB=1, name=f"fc{i}"))
        if i < n:
            nodes.append(helper.make_node("Relu", [out], [f"{out}_relu"], name="relu" if i == 1 else f"relu{i}"))
            out = f"{out}_relu"
        x, width = out, w.shape[0]
    d_in = weights["fc1.weight"].shape[1]
    graph = helper.make_graph(
        nodes,
        str(config.get("model_type") or "mlp").replace("-", "_"),
        [helper.make_tensor_value_info("input", onnx_type, ["batch", d_in])],
        [helper.make_tensor_value_info("logits", onnx_type, ["batch", width])],
        inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17)],
        producer_name="trtls-sample" if config.get("model_type") == "tiny-mlp" else "trtls",
    )
    model.ir_version = 8
    checker.check_model(model)
    return model


# model_type (config.json) → exporter(weights, config) -> onnx.ModelProto
def export_bert_encoder(
    weights: Mapping[str, Any], config: Mapping[str, Any], pooling: PoolingSpec | None = None
) -> Any:
    """A Hugging Face BERT encoder (`route.bert_export`): input_ids, attention_mask → last_hidden_state, and the
    sentence-transformers `sentence_embedding` when the checkpoint declares a pooling (`route.pooling`)."""
    from trtls.route.bert_export import BertExportError, export_bert

    if pooling is not None and pooling.dimension is not None and pooling.dimension != config.get("hidden_size"):
        raise RouteBuildError(
            f"{pooling.config_path}: word_embedding_dimension {pooling.dimension} is not config.json's hidden_size "
            f"{config.get('hidden_size')}",
            ("checkpoint", "path"),
        )
    try:
        if pooling is None:
            return export_bert(weights, config)
        return export_bert(weights, config, pooling=pooling.mode, normalize=pooling.normalize)
    except BertExportError as exc:
        raise RouteBuildError(str(exc), ("checkpoint",)) from None


EXPORTERS: dict[str, Callable[..., Any]] = {
    "tiny-mlp": export_mlp,
    "mlp": export_mlp,
    "bert": export_bert_encoder,
}


POOLING_EXPORTERS = ("bert",)  # the model types whose exporter writes a sentence-transformers pooling


def export_onnx(
    state: CheckpointState, config: Mapping[str, Any], pooling: PoolingSpec | None = None, *, trtmc: bool = False
) -> bytes:
    """The checkpoint exported to ONNX, as bytes (`route.writes.write_export` puts them on disk by the export rule).
    `pooling` (`route.pooling.sentence_pooling`): the sentence-transformers pooling to add as `sentence_embedding`.
    `trtmc`: the engine I/O TensorRT Model Connect's runtime feeds and reads (`route.trtmc_export`; no pooling)."""
    if trtmc:
        from trtls.route.trtmc_export import adapt_for_trtmc

        model = EXPORTERS["bert"](_load_weights(state), config)
        return bytes(adapt_for_trtmc(model).SerializeToString())
    model_type = config.get("model_type")
    exporter = EXPORTERS.get(str(model_type))
    if exporter is None:
        raise RouteBuildError(
            f"no ONNX exporter for model_type {model_type!r} (known: {', '.join(EXPORTERS)})", ("checkpoint",)
        )
    if pooling is not None and str(model_type) not in POOLING_EXPORTERS:
        raise RouteBuildError(
            f"modules.json declares a sentence-transformers pooling; the {model_type!r} exporter does not write one "
            f"({', '.join(POOLING_EXPORTERS)} do)",
            ("checkpoint",),
        )
    weights = _load_weights(state)
    model = exporter(weights, config) if pooling is None else exporter(weights, config, pooling)
    return bytes(model.SerializeToString())


def onnx_io_map(model_bytes: bytes, engine: EngineRecipe | None) -> tuple[dict[str, Any], str]:
    """Inputs/outputs (name, dtype, shape, profile) of the ONNX, and its precision (from the initializers)."""
    import onnx
    from onnx import helper

    model = onnx.load_from_string(model_bytes)

    def value(v: Any) -> dict[str, Any]:
        t = v.type.tensor_type
        return {
            "dtype": helper.tensor_dtype_to_np_dtype(t.elem_type).name,
            "shape": [d.dim_param or d.dim_value for d in t.shape.dim],
        }

    init = {i.name for i in model.graph.initializer}
    # Each input's shapes in every profile, in profile order; "profile" (the first) stays for older readers.
    profiles: dict[str, list[dict[str, Any]]] = {}
    for prof in engine.profiles if engine is not None else []:
        for name, shapes in prof.shapes().items():
            profiles.setdefault(name, []).append(shapes.model_dump())
    inputs = {
        v.name: dict(
            value(v), **({"profile": profiles[v.name][0], "profiles": profiles[v.name]} if v.name in profiles else {})
        )
        for v in model.graph.input
        if v.name not in init
    }
    outputs = {v.name: value(v) for v in model.graph.output}
    kinds = {helper.tensor_dtype_to_np_dtype(i.data_type).name for i in model.graph.initializer}
    precision = (
        "+".join(
            sorted({"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "int8": "int8"}.get(k, k) for k in kinds)
        )
        or "fp32"
    )
    return {"inputs": inputs, "outputs": outputs}, precision


# TensorRT's DataType names (the build summary's `network`) → the numpy names io_map uses
_TRT_DTYPES = {
    "FLOAT": "float32",
    "HALF": "float16",
    "BF16": "bfloat16",
    "INT32": "int32",
    "INT64": "int64",
    "INT8": "int8",
    "BOOL": "bool",
    "UINT8": "uint8",
    "FP8": "float8",
    "INT4": "int4",
}


def engine_io(io_map: dict[str, Any], summary: Summary) -> None:
    """Make `io_map` the engine's I/O as the build recorded it (in place): each input's and output's dtype as the
    parsed network had it (TensorRT's engine keeps them) and each input's profiles as the builder config held them
    (read back by the worker). `io_map["source"]` says where each fact came from."""
    network = summary.network
    held = [p for p in summary.optimizationProfiles or [] if isinstance(p, dict)]
    for side in ("inputs", "outputs"):
        declared = (network.inputs if side == "inputs" else network.outputs) if network else None
        types: dict[str, Any] = declared or {}
        for name, entry in io_map.get(side, {}).items():
            if name in types:
                entry["dtype"] = _TRT_DTYPES.get(str(types[name]), str(types[name]).lower())
            if side == "inputs" and held:
                shapes = [p["inputs"][name] for p in held if isinstance(p.get("inputs"), dict) and name in p["inputs"]]
                if shapes:
                    entry["profile"], entry["profiles"] = shapes[0], shapes
    io_map["source"] = {
        "names_and_shapes": "the ONNX the engine was built from",
        "dtypes": "the build's parsed network" if network else "the ONNX the engine was built from",
        "profiles": "the build's builder config" if held else "the engine recipe",
    }
