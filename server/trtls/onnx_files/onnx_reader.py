"""The graph inputs of an ONNX model, read from the protobuf wire format without loading its weights.

`onnx.load` parses every initializer into memory (and follows external data): seconds and gigabytes for a
500 MB model, far too slow to run while someone types. What the recipe checks need is small — the graph's
inputs (name, element type, dims) and, to tell real inputs from weights that old exporters also list as
inputs, the initializers' names — so this module walks the wire format over an mmap and *skips* every
length-delimited field it does not need (nodes, tensor bytes) by its length, touching only the pages that
hold the headers. It also collects what the initializers say about external data, so a missing or short
data file is reported before TensorRT's parser fails on it.

Wire format (https://protobuf.dev/programming-guides/encoding/): each field is a varint tag
`(number << 3) | wire_type`, then a varint (0), 8 bytes (1), a varint length and that many bytes (2), or
4 bytes (5). Field numbers are those of onnx/onnx.proto3 (ModelProto.graph = 7, GraphProto.input = 11 …).
Anything that does not follow the format — a wrong wire type, a length past the end of the file — means the
file is not an ONNX model (or is truncated), and is reported as such with the offset.
"""

from __future__ import annotations

import mmap
import os
from dataclasses import dataclass, field
from pathlib import Path

# onnx.proto3 field numbers
_MODEL_IR_VERSION, _MODEL_GRAPH, _MODEL_OPSET = 1, 7, 8
_GRAPH_NODE, _GRAPH_INITIALIZER, _GRAPH_INPUT, _GRAPH_SPARSE_INITIALIZER = 1, 5, 11, 15
_VALUE_NAME, _VALUE_TYPE = 1, 2
_TYPE_TENSOR = 1
_TENSOR_TYPE_ELEM, _TENSOR_TYPE_SHAPE = 1, 2
_SHAPE_DIM = 1
_DIM_VALUE, _DIM_PARAM = 1, 2
_TENSOR_NAME, _TENSOR_EXTERNAL_DATA, _TENSOR_DATA_LOCATION = 8, 13, 14
_SPARSE_VALUES = 1
_ENTRY_KEY, _ENTRY_VALUE = 1, 2
_OPSET_DOMAIN, _OPSET_VERSION = 1, 2

# TensorProto.DataType
DTYPES = {
    1: "float32",
    2: "uint8",
    3: "int8",
    4: "uint16",
    5: "int16",
    6: "int32",
    7: "int64",
    8: "string",
    9: "bool",
    10: "float16",
    11: "float64",
    12: "uint32",
    13: "uint64",
    14: "complex64",
    15: "complex128",
    16: "bfloat16",
    17: "float8e4m3fn",
    18: "float8e4m3fnuz",
    19: "float8e5m2",
    20: "float8e5m2fnuz",
    21: "uint4",
    22: "int4",
    23: "float4e2m1",
    24: "float8e8m0",
}


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
class ExternalData:
    tensor: str
    location: str  # relative to the model's folder
    offset: int
    length: int | None


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
        """Missing or too-short external data files (what TensorRT's parser would fail on, said plainly)."""
        base = self.path.parent
        problems: list[str] = []
        needed: dict[str, tuple[int, str]] = {}
        for ext in self.external:
            end = ext.offset + (ext.length or 0)
            if ext.location not in needed or end > needed[ext.location][0]:
                needed[ext.location] = (end, ext.tensor)
        for location, (end, tensor) in needed.items():
            target = (base / location).resolve()
            if Path(location).is_absolute() or ".." in Path(location).parts:
                problems.append(f"external data location {location!r} (tensor {tensor!r}) leaves the model's folder")
            elif not target.is_file():
                problems.append(f"external data file {target} missing (tensor {tensor!r} and others read from it)")
            elif target.stat().st_size < end:
                problems.append(
                    f"external data file {target} is {target.stat().st_size} bytes; tensor {tensor!r} needs {end}"
                )
        return problems


