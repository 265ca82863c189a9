"""Pure converters from MySQL row-image encodings (DECIMAL, FLOAT, temporal types) to Maxwell's text."""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from datetime import date

import orjson
from mysqlcapture_api.javatext import float32_text, java_double, java_float

from mysqlcapture_worker.charsets import charset_of_collation

__all__ = [
    "charset_of_collation",
    "date_text",
    "datetime2_converter",
    "decimal_converter",
    "decimal_size",
    "double_fragment",
    "float32_fragment",
    "float32_text",
    "float32_value",
    "fsp_bytes",
    "old_datetime_text",
    "old_time_text",
    "old_timestamp_text",
    "time2_converter",
    "timestamp2_converter",
]

# ---------------------------------------------------------------------------------------- DECIMAL
_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def decimal_size(precision: int, scale: int) -> int:
    """Bytes of a DECIMAL(precision, scale) in a row image (decimal_bin_size)."""
    intg = precision - scale
    return (intg // 9) * 4 + _DIG2BYTES[intg % 9] + (scale // 9) * 4 + _DIG2BYTES[scale % 9]


def decimal_converter(precision: int, scale: int) -> Callable[[bytes], str]:
    """bytes of MySQL's binary DECIMAL -> its exact text with `scale` fraction digits, as MySQL prints it."""
    intg = precision - scale
    # (digits, bytes) of each group, most significant first: partial integer group, full groups, partial tail.
    groups = [(intg % 9, _DIG2BYTES[intg % 9])] + [(9, 4)] * (intg // 9)
    groups += [(9, 4)] * (scale // 9) + [(scale % 9, _DIG2BYTES[scale % 9])]
    groups = [g for g in groups if g[1]]
    size = sum(nbytes for _, nbytes in groups)
    # For each group: (bit shift inside the whole number, mask, decimal multiplier).
    plan: list[tuple[int, int, int]] = []
    bits_after = size * 8
    digits_after = sum(d for d, _ in groups)
    for digits, nbytes in groups:
        bits_after -= nbytes * 8
        digits_after -= digits
        plan.append((bits_after, (1 << (nbytes * 8)) - 1, 10**digits_after))
    sign_bit = 1 << (size * 8 - 1)
    all_ones = (1 << (size * 8)) - 1

    def convert(raw: bytes) -> str:
        n = int.from_bytes(raw, "big")
        negative = not n & sign_bit
        n ^= (sign_bit ^ all_ones) if negative else sign_bit
        total = 0
        for shift, mask, mult in plan:
            total += ((n >> shift) & mask) * mult
        text = str(total)
        if scale:
            if len(text) <= scale:
                text = text.rjust(scale + 1, "0")
            text = text[:-scale] + "." + text[-scale:]
        return "-" + text if negative and total else text

    return convert


# ------------------------------------------------------------------------------------------ FLOAT
_F32 = struct.Struct("<f")


def float32_value(raw: bytes) -> float | None:
    """A FLOAT as the Python float whose repr (and orjson text) is the float32's shortest text."""
    text = float32_text(raw)
    return None if text is None else float(text)


def float32_fragment(raw: bytes) -> orjson.Fragment | None:
    """A FLOAT as Maxwell prints it (Java's `Float.toString`)."""
    text = float32_text(raw)
    return None if text is None else orjson.Fragment(java_float(raw, text))


def double_fragment(value: float) -> orjson.Fragment | None:
    """A DOUBLE as Maxwell prints it (Java's `Double.toString`)."""
    if value != value or value in (float("inf"), float("-inf")):
        return None
    return orjson.Fragment(java_double(value))


def vector_value(raw: bytes) -> list[orjson.Fragment | None]:
    """MySQL's VECTOR: little-endian float32 values, each rendered as a FLOAT column renders.

    Maxwell has no VECTOR; a JSON array of numbers is what a consumer can use (base64 of the bytes would make
    every consumer decode float32s itself).
    """
    if len(raw) % 4:
        raise ValueError(f"a VECTOR value of {len(raw)} bytes is not a whole number of float32 values")
    return [float32_fragment(raw[i : i + 4]) for i in range(0, len(raw), 4)]


# --------------------------------------------------------------------------------------- temporal
def fsp_bytes(fsp: int) -> int:
    return (fsp + 1) // 2


_FRAC_SCALE = (1, 10000, 10000, 100, 100, 1, 1)  # stored fraction -> microseconds, by fsp
_D2 = tuple(f"{i:02d}" for i in range(100))  # str formatting with :02d is slow on the hot path
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_EPOCH_DAYS: dict[int, str] = {}  # days since 1970 -> "YYYY-MM-DD" (at most ~50k: 32-bit seconds)


def _fraction(micro: int, fsp: int) -> str:
    """'.' and the first `fsp` digits of the 6-digit microseconds."""
    return "." + str(1000000 + micro)[1 : fsp + 1]


def _ymd(year: int, month: int, day: int) -> str:
    y = _D2[year // 100] + _D2[year % 100] if year < 10000 else str(year)
    return f"{y}-{_D2[month]}-{_D2[day]}"


def date_text(value: int) -> str:
    """DATE: 3 bytes little-endian, day:5 month:4 year:15."""
    return _ymd(value >> 9, (value >> 5) & 15, value & 31)


def datetime2_converter(fsp: int) -> Callable[[bytes], str]:
    """DATETIME2(fsp): 5 bytes big-endian (sign, year*13+month, day, hour, minute, second) + fraction."""
    frac_bits = fsp_bytes(fsp) * 8
    frac_mask = (1 << frac_bits) - 1
    scale = _FRAC_SCALE[fsp]
    d2 = _D2

    def convert(raw: bytes) -> str:
        n = int.from_bytes(raw, "big")
        packed = (n >> frac_bits) - 0x8000000000
        ymd = packed >> 17
        ym = ymd >> 5
        hms = packed & 0x1FFFF
        text = f"{_ymd(ym // 13, ym % 13, ymd & 31)} {d2[hms >> 12]}:{d2[(hms >> 6) & 63]}:{d2[hms & 63]}"
        return text + _fraction((n & frac_mask) * scale, fsp) if fsp else text

    return convert


def _epoch_date(days: int) -> str:
    text = _EPOCH_DAYS.get(days)
    if text is None:
        d = date.fromordinal(_EPOCH_ORDINAL + days)
        text = _EPOCH_DAYS[days] = _ymd(d.year, d.month, d.day)
    return text


def timestamp2_converter(fsp: int) -> Callable[[bytes], str]:
    """TIMESTAMP2(fsp): 4 bytes big-endian seconds since the epoch + fraction, rendered in UTC."""
    frac_bits = fsp_bytes(fsp) * 8
    frac_mask = (1 << frac_bits) - 1
    scale = _FRAC_SCALE[fsp]
    d2 = _D2

    def convert(raw: bytes) -> str:
        n = int.from_bytes(raw, "big")
        seconds = n >> frac_bits
        if seconds == 0:
            text = "0000-00-00 00:00:00"
        else:
            days, secs = divmod(seconds, 86400)
            text = f"{_epoch_date(days)} {d2[secs // 3600]}:{d2[secs // 60 % 60]}:{d2[secs % 60]}"
        return text + _fraction((n & frac_mask) * scale, fsp) if fsp else text

    return convert


def time2_converter(fsp: int) -> Callable[[bytes], str]:
    """TIME2(fsp) (my_time_packed_from_binary): negative values and hours up to 838 included."""
    d2 = _D2

    def convert(raw: bytes) -> str:
        n = int.from_bytes(raw, "big")
        if fsp == 0:
            packed = (n - 0x800000) << 24
        elif fsp <= 2:
            intpart, frac = (n >> 8) - 0x800000, n & 0xFF
            if intpart < 0 and frac:
                intpart, frac = intpart + 1, frac - 0x100
            packed = (intpart << 24) + frac * 10000
        elif fsp <= 4:
            intpart, frac = (n >> 16) - 0x800000, n & 0xFFFF
            if intpart < 0 and frac:
                intpart, frac = intpart + 1, frac - 0x10000
            packed = (intpart << 24) + frac * 100
        else:
            packed = n - 0x800000000000
        sign = ""
        if packed < 0:
            sign, packed = "-", -packed
        hms, micro = packed >> 24, packed & 0xFFFFFF
        hour = (hms >> 12) & 0x3FF
        text = f"{sign}{d2[hour] if hour < 100 else hour}:{d2[(hms >> 6) & 63]}:{d2[hms & 63]}"
        return text + _fraction(micro, fsp) if fsp else text

    return convert


def old_datetime_text(value: int) -> str:
    """The pre-5.6 DATETIME: an 8-byte integer YYYYMMDDhhmmss."""
    d, t = divmod(value, 1000000)
    date = f"{d // 10000:04d}-{d // 100 % 100:02d}-{d % 100:02d}"
    return f"{date} {t // 10000:02d}:{t // 100 % 100:02d}:{t % 100:02d}"


def old_time_text(value: int) -> str:
    """The pre-5.6 TIME: a signed 3-byte integer hhmmss."""
    sign, value = ("-", -value) if value < 0 else ("", value)
    return f"{sign}{value // 10000:02d}:{value // 100 % 100:02d}:{value % 100:02d}"


def old_timestamp_text(seconds: int) -> str:
    """The pre-5.6 TIMESTAMP: 4 bytes little-endian seconds since the epoch, in UTC."""
    if seconds == 0:
        return "0000-00-00 00:00:00"
    t = time.gmtime(seconds)
    return f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d} {t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}"
