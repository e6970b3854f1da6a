"""The BERT export adapted to the engine I/O TensorRT Model Connect's runtime feeds and reads (`bundle.trtmc_contract`):
`input_ids` and `attention_mask` int32 `[sequence]` (no batch axis), one output `hidden_states` float32
`[sequence, hidden]`, as TRTMC's own BERT builder makes them (families/bert/model.py:482-483, :599).

The encoder graph itself is `route.bert_export`'s, unchanged: the adapter casts the int32 ids to int64 and adds the
batch axis in front of it (Cast, Unsqueeze), and takes batch row 0 of `last_hidden_state` behind it (Squeeze). No
`sentence_embedding`: TRTMC's `bert_encoder_only` pipeline serves the token states (it runs in `encoder_only` mode,
runtime/models/bert/plugin.cpp:64, and pools nothing), and a second output its name rule matches would make the one it
serves unspecified (pipeline.cpp:146)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from trtls.bundle.trtmc_contract import FED_INPUTS, OUTPUT_NAME
from trtls.core.recipe import EngineRecipe
from trtls.route.errors import RouteBuildError

ENCODER_OUTPUT = "last_hidden_state"


def profile_problems(engine: EngineRecipe) -> list[str]:
    """Why the engine recipe's profiles do not fit TRTMC's feed: each input rank 1, min 1 (pipeline.cpp:117-124)."""
    problems = []
    if not engine.profiles:
        problems.append("the engine has no profile; TRTMC feeds [n] for any n from 1 up to the profile's max")
    for i, prof in enumerate(engine.profiles):
        shapes = prof.shapes()
        for name in FED_INPUTS:
            s = shapes.get(name)
            if s is None:
                problems.append(f"profile {i} has no shapes for {name}")
                continue
            dims: Sequence[Sequence[int]] = (s.min, s.opt, s.max)
            if any(len(d) != 1 for d in dims):
                problems.append(
                    f"profile {i} gives {name} min {list(s.min)}, max {list(s.max)}: TRTMC feeds rank 1 [n], "
                    f"e.g. {{ min = [1], opt = [64], max = [{s.max[-1] if s.max else 128}] }}"
                )
            elif s.min[0] != 1:
                problems.append(f"profile {i} starts {name} at {s.min[0]} tokens; TRTMC feeds any length from 1")
    return problems


def check_profiles(engine: EngineRecipe, engine_name: str) -> None:
    problems = profile_problems(engine)
    if problems:
        raise RouteBuildError(
            f'bundle_format = "trtmc": [engines.{engine_name}.profiles] do not fit the shapes TensorRT Model '
            "Connect's BERT runtime feeds: " + "; ".join(problems),
            ("bundle_format",),
        )


def adapt_for_trtmc(model: Any) -> Any:
    """The encoder `model` (inputs int64 [batch, sequence], output last_hidden_state) with TRTMC's I/O around it."""
    import numpy as np
    from onnx import TensorProto, checker, helper, numpy_helper

    graph = model.graph
    batched = {name: f"{name}_batch" for name in FED_INPUTS}
    for node in graph.node:
        node.input[:] = [batched.get(i, i) for i in node.input]
        node.output[:] = [f"{ENCODER_OUTPUT}_batch" if o == ENCODER_OUTPUT else o for o in node.output]
    graph.initializer.append(numpy_helper.from_array(np.array([0], dtype=np.int64), "trtmc_axis0"))
    front = []
    for name in FED_INPUTS:
        front.append(helper.make_node("Cast", [name], [f"{name}_i64"], to=TensorProto.INT64, name=f"trtmc_{name}_cast"))
        front.append(
            helper.make_node("Unsqueeze", [f"{name}_i64", "trtmc_axis0"], [batched[name]], name=f"trtmc_{name}")
        )
    nodes = front + list(graph.node)
    nodes.append(
        helper.make_node("Squeeze", [f"{ENCODER_OUTPUT}_batch", "trtmc_axis0"], [OUTPUT_NAME], name="trtmc_out")
    )
    hidden = next((o.type.tensor_type.shape.dim[-1].dim_value for o in graph.output if o.name == ENCODER_OUTPUT), 0)
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.input[:]
    graph.input.extend(helper.make_tensor_value_info(n, TensorProto.INT32, ["sequence"]) for n in FED_INPUTS)
    del graph.output[:]
    graph.output.append(helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, ["sequence", hidden]))
    checker.check_model(model)
    return model