@dataclass
class _Reader:
    buf: mmap.mmap | bytes
    path: str
    external: list[ExternalData] = field(default_factory=list)

    def varint(self, pos: int, end: int) -> tuple[int, int]:
        result = shift = 0
        buf = self.buf
        while True:
            if pos >= end:
                raise NotOnnx(f"truncated varint at byte {pos}")
            b = buf[pos]
            pos += 1
            result |= (b & 0x7F) << shift
            if b < 0x80:
                return result, pos
            shift += 7
            if shift > 63:
                raise NotOnnx(f"varint longer than 10 bytes at byte {pos}")

    def fields(self, pos: int, end: int):
        """Yield (field number, wire type, value or (start, stop) for length-delimited) over [pos, end)."""
        while pos < end:
            tag, pos = self.varint(pos, end)
            number, wire = tag >> 3, tag & 7
            if number == 0:
                raise NotOnnx(f"field number 0 at byte {pos}")
            if wire == 0:
                value, pos = self.varint(pos, end)
                yield number, wire, value
            elif wire == 2:
                length, pos = self.varint(pos, end)
                if pos + length > end:
                    raise NotOnnx(
                        f"field {number} at byte {pos} needs {length} bytes but its message ends at byte {end}"
                        + (" (the file is truncated)" if end == len(self.buf) else "")
                    )
                yield number, wire, (pos, pos + length)
                pos += length
            elif wire == 1:
                if pos + 8 > end:
                    raise NotOnnx(f"truncated 8-byte field {number} at byte {pos}")
                pos += 8
            elif wire == 5:
                if pos + 4 > end:
                    raise NotOnnx(f"truncated 4-byte field {number} at byte {pos}")
                pos += 4
            else:
                raise NotOnnx(f"wire type {wire} (field {number}) at byte {pos} is not protobuf")

    def text(self, span: tuple[int, int]) -> str:
        try:
            return bytes(self.buf[span[0] : span[1]]).decode("utf-8")
        except UnicodeDecodeError:
            raise NotOnnx(f"a name at byte {span[0]} is not UTF-8") from None

    # -- messages ---------------------------------------------------------------------------------
    def model(self) -> tuple[int | None, dict[str, int], list[GraphInput], set[str], int]:
        ir_version: int | None = None
        opsets: dict[str, int] = {}
        graph: tuple[int, int] | None = None
        for number, wire, value in self.fields(0, len(self.buf)):
            if number == _MODEL_IR_VERSION and wire == 0:
                ir_version = value
            elif number == _MODEL_GRAPH and wire == 2:
                graph = value
            elif number == _MODEL_OPSET and wire == 2:
                domain, version = self.opset(value)
                opsets[domain] = version
            elif number in (_MODEL_IR_VERSION, _MODEL_GRAPH, _MODEL_OPSET):
                raise NotOnnx(f"ModelProto field {number} has wire type {wire}")
        if ir_version is None or graph is None:
            missing = " and ".join(n for n, v in (("ir_version", ir_version), ("graph", graph)) if v is None)
            raise NotOnnx(f"no {missing} (an ONNX ModelProto has both)")
        inputs, initializers, count = self.graph(graph)
        return ir_version, opsets, inputs, initializers, count

    def opset(self, span: tuple[int, int]) -> tuple[str, int]:
        domain, version = "", 0
        for number, wire, value in self.fields(*span):
            if number == _OPSET_DOMAIN and wire == 2:
                domain = self.text(value)
            elif number == _OPSET_VERSION and wire == 0:
                version = value
        return domain or "ai.onnx", version

    def graph(self, span: tuple[int, int]) -> tuple[list[GraphInput], set[str], int]:
        inputs: list[GraphInput] = []
        initializers: set[str] = set()
        count = 0
        for number, wire, value in self.fields(*span):
            if wire != 2:
                continue
            if number == _GRAPH_INPUT:
                inputs.append(self.value_info(value))
            elif number == _GRAPH_INITIALIZER:
                initializers.add(self.tensor(value))
                count += 1
            elif number == _GRAPH_SPARSE_INITIALIZER:
                for n, w, v in self.fields(*value):
                    if n == _SPARSE_VALUES and w == 2:
                        initializers.add(self.tensor(v))
                count += 1
        return inputs, initializers, count

    def tensor(self, span: tuple[int, int]) -> str:
        """A TensorProto's name and external-data record; its data fields are skipped by length."""
        name = ""
        entries: dict[str, str] = {}
        location = 0
        for number, wire, value in self.fields(*span):
            if number == _TENSOR_NAME and wire == 2:
                name = self.text(value)
            elif number == _TENSOR_EXTERNAL_DATA and wire == 2:
                key = val = ""
                for n, w, v in self.fields(*value):
                    if n == _ENTRY_KEY and w == 2:
                        key = self.text(v)
                    elif n == _ENTRY_VALUE and w == 2:
                        val = self.text(v)
                entries[key] = val
            elif number == _TENSOR_DATA_LOCATION and wire == 0:
                location = value
        if location == 1:  # TensorProto.EXTERNAL
            if "location" not in entries:
                raise NotOnnx(f"tensor {name!r} says its data is external but names no location")
            try:
                offset = int(entries.get("offset", "0"))
                length = int(entries["length"]) if "length" in entries else None
            except ValueError:
                raise NotOnnx(f"tensor {name!r}: external data offset/length are not integers") from None
            self.external.append(ExternalData(name, entries["location"], offset, length))
        return name

    def value_info(self, span: tuple[int, int]) -> GraphInput:
        name = ""
        dtype = "non-tensor"
        dims: tuple[Dim, ...] | None = None
        for number, wire, value in self.fields(*span):
            if number == _VALUE_NAME and wire == 2:
                name = self.text(value)
            elif number == _VALUE_TYPE and wire == 2:
                for n, w, v in self.fields(*value):
                    if n == _TYPE_TENSOR and w == 2:
                        dtype, dims = self.tensor_type(v)
        return GraphInput(name, dtype, dims)

    def tensor_type(self, span: tuple[int, int]) -> tuple[str, tuple[Dim, ...] | None]:
        elem = 0
        dims: tuple[Dim, ...] | None = None
        for number, wire, value in self.fields(*span):
            if number == _TENSOR_TYPE_ELEM and wire == 0:
                elem = value
            elif number == _TENSOR_TYPE_SHAPE and wire == 2:
                dims = tuple(self.dim(v) for n, w, v in self.fields(*value) if n == _SHAPE_DIM and w == 2)
        return DTYPES.get(elem, f"elem_type {elem}"), dims

    def dim(self, span: tuple[int, int]) -> Dim:
        value: int | None = None
        param: str | None = None
        for number, wire, v in self.fields(*span):
            if number == _DIM_VALUE and wire == 0:
                value = v - (1 << 64) if v >= 1 << 63 else v
            elif number == _DIM_PARAM and wire == 2:
                param = self.text(v)
        if value is not None and value < 0:
            value = None  # -1 written as a value: dynamic
        return Dim(value, param or None)


