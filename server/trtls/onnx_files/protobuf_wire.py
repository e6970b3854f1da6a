"""The protobuf wire format, read over an mmap or bytes without building messages: what `onnx_reader` walks.

Each field is a varint tag `(number << 3) | wire_type`, then a varint (0), 8 bytes (1), a varint length and that many
bytes (2), or 4 bytes (5) (https://protobuf.dev/programming-guides/encoding/). Anything that does not follow the
format — a wrong wire type, a length past the end of the file — raises NotOnnx with the offset.

Read as protobuf reads it, not as a writer happens to write it: a singular message field written more than once is
the *merge* of its parts, which is exactly a parse of its parts one after the other (`fields_of` over its `Spans`);
a tag may be written longer than it needs (`0xAA 0x00` for field 5), so a byte filter that skips a message without a
field looks for the tag's first byte in both forms (`first_bytes`).
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Iterator
from typing import Any

from trtls.onnx_files.model_inputs import NotOnnx

Spans = list[tuple[int, int]]  # the parts of one message: a singular field written more than once is their merge
Field = tuple[int, int, Any]  # (number, wire type, a varint's value or a length-delimited field's (start, stop))


def first_bytes(numbers: frozenset[int]) -> re.Pattern[bytes]:
    """The bytes a length-delimited tag of one of `numbers` can start with: its canonical first byte and the first byte
    of a longer-than-needed form (the tag's low 7 bits with the continuation bit), which protobuf parses alike."""
    firsts = set()
    for number in numbers:
        tag = (number << 3) | 2
        firsts |= {tag if tag < 0x80 else (tag & 0x7F) | 0x80, (tag & 0x7F) | 0x80}
    return re.compile(b"[" + b"".join(re.escape(bytes([b])) for b in sorted(firsts)) + b"]")


class WireReader:
    def __init__(self, buf: mmap.mmap | bytes) -> None:
        self.buf = buf

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

    def fields(self, pos: int, end: int) -> Iterator[Field]:
        """Yield (field number, wire type, value or (start, stop) for length-delimited) over [pos, end)."""
        buf = self.buf
        while pos < end:
            tag = buf[pos]  # one-byte tags and lengths (fields 1-15, messages under 128 bytes) without a call
            if tag < 0x80:
                pos += 1
            else:
                tag, pos = self.varint(pos, end)
            number, wire = tag >> 3, tag & 7
            if number == 0:
                raise NotOnnx(f"field number 0 at byte {pos}")
            if wire == 0:
                value, pos = self.varint(pos, end)
                yield number, wire, value
            elif wire == 2:
                if pos < end and buf[pos] < 0x80:
                    length = buf[pos]
                    pos += 1
                else:
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

    def fields_of(self, spans: Spans) -> Iterator[Field]:
        """`fields` over every part of one message, in order: protobuf's merge of the parts."""
        for span in spans:
            yield from self.fields(*span)

    def text(self, span: tuple[int, int]) -> str:
        try:
            return bytes(self.buf[span[0] : span[1]]).decode("utf-8")
        except UnicodeDecodeError:
            raise NotOnnx(f"a name at byte {span[0]} is not UTF-8") from None
