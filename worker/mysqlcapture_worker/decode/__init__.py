"""Row-image decoding: per-table decoders compiled once per TABLE_MAP, producing Maxwell's JSON values."""

from mysqlcapture_worker.decode.decoder import TableDecoder, UnsupportedTypeError, compile_decoder

__all__ = ["TableDecoder", "UnsupportedTypeError", "compile_decoder"]
