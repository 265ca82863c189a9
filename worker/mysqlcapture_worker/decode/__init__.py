"""Row-image decoding: per-table plans compiled once per TABLE_MAP, producing Maxwell's JSON values."""

from mysqlcapture_worker.decode.decoder import (
    ABSENT,
    DecodeError,
    RowImage,
    TableDecoder,
    UnsupportedTypeError,
    compile_decoder,
)

__all__ = ["ABSENT", "DecodeError", "RowImage", "TableDecoder", "UnsupportedTypeError", "compile_decoder"]
