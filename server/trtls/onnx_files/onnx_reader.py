"""The graph inputs of an ONNX model, read from the protobuf wire format without loading its weights.

`onnx.load` parses every initializer into memory (and follows external data): seconds and gigabytes for a
500 MB model, far too slow to run while someone types. What the recipe checks need is small — the graph's
inputs (name, element type, dims) and, to tell real inputs from weights that old exporters also list as
inputs, the initializers' names — so this module walks the wire format over an mmap and *skips* every
length-delimited field it does not need (nodes, tensor bytes) by its length, touching only the pages that
hold the headers. It also collects what every tensor the model can reference says about external data —
initializers, sparse initializers and tensor attributes (a Constant's `value`), in the top graph, in every
subgraph (If/Loop/Scan bodies, recursively) and in every local function — so the engine key covers every external
byte and a missing or short data file is reported, located, before TensorRT's parser fails on it. Nodes are
walked for that; the tensors' bytes are still skipped by their length.

The wire format is read by `protobuf_wire` (field numbers here are those of onnx/onnx.proto3: ModelProto.graph = 7,
GraphProto.input = 11 …) as protobuf reads it, not as onnx happens to write it: a singular message field written more
than once (a second `graph`, a Constant's `value` in two parts) is read over all its parts (`Spans`), never the last
one alone, and the byte filters that skip nodes and attributes with no tensor know a tag's long form. A reader that
saw less than the parser would leave external data out of the engine key, and the store would serve a stale engine.
"""

from __future__ import annotations

import mmap
import os
import threading
from pathlib import Path

from trtls.fs import open_regular
from trtls.onnx_files.external_data import READER_VERSION, ExternalData
from trtls.onnx_files.model_inputs import DTYPES, Dim, GraphInput, ModelInputs, NotOnnx
from trtls.onnx_files.protobuf_wire import Spans, WireReader, first_bytes

__all__ = [
    "DTYPES",
    "READER_VERSION",
    "Dim",
    "ExternalData",
    "GraphInput",
    "ModelInputs",
    "ModelInputsCache",
    "NotOnnx",
    "read_model_inputs",
]

# onnx.proto3 field numbers
_MODEL_IR_VERSION, _MODEL_GRAPH, _MODEL_OPSET, _MODEL_FUNCTIONS = 1, 7, 8, 25
_GRAPH_NODE, _GRAPH_INITIALIZER, _GRAPH_INPUT, _GRAPH_SPARSE_INITIALIZER = 1, 5, 11, 15
_FUNCTION_NAME, _FUNCTION_NODE = 1, 7
_NODE_NAME, _NODE_OP_TYPE, _NODE_ATTRIBUTE = 3, 4, 5
# AttributeProto: name, and the fields that hold tensors or graphs (types TENSOR, GRAPH, TENSORS, GRAPHS, SPARSE…)
_ATTR_NAME, _ATTR_T, _ATTR_G, _ATTR_TENSORS, _ATTR_GRAPHS, _ATTR_SPARSE, _ATTR_SPARSES = 1, 5, 6, 10, 11, 22, 23
_ATTR_HOLDERS = frozenset((_ATTR_T, _ATTR_G, _ATTR_TENSORS, _ATTR_GRAPHS, _ATTR_SPARSE, _ATTR_SPARSES))
_NODE_ATTRIBUTE_TAG = first_bytes(frozenset((_NODE_ATTRIBUTE,)))  # a byte every attribute's tag starts with
_VALUE_NAME, _VALUE_TYPE = 1, 2
_TYPE_TENSOR = 1
_TENSOR_TYPE_ELEM, _TENSOR_TYPE_SHAPE = 1, 2
_SHAPE_DIM = 1
_DIM_VALUE, _DIM_PARAM = 1, 2
_TENSOR_NAME, _TENSOR_EXTERNAL_DATA, _TENSOR_DATA_LOCATION = 8, 13, 14
_SPARSE_VALUES, _SPARSE_INDICES = 1, 2
_ENTRY_KEY, _ENTRY_VALUE = 1, 2
_OPSET_DOMAIN, _OPSET_VERSION = 1, 2
_SINGULAR_HOLDERS = frozenset((_ATTR_T, _ATTR_G, _ATTR_SPARSE))  # one message each, merged when written twice
# subgraphs in subgraphs: protobuf's parsers stop at 100 nested messages (upb, which `onnx.load` uses, and C++'s
# default), three per level of graph (graph › node › attribute › graph): a model 34 levels deep passed this check
# and then failed the reduction's load (TRT983) — deeper than 30 is said here, located, as not ONNX one can load
MAX_GRAPH_DEPTH = 30


_HOLDER_TAG = first_bytes(_ATTR_HOLDERS)  # a byte every attribute that holds a tensor or a graph has


