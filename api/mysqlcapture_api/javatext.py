"""Numbers and strings as Maxwell's Java prints them, so that its consumers read the same bytes.

Maxwell writes rows with Jackson: a DOUBLE through `Double.toString`, a FLOAT through `Float.toString` (the
shortest digits that read back, JDK 19+; at least two digits, "4.9E-324" rather than "5E-324"; plain between
10^-3 and 10^7, else `d.dddE[-]n`), a DECIMAL through `BigDecimal.toString` (scientific below 10^-6 with its
scale's trailing zeros: "0E-10"), and strings with Jackson's escapes (control characters as `\\u00XX` in upper
case, and characters beyond the BMP as an escaped surrogate pair, "\\uD83D\\uDE00").
"""

from __future__ import annotations

import re
import struct
from decimal import ROUND_UP, Context, Decimal

import orjson

_F32 = struct.Struct("<f")


def _shortest_digits(text: str) -> tuple[str, int]:
    """(significant digits, decimal exponent of the first digit) of a positive number's decimal text."""
    mantissa, _, exp = text.lower().partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    leading_zeros = len(whole + frac) - len(digits)
    exponent = int(exp or 0) + len(whole) - 1 - leading_zeros
    digits = digits.rstrip("0") or "0"
    return digits, exponent


def _layout(negative: bool, digits: str, exponent: int) -> str:
    """Java's `Double.toString` layout of the decimal 0.d1d2... * 10^(exponent + 1)."""
    sign = "-" if negative else ""
    if -3 <= exponent < 7:
        if exponent >= 0:
            whole = digits[: exponent + 1].ljust(exponent + 1, "0")
            frac = digits[exponent + 1 :] or "0"
            return f"{sign}{whole}.{frac}"
        return f"{sign}0.{'0' * (-exponent - 1)}{digits}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


def _java_digits(shortest: str, two: str, reads_back: bool) -> tuple[str, int]:
    """Java picks, when one digit would do, the nearest of the one- and two-digit decimals that read back."""
    digits, exponent = _shortest_digits(shortest)
    if len(digits) == 1 and reads_back:
        digits2, exponent2 = _shortest_digits(two)
        return digits2, exponent2
    return digits, exponent


def java_double(value: float) -> str:
    """`Double.toString(value)` for a finite double."""
    if 1e-3 <= abs(value) < 1e7:  # Java's plain range: its digits are repr's (checked on 300,000 doubles)
        text = repr(value)
        if "e" not in text:
            return text
    if value == 0.0:
        return "-0.0" if str(value).startswith("-") else "0.0"
    magnitude = abs(value)
    two = f"{magnitude:.1e}"
    digits, exponent = _java_digits(repr(magnitude), two, float(two) == magnitude)
    return _layout(value < 0, digits, exponent)


def java_float(raw: bytes, shortest: str) -> str:
    """`Float.toString` of the float32 in `raw` (little-endian), given its shortest round-trip text."""
    (value,) = _F32.unpack(raw)
    if value == 0.0:
        return "-0.0" if raw[3] & 0x80 else "0.0"
    magnitude = abs(value)
    two = f"{magnitude:.1e}"
    try:
        reads_back = _F32.pack(float(two)) == _F32.pack(magnitude)
    except OverflowError:
        reads_back = False
    digits, exponent = _java_digits(shortest.lstrip("-"), two, reads_back)
    return _layout(value < 0, digits, exponent)


def java_decimal(text: str) -> str:
    """`BigDecimal.toString` of a DECIMAL given as MySQL prints it ("-0.000000123", "12.50", "0.0000000000")."""
    negative = text.startswith("-")
    body = text.lstrip("-")
    whole, _, frac = body.partition(".")
    unscaled = (whole + frac).lstrip("0") or "0"
    adjusted = len(unscaled) - 1 - len(frac)
    if adjusted >= -6:
        return text
    mantissa = unscaled[0] + ("." + unscaled[1:] if len(unscaled) > 1 else "")
    return f"{'-' if negative else ''}{mantissa}E{adjusted}"


_NEEDS_JACKSON = re.compile("[\x00-\x1f\U00010000-\U0010ffff]")
# orjson's escapes of control characters: "u00" after an odd run of backslashes.
_HEX_ESCAPE = re.compile(rb"(?<!\\)((?:\\\\)*)\\u00([0-9a-f]{2})")


def upper_escapes(text: bytes) -> bytes:
    """orjson's control-character escapes in upper case, as Jackson and mysql-binlog-connector-java write them."""
    if b"\\u00" not in text:
        return text
    return _HEX_ESCAPE.sub(lambda m: m.group(1) + b"\\u00" + m.group(2).upper(), text)


def _surrogates(match: re.Match[str]) -> str:
    code = ord(match.group()) - 0x10000
    return f"\\u{0xD800 + (code >> 10):04X}\\u{0xDC00 + (code & 0x3FF):04X}"


def jackson_string(value: str) -> bytes:
    """A string as Jackson's UTF-8 generator writes it, quotes included."""
    text = orjson.dumps(value)
    if _NEEDS_JACKSON.search(value) is None:
        return text
    text = upper_escapes(text)
    return re.sub("[\U00010000-\U0010ffff]", _surrogates, text.decode()).encode()


def jackson_writer_string(value: str) -> bytes:
    """A string as Jackson's ObjectMapper writes it to a String (Maxwell's DDL lines): no surrogate escapes."""
    return upper_escapes(orjson.dumps(value))


def jackson_fragment(value: str) -> str | orjson.Fragment:
    """`value` itself when orjson writes it as Jackson does, else its Jackson text as a fragment."""
    if _NEEDS_JACKSON.search(value) is None:
        return value
    return orjson.Fragment(jackson_string(value))


def float32_text(raw: bytes) -> str | None:
    """The shortest decimal text that reads back as the same float32 (None for NaN/infinity)."""
    (value,) = _F32.unpack(raw)
    if value != value or value in (float("inf"), float("-inf")):
        return None
    if value == 0:
        return "-0.0" if raw[3] & 0x80 else "0.0"
    mantissa_zero = not (int.from_bytes(raw, "little") & 0x7FFFFF)
    exact = Decimal(value) if mantissa_zero else None
    for digits in range(1, 10):
        text = f"{value:.{digits}g}"
        if _reads_back(text, raw):
            return text
        if exact is not None:
            # At a power of two the interval toward zero is half as wide: rounding away from zero may fit.
            up = str(Context(prec=digits, rounding=ROUND_UP).plus(exact)).lower()
            if _reads_back(up, raw):
                return up
    return repr(value)


def _reads_back(text: str, raw: bytes) -> bool:
    try:
        return _F32.pack(float(text)) == raw
    except OverflowError:  # rounded past FLT_MAX
        return False
