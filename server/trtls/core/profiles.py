"""Optimization profiles: the shapes each dynamic input of a network accepts (min/opt/max), one TensorRT profile per
entry (the recipe's `[[engines.X.profiles]]`, and a matrix cell's profile variants)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from trtls.core.findings import TomlPath


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class InputShapes(_Model):
    """The shapes one input accepts within one optimization profile."""

    min: list[int] = Field(description="Smallest shape the engine accepts.")
    opt: list[int] = Field(description="Shape the tactics are tuned for.")
    max: list[int] = Field(description="Largest shape the engine accepts.")


SHAPE_KEYS = ("min", "opt", "max")


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
