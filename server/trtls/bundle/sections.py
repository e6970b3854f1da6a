"""Which bundle section holds the engine: trtls's names (`engine`, `model.engine`, `engine.plan`) and TensorRT Model
Connect's (`engine_plan`, `prefill_engine_plan`, `vision_engine_plan`, `engine_plan_tp_rank{N}`, one per
tensor-parallel rank). One list, read by gate 3 (what the bundle carries), gates 4–5 (what they extract and run) and
the rollback drill."""

from __future__ import annotations

import re
from collections.abc import Iterable

ENGINE_SECTIONS: tuple[str, ...] = (
    "engine",
    "model.engine",
    "engine.plan",
    "engine_plan",
    "prefill_engine_plan",
    "vision_engine_plan",
)
TP_RANK_SECTION = re.compile(r"^engine_plan_tp_rank(\d+)$")


def is_engine_section(name: str) -> bool:
    return name in ENGINE_SECTIONS or TP_RANK_SECTION.match(name) is not None


def engine_section(names: Iterable[str]) -> str | None:
    """The engine section of a bundle with these sections: the first of ENGINE_SECTIONS present, else rank 0 of a
    tensor-parallel set (the lowest rank); None when there is none."""
    present = list(names)
    first = next((n for n in ENGINE_SECTIONS if n in present), None)
    if first is not None:
        return first
    ranks = sorted((int(m.group(1)), n) for n in present if (m := TP_RANK_SECTION.match(n)))
    return ranks[0][1] if ranks else None