class _Reader(WireReader):
    def __init__(self, buf: mmap.mmap | bytes, path: str) -> None:
        super().__init__(buf)
        self.path = path
        self.external: list[ExternalData] = []

    # -- messages ---------------------------------------------------------------------------------
    def model(self) -> tuple[int | None, dict[str, int], list[GraphInput], set[str], int]:
        ir_version: int | None = None
        opsets: dict[str, int] = {}
        graph: Spans = []
        functions: list[tuple[int, int]] = []
        for number, wire, value in self.fields(0, len(self.buf)):
            if number == _MODEL_IR_VERSION and wire == 0:
                ir_version = value
            elif number == _MODEL_GRAPH and wire == 2:
                graph.append(value)
            elif number == _MODEL_OPSET and wire == 2:
                domain, version = self.opset(value)
                opsets[domain] = version
            elif number == _MODEL_FUNCTIONS and wire == 2:
                functions.append(value)
            elif number in (_MODEL_IR_VERSION, _MODEL_GRAPH, _MODEL_OPSET):
                raise NotOnnx(f"ModelProto field {number} has wire type {wire}")
        if ir_version is None or not graph:
            missing = " and ".join(n for n, v in (("ir_version", ir_version), ("graph", graph or None)) if v is None)
            raise NotOnnx(f"no {missing} (an ONNX ModelProto has both)")
        inputs, initializers, count = self.graph(graph, "", 0)
        for span in functions:
            self.function(span)
        return ir_version, opsets, inputs, initializers, count

    def opset(self, span: tuple[int, int]) -> tuple[str, int]:
        domain, version = "", 0
        for number, wire, value in self.fields(*span):
            if number == _OPSET_DOMAIN and wire == 2:
                domain = self.text(value)
            elif number == _OPSET_VERSION and wire == 0:
                version = value
        return domain or "ai.onnx", version

    def graph(self, spans: Spans, scope: str, depth: int) -> tuple[list[GraphInput], set[str], int]:
        """Inputs, initializer names and count of a graph (`scope` "" for the top graph: a subgraph's inputs and
        initializers are its own), every external-data record of its tensors, its nodes' and its subgraphs'."""
        if depth > MAX_GRAPH_DEPTH:
            raise NotOnnx(f"subgraphs nested more than {MAX_GRAPH_DEPTH} deep")
        inputs: list[GraphInput] = []
        initializers: set[str] = set()
        count = 0
        for number, wire, value in self.fields_of(spans):
            if wire != 2:
                continue
            if number == _GRAPH_INPUT and not scope:
                inputs.append(self.value_info(value))
            elif number == _GRAPH_INITIALIZER:
                initializers.add(self.tensor([value], "initializer", scope))
                count += 1
            elif number == _GRAPH_SPARSE_INITIALIZER:
                initializers.add(self.sparse([value], "sparse initializer", scope))
                count += 1
            elif number == _GRAPH_NODE:
                self.node(value, scope, depth)
        return inputs, initializers, count

    def function(self, span: tuple[int, int]) -> None:
        name = ""
        nodes: list[tuple[int, int]] = []
        for number, wire, value in self.fields(*span):
            if number == _FUNCTION_NAME and wire == 2:
                name = self.text(value)
            elif number == _FUNCTION_NODE and wire == 2:
                nodes.append(value)
        for node in nodes:
            self.node(node, f"function {name!r}", 1)

    def node(self, span: tuple[int, int], scope: str, depth: int) -> None:
        """The tensors and graphs a node's attributes hold (a Constant's `value`, an If's branches, a Loop's body)."""
        data = self.buf[span[0] : span[1]]  # a node's few bytes, copied: indexing bytes beats indexing the mmap
        if _NODE_ATTRIBUTE_TAG.search(data) is None:  # no byte an attribute's tag starts with: nothing to look at
            return
        base = span[0]
        spans: dict[int, tuple[int, int]] = {}  # name and op_type, decoded only for a node that holds a tensor
        attributes: list[tuple[int, int]] = []
        at, size = 0, len(data)
        while at < size:  # the hot loop over every node: one-byte tags and lengths without a call or a generator
            tag = data[at]
            stop = at + 2 + data[at + 1] if at + 1 < size and tag < 0x80 and data[at + 1] < 0x80 else size + 1
            if tag & 7 != 2 or stop > size:  # a long field or another wire type: the general reader, from here
                rest = [(n, v) for n, w, v in self.fields(base + at, span[1]) if w == 2]
                attributes += [v for n, v in rest if n == _NODE_ATTRIBUTE]
                spans.update((n, v) for n, v in rest if n in (_NODE_NAME, _NODE_OP_TYPE))
                break
            if tag == 0x2A:  # field 5 (attribute), length-delimited
                attributes.append((base + at + 2, base + stop))
            elif tag in (0x1A, 0x22):  # fields 3 (name) and 4 (op_type)
                spans[tag >> 3] = (base + at + 2, base + stop)
            at = stop
        for attr_span in attributes:
            if _HOLDER_TAG.search(data, attr_span[0] - base, attr_span[1] - base) is None:
                continue  # no byte of a holder's tag anywhere in it: an int, a float, a string, their lists
            attr_name: tuple[int, int] | None = None
            held: list[tuple[int, Spans]] = []
            singular: dict[int, Spans] = {}  # `t`, `g`, `sparse_tensor` written twice: one message, merged
            for number, wire, value in self.fields(*attr_span):
                if number == _ATTR_NAME and wire == 2:
                    attr_name = value
                elif wire == 2 and number in _SINGULAR_HOLDERS:
                    if number not in singular:
                        held.append((number, singular.setdefault(number, [])))
                    singular[number].append(value)
                elif wire == 2 and number in _ATTR_HOLDERS:
                    held.append((number, [value]))
            if not held:
                continue
            name, op = (self.text(spans[n]) if n in spans else "" for n in (_NODE_NAME, _NODE_OP_TYPE))
            attr = self.text(attr_name) if attr_name else ""
            for number, value in held:
                where = f"attribute {attr!r} of {op or 'a'} node {name!r}"
                if number in (_ATTR_T, _ATTR_TENSORS):
                    self.tensor(value, f"tensor {where}", scope)
                elif number in (_ATTR_SPARSE, _ATTR_SPARSES):
                    self.sparse(value, f"sparse tensor {where}", scope)
                else:
                    inner = f"{op or 'a'} node {name!r} › {attr}"
                    self.graph(value, f"{scope} › {inner}" if scope else inner, depth + 1)

    def sparse(self, spans: Spans, what: str, scope: str) -> str:
        """A SparseTensorProto's name (its values' name); its values and indices may each be external."""
        values: Spans = []
        indices: Spans = []
        for number, wire, value in self.fields_of(spans):
            if number == _SPARSE_VALUES and wire == 2:
                values.append(value)
            elif number == _SPARSE_INDICES and wire == 2:
                indices.append(value)
        name = self.tensor(values, what, scope) if values else ""
        if indices:
            self.tensor(indices, f"{what} (its indices)", scope)
        return name

    def tensor(self, spans: Spans, what: str = "initializer", scope: str = "") -> str:
        """A TensorProto's name and external-data record; its data fields are skipped by length."""
        name = ""
        entries: dict[str, str] = {}
        location = 0
        for number, wire, value in self.fields_of(spans):
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
            where = f"{what} {name!r}" if what in ("initializer", "sparse initializer") else what
            where += f" in {scope}" if scope else ""
            if "location" not in entries:
                raise NotOnnx(f"{where} says its data is external but names no location")
            try:
                offset = int(entries.get("offset", "0"))
                length = int(entries["length"]) if "length" in entries else None
            except ValueError:
                raise NotOnnx(f"{where}: external data offset/length are not integers") from None
            self.external.append(ExternalData(name, entries["location"], offset, length, where))
        return name

    def value_info(self, span: tuple[int, int]) -> GraphInput:
        name = ""
        types: Spans = []
        for number, wire, value in self.fields(*span):
            if number == _VALUE_NAME and wire == 2:
                name = self.text(value)
            elif number == _VALUE_TYPE and wire == 2:
                types.append(value)
        tensor_types = [v for n, w, v in self.fields_of(types) if n == _TYPE_TENSOR and w == 2]
        dtype, dims = self.tensor_type(tensor_types) if tensor_types else ("non-tensor", None)
        return GraphInput(name, dtype, dims)

    def tensor_type(self, spans: Spans) -> tuple[str, tuple[Dim, ...] | None]:
        elem = 0
        shapes: Spans = []
        for number, wire, value in self.fields_of(spans):
            if number == _TENSOR_TYPE_ELEM and wire == 0:
                elem = value
            elif number == _TENSOR_TYPE_SHAPE and wire == 2:
                shapes.append(value)
        dims = (
            tuple(self.dim(v) for n, w, v in self.fields_of(shapes) if n == _SHAPE_DIM and w == 2) if shapes else None
        )
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
    # a user's model (a link into a cache is fine); a FIFO or a device is refused before a byte is read
    with open_regular(path, limit=None, follow=True) as fh:
        size = os.fstat(fh.fileno()).st_size
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
        self._lock = threading.Lock()  # the server asks from its threads (hover, completion)

    def get(self, path: Path | str) -> ModelInputs:
        """The model's inputs; raises NotOnnx or OSError like read_model_inputs (errors are cached too)."""
        p = Path(path)
        st = os.stat(p)
        key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
        hit = self._entries.get(key)
        if hit is None:
            try:
                hit = read_model_inputs(p)
            except (NotOnnx, OSError) as exc:
                hit = exc
            with self._lock:
                self.reads += 1
                if key not in self._entries and len(self._entries) >= self.capacity:
                    self._entries.pop(next(iter(self._entries)))
                self._entries[key] = hit
        if isinstance(hit, BaseException):
            raise hit
        return hit


CACHE = ModelInputsCache()
