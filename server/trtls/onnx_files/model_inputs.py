"""What the wire-format reader (`onnx_reader`) tells about one ONNX file: its graph inputs (name, element type,
dims) and the external data its tensors name, with the checks the recipe needs on them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from trtls.onnx_files.external_data import ExternalData, external_problems

_DTYPE_NAMES = """float32 uint8 int8 uint16 int16 int32 int64 string bool float16 float64 uint32 uint64 complex64
complex128 bfloat16 float8e4m3fn float8e4m3fnuz float8e5m2 float8e5m2fnuz uint4 int4 float4e2m1 float8e8m0"""
DTYPES = dict(enumerate(_DTYPE_NAMES.split(), 1))  # TensorProto.DataType: FLOAT = 1, UINT8 = 2, …


class NotOnnx(ValueError):
    """The bytes do not follow the ONNX protobuf layout (or stop early); the message says where."""


@dataclass(frozen=True)
class Dim:
    value: int | None = None  # a static size
    param: str | None = None  # a symbolic name (e.g. "batch"); None and no value: unnamed dynamic

    @property
    def is_static(self) -> bool:
        return self.value is not None and self.value >= 0

    def __str__(self) -> str:
        if self.is_static:
            return str(self.value)
        return self.param or "?"


@dataclass(frozen=True)
class GraphInput:
    name: str
    dtype: str  # "int64", "float32", … or "elem_type N" for one this table does not know, "non-tensor"
    dims: tuple[Dim, ...] | None  # None: the model declares no shape (rank unknown)

    @property
    def rank(self) -> int | None:
        return None if self.dims is None else len(self.dims)

    @property
    def is_dynamic(self) -> bool:
        """Needs shapes in every optimization profile (TensorRT: any -1 dimension, or an unknown rank)."""
        return self.dims is None or any(not d.is_static for d in self.dims)

    def shape_text(self) -> str:
        return "[?]" if self.dims is None else "[" + ", ".join(str(d) for d in self.dims) + "]"


@dataclass(frozen=True)
class ModelInputs:
    """What the recipe checks need to know about one ONNX file."""

    path: Path
    size: int
    ir_version: int | None
    opsets: dict[str, int]
    inputs: tuple[GraphInput, ...]  # real inputs only (initializers listed as inputs are left out)
    external: tuple[ExternalData, ...] = ()
    initializer_count: int = 0

    def input(self, name: str) -> GraphInput | None:
        return next((i for i in self.inputs if i.name == name), None)

    @property
    def names(self) -> list[str]:
        return [i.name for i in self.inputs]

    def external_problems(self) -> list[str]:
        """Missing, unreadable, out-of-tree or too-short external data files, each naming the tensor that reads
        it (what TensorRT's parser would fail on, said plainly)."""
        return external_problems(self.path, self.external)