def read_model_inputs(path: Path | str) -> ModelInputs:
    """Read an ONNX file's inputs. Raises NotOnnx (with where and why) or OSError."""
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as fh:
        if size == 0:
            raise NotOnnx("the file is empty")
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            if hasattr(mmap, "MADV_RANDOM"):  # we jump over weights: no read-ahead of pages we skip
                buf.madvise(mmap.MADV_RANDOM)
            reader = _Reader(buf, str(path))
            ir_version, opsets, inputs, initializers, count = reader.model()
            external = tuple(reader.external)
    real = tuple(i for i in inputs if i.name not in initializers)
    return ModelInputs(path, size, ir_version, opsets, real, external, count)


class ModelInputsCache:
    """Read results keyed by (path, size, mtime): re-reading on every keystroke would cost a file walk."""

    def __init__(self, capacity: int = 64) -> None:
        self.capacity = capacity
        self._entries: dict[tuple[str, int, int], ModelInputs | NotOnnx | OSError] = {}
        self.reads = 0  # how many times a file was actually read (tests and benchmarks look)

    def get(self, path: Path | str) -> ModelInputs:
        """The model's inputs; raises NotOnnx or OSError like read_model_inputs (errors are cached too)."""
        p = Path(path)
        st = os.stat(p)
        key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
        hit = self._entries.get(key)
        if hit is None:
            self.reads += 1
            try:
                hit = read_model_inputs(p)
            except (NotOnnx, OSError) as exc:
                hit = exc
            if len(self._entries) >= self.capacity:
                self._entries.pop(next(iter(self._entries)))
            self._entries[key] = hit
        if isinstance(hit, BaseException):
            raise hit
        return hit


CACHE = ModelInputsCache()
