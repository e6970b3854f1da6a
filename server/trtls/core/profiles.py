"""Optimization profiles: the shapes each dynamic input of a network accepts (min/opt/max), one TensorRT profile per
entry (the recipe's `[[engines.X.profiles]]`, and a matrix cell's profile variants)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from trtls.core.findings import Finding, Origin, Severity, TomlPath
from trtls.core.validation import RECIPE_TABLE


class _Model(BaseModel):
    model_config = RECIPE_TABLE


class InputShapes(_Model):
    """The shapes one input accepts within one optimization profile."""

    min: list[int] = Field(description="Smallest shape the engine accepts.")
    opt: list[int] = Field(description="Shape the tactics are tuned for.")
    max: list[int] = Field(description="Largest shape the engine accepts.")


SHAPE_KEYS = ("min", "opt", "max")
# The largest dimension a profile may give. TensorRT's IOptimizationProfile::setDimensions checks every dimension as a
# 32-bit integer (`int32_t x >= 0`; TensorRT-RTX 1.x too, though its Dims are 64-bit): 2147483648 fails the build,
# and a larger value passes only when its low 32 bits happen to read positive (4294967304 builds, as 8 would pass the
# check). 2147483647 builds (tests/core/test_profile_dimension_limit.py).
MAX_DIM = 2**31 - 1


class OptimizationProfile(_Model):
    """One TensorRT optimization profile: min/opt/max for every dynamic input of the network.

    Written either as `inputs.NAME = { min = [...], opt = [...], max = [...] }` for each input (or a
    `[engines.X.profiles.inputs.NAME]` sub-table), or — for a network with one dynamic input — with the
    shorthand `input`, `min`, `opt`, `max`. Several `[[engines.X.profiles]]` entries give several
    profiles (e.g. a small-batch and a large-batch one); the engine gets one TensorRT profile per entry.
    """

    inputs: dict[str, InputShapes] | None = Field(
        None, description="min/opt/max for every dynamic input, keyed by the ONNX input name."
    )
    input: str | None = Field(None, description="Shorthand for a one-input profile: the network input name.")
    min: list[int] | None = Field(None, description="Shorthand: smallest shape the engine accepts.")
    opt: list[int] | None = Field(None, description="Shorthand: shape the tactics are tuned for.")
    max: list[int] | None = Field(None, description="Shorthand: largest shape the engine accepts.")

    @property
    def is_shorthand(self) -> bool:
        return self.inputs is None

    def shapes(self) -> dict[str, InputShapes]:
        """Every input of this profile with its shapes (the shorthand as a one-entry dict)."""
        if self.inputs is not None:
            return dict(self.inputs)
        if self.input is None or self.min is None or self.opt is None or self.max is None:
            return {}  # reported by the semantic checks; a loaded recipe never has this
        return {self.input: InputShapes(min=self.min, opt=self.opt, max=self.max)}

    def shape_path(self, index: int, name: str) -> TomlPath:
        """The TOML path of the table holding `name`'s min/opt/max (for located findings)."""
        if self.inputs is None:
            return ("profiles", index)
        return ("profiles", index, "inputs", name)

    def job(self) -> dict[str, Any]:
        """What the worker gets: one TensorRT profile with every input (docs/protocol.md)."""
        return {"inputs": [{"input": name, **s.model_dump()} for name, s in self.shapes().items()]}


def _finding(message: str, path: TomlPath, on_value: bool = True, code: str = "TRT105", **data: Any) -> Finding:
    return Finding(code, Severity.error, message, tuple(path), Origin.recipe, on_value, data)


def profile_findings(prof: OptimizationProfile, ppath: TomlPath) -> list[Finding]:
    """What a schema cannot say about one profile (an engine's, or a matrix variant's): one profile is either
    `inputs.NAME = {min, opt, max}` or the one-input shorthand, never both; and its shapes (`shape_findings`)."""
    shorthand = {k: getattr(prof, k) for k in ("input", *SHAPE_KEYS) if getattr(prof, k) is not None}
    if prof.inputs is not None:
        out = [
            _finding(f"'{k}' belongs to the one-input shorthand; put it under inputs.NAME", ppath + (k,), False)
            for k in shorthand
        ]
        if not prof.inputs:
            out.append(_finding("profile has no inputs", ppath + ("inputs",)))
        for name, shapes in prof.inputs.items():
            out.extend(shape_findings(shapes, ppath + ("inputs", name)))
        return out
    missing = [k for k in ("input", *SHAPE_KEYS) if k not in shorthand]
    if len(missing) == 4:
        return [
            _finding("profile needs 'inputs' (or the shorthand 'input', 'min', 'opt', 'max')", ppath, False, "TRT103")
        ]
    if missing:
        return [_finding(f"missing required key '{k}'", ppath + (k,), False, "TRT103", key=k) for k in missing]
    return shape_findings(InputShapes(min=prof.min, opt=prof.opt, max=prof.max), ppath)


def shape_findings(prof: InputShapes, ppath: TomlPath) -> list[Finding]:
    """Non-empty shapes, every dimension 1..MAX_DIM, one rank, min ≤ opt ≤ max (TRT105, on the offending value)."""
    out: list[Finding] = []
    shapes = {"min": prof.min, "opt": prof.opt, "max": prof.max}
    for key, shape in shapes.items():
        if not shape:
            out.append(_finding(f"'{key}' shape is empty", ppath + (key,)))
        for j, dim in enumerate(shape):
            if dim <= 0:
                out.append(_finding(f"'{key}' dimension {j} must be ≥ 1, got {dim}", ppath + (key, j)))
            elif dim > MAX_DIM:
                why = "a TensorRT profile dimension is a 32-bit integer"
                out.append(_finding(f"'{key}' dimension {j} must be ≤ {MAX_DIM} ({why}), got {dim}", ppath + (key, j)))
    if len({len(s) for s in shapes.values()}) > 1:
        ranks = ", ".join(f"{k}={len(v)}" for k, v in shapes.items())
        out.append(_finding(f"min/opt/max must have the same rank ({ranks})", ppath, False))
        return out
    for j, (lo, mid, hi) in enumerate(zip(prof.min, prof.opt, prof.max, strict=True)):  # ranks checked above
        if not lo <= mid <= hi:
            out.append(_finding(f"dimension {j}: need min ≤ opt ≤ max, got {lo}, {mid}, {hi}", ppath + ("opt", j)))
    return out
