"""Text built column by column in Arrow, handed on as bytes without a Python string per row."""

from __future__ import annotations

import pyarrow as pa


def utf8_bytes(texts: pa.Array | pa.ChunkedArray) -> bytes:
    """The UTF-8 bytes of a string array's values, end to end (nulls add nothing)."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks != 1 else texts.chunk(0)
    assert isinstance(texts, pa.StringArray)
    _, offsets, data = texts.buffers()
    if data is None or offsets is None or len(texts) == 0:
        return b""
    first, last = texts.offset * 4, (texts.offset + len(texts)) * 4
    start, end = (int.from_bytes(memoryview(offsets)[at : at + 4], "little", signed=True) for at in (first, last))
    return bytes(memoryview(data)[start:end])
