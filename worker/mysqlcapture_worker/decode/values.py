"""Pure converters from MySQL row-image encodings to Maxwell's JSON values."""

from __future__ import annotations

import datetime
import struct

import orjson
from pymysql.charset import charset_by_id

_FLOAT = struct.Struct("<f")


class JsonNumber:
    """A number rendered exactly as given (DECIMAL digits, a FLOAT's shortest text), compared by its text."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JsonNumber) and other.text == self.text

    def __hash__(self) -> int:
        return hash(self.text)

    def __repr__(self) -> str:
        return f"JsonNumber({self.text})"

    def __json_fragment__(self) -> orjson.Fragment:
        return orjson.Fragment(self.text)


def float32_text(raw: bytes) -> JsonNumber:
    """The shortest decimal text that reads back as the same float32 (Java's Float.toString idea)."""
    (value,) = _FLOAT.unpack(raw)
    for digits in range(6, 10):
        text = f"{value:.{digits}g}"
        if _FLOAT.pack(float(text)) == raw:
            break
    if "e" not in text and "." not in text and "inf" not in text and "nan" not in text:
        text += ".0"
    return JsonNumber(repr(float(text)) if "e" in text else text)


_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def decimal_size(precision: int, scale: int) -> int:
    intg = precision - scale
    return (intg // 9) * 4 + _DIG2BYTES[intg % 9] + (scale // 9) * 4 + _DIG2BYTES[scale % 9]


def decimal_text(raw: bytes, precision: int, scale: int) -> str:
    """MySQL's binary DECIMAL as exact text, with `scale` fraction digits, no float rounding."""
    data = bytearray(raw)
    negative = not (data[0] & 0x80)
    data[0] ^= 0x80
    if negative:
        data = bytearray(b ^ 0xFF for b in data)
    intg = precision - scale
    pos = 0
    parts: list[str] = []
    lead = _DIG2BYTES[intg % 9]
    if lead:
        parts.append(str(int.from_bytes(data[pos : pos + lead], "big")))
        pos += lead
    for _ in range(intg // 9):
        parts.append(f"{int.from_bytes(data[pos : pos + 4], 'big'):09d}")
        pos += 4
    integer = "".join(parts).lstrip("0") or "0"
    frac: list[str] = []
    for _ in range(scale // 9):
        frac.append(f"{int.from_bytes(data[pos : pos + 4], 'big'):09d}")
        pos += 4
    tail = scale % 9
    if tail:
        frac.append(f"{int.from_bytes(data[pos : pos + _DIG2BYTES[tail]], 'big'):0{tail}d}")
    text = integer + ("." + "".join(frac) if scale else "")
    if negative and text.strip("0.") != "":
        text = "-" + text
    return text


def fraction(micro: int, fsp: int) -> str:
    return f".{micro:06d}"[: fsp + 1] if fsp else ""


def read_fsp(raw: bytes, fsp: int) -> int:
    """Microseconds from the big-endian fractional part of TIME2/DATETIME2/TIMESTAMP2."""
    if fsp == 0:
        return 0
    value = int.from_bytes(raw, "big")
    if fsp <= 2:
        return value * 10000
    if fsp <= 4:
        return value * 100
    return value


def fsp_bytes(fsp: int) -> int:
    return (fsp + 1) // 2


def datetime2_text(raw: bytes, fsp: int) -> str:
    packed = int.from_bytes(raw[:5], "big") - 0x8000000000
    micro = read_fsp(raw[5:], fsp)
    ymd = packed >> 17
    ym = ymd >> 5
    hms = packed & 0x1FFFF
    year, month, day = ym // 13, ym % 13, ymd & 31
    hour, minute, second = hms >> 12, (hms >> 6) & 63, hms & 63
    return f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}" + fraction(micro, fsp)


def timestamp2_text(raw: bytes, fsp: int) -> str:
    seconds = int.from_bytes(raw[:4], "big")
    micro = read_fsp(raw[4:], fsp)
    if seconds == 0 and micro == 0:
        return "0000-00-00 00:00:00" + fraction(0, fsp)
    moment = datetime.datetime(1970, 1, 1) + datetime.timedelta(seconds=seconds)
    return moment.strftime("%Y-%m-%d %H:%M:%S") + fraction(micro, fsp)


def time2_text(raw: bytes, fsp: int) -> str:
    """TIME2 (my_time_packed_from_binary), negative and > 24 h values included."""
    intpart = int.from_bytes(raw[:3], "big") - 0x800000
    if fsp == 0:
        packed = intpart << 24
    elif fsp <= 2:
        frac = int.from_bytes(raw[3:4], "big")
        if intpart < 0 and frac:
            intpart += 1
            frac -= 0x100
        packed = (intpart << 24) + frac * 10000
    elif fsp <= 4:
        frac = int.from_bytes(raw[3:5], "big")
        if intpart < 0 and frac:
            intpart += 1
            frac -= 0x10000
        packed = (intpart << 24) + frac * 100
    else:
        packed = int.from_bytes(raw[:6], "big") - 0x800000000000
    sign = ""
    if packed < 0:
        sign, packed = "-", -packed
    hms, micro = packed >> 24, packed % (1 << 24)
    hour, minute, second = (hms >> 12) % (1 << 10), (hms >> 6) % 64, hms % 64
    return f"{sign}{hour:02d}:{minute:02d}:{second:02d}" + fraction(micro, fsp)


def date_text(value: int) -> str:
    return f"{value >> 9:04d}-{(value >> 5) & 15:02d}-{value & 31:02d}"


# MySQL charset names -> Python codecs (Maxwell's supported list; MySQL's latin1 is really cp1252).
CODECS: dict[str, str] = {
    "utf8": "utf-8", "utf8mb3": "utf-8", "utf8mb4": "utf-8", "latin1": "cp1252", "latin2": "iso8859_2",
    "ascii": "ascii", "ucs2": "utf-16-be", "utf16": "utf-16-be", "utf16le": "utf-16-le", "utf32": "utf-32-be",
    "big5": "big5", "cp850": "cp850", "sjis": "shift_jis", "hebrew": "iso8859_8", "tis620": "tis_620",
    "euckr": "euc_kr", "gb2312": "gb2312", "greek": "iso8859_7", "cp1250": "cp1250", "gbk": "gbk",
    "latin5": "iso8859_9", "macroman": "mac_roman", "cp852": "cp852", "cp1251": "cp1251", "cp866": "cp866",
    "cp1256": "cp1256", "cp1257": "cp1257", "binary": "binary",
}


def charset_of_collation(collation_id: int | None) -> str | None:
    if collation_id is None:
        return None
    cs = charset_by_id(collation_id)
    return str(cs.name) if cs is not None else None
