"""The type-fidelity corpus: column DDL, SQL values, and each value's expected Maxwell JSON text."""

# Implementation-independent data: every decoder (the pure-Python one, a compiled one) must render
# each value exactly as `expected` says (`mariadb` where MariaDB differs), as Maxwell's JSON text: Java's
# numbers, Jackson's escapes (characters beyond the BMP as surrogate pairs), JTS's WKT; Maxwell's
# recorded lines (tests/maxwell) check this file, and README lists where the two differ on purpose.
# A case's table is `(id int PRIMARY KEY, v <ddl>)`; with `base` it is `(id, b <base>, v <ddl>)`: the
# values go into `b` and the generated `v` is checked.
# `setup` statements run in the writing session first (sql_mode for zero dates, time_zone).

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal


@dataclass(frozen=True)
class Case:
    name: str
    ddl: str
    values: tuple[str, ...]  # SQL expressions, one row each
    expected: tuple[str, ...]  # the JSON text of each row's value
    setup: tuple[str, ...] = ()
    base: str | None = None
    flavors: tuple[str, ...] = ("mariadb", "mysql")  # the servers whose SQL accepts the case
    mariadb: tuple[str, ...] | None = None  # the expected text on MariaDB, where it differs (JSON is text there)

    def expected_for(self, flavor: str) -> tuple[str, ...]:
        return self.mariadb if flavor == "mariadb" and self.mariadb is not None else self.expected


def case(
    name: str,
    ddl: str,
    *pairs: tuple[str, str],
    setup: tuple[str, ...] = (),
    base: str | None = None,
    flavors: tuple[str, ...] = ("mariadb", "mysql"),
    mariadb: tuple[str, ...] | None = None,
) -> Case:
    return Case(name, ddl, tuple(p[0] for p in pairs), tuple(p[1] for p in pairs), setup, base, flavors, mariadb)


def _verbatim(pairs: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    """MariaDB's JSON is text: Maxwell prints what the SQL string literal holds (NULL as null)."""
    return tuple(sql[1:-1].replace("\\\\", "\\") if sql.startswith("'") else "null" for sql, _ in pairs)


MARIADB, MYSQL = ("mariadb",), ("mysql",)


NULL = ("NULL", "null")
ZERO_DATES = ("SET SESSION sql_mode = ''",)
D65 = "9" * 35 + "." + "9" * 30
ENUM300 = "enum(" + ",".join(f"'v{i}'" for i in range(300)) + ")"
SET20 = "set(" + ",".join(f"'m{i}'" for i in range(20)) + ")"
SET64 = "set(" + ",".join(f"'m{i}'" for i in range(64)) + ")"
BITS64 = "b'" + "1" * 64 + "'"


def _surrogates(text: str) -> str:
    """Characters beyond the BMP as Jackson escapes them in Maxwell's lines: an escaped UTF-16 surrogate pair."""

    def one(c: str) -> str:
        u = ord(c) - 0x10000
        return f"\\u{0xD800 + (u >> 10):04X}\\u{0xDC00 + (u & 0x3FF):04X}" if u >= 0 else c

    return "".join(one(c) for c in text)


def _text(sql: str, text: str) -> tuple[str, str]:
    """A string value whose SQL literal needs no escaping, and whose JSON text escapes only non-BMP characters."""
    return (f"'{sql}'", f'"{_surrogates(text)}"')


def _exact(value: float) -> str:
    """The exact decimal expansion of a double (Java's new BigDecimal(value).toPlainString())."""
    return format(Decimal(value), "f")


def _s(text: str) -> tuple[str, str]:
    """A string value rendered as itself."""
    return _text(text, text)


_JSON = (
    ('\'{"a": 1, "b": [true, false, null], "c": {"d": "é😀"}}\'', '{"a":1,"b":[true,false,null],"c":{"d":"é😀"}}'),
    ("'[1, 2.5, -3, 1e3, \"x\"]'", '[1,2.5,-3,1000.0,"x"]'),
    ("'\"str\"'", '"str"'),
    ("'42'", "42"),
    ("'{}'", "{}"),
    ("'[]'", "[]"),
    ('\'{"deep": [[[{"k": [1]}]]]}\'', '{"deep":[[[{"k":[1]}]]]}'),
    ("'[18446744073709551615, -9223372036854775808, 0.5]'", "[18446744073709551615,-9223372036854775808,0.5]"),
    ("'\"\\\\u00e9\"'", '"é"'),
    NULL,
)
_JSON_NULLS = (("'null'", "null"), NULL, ("'[null]'", "[null]"), ("'\"null\"'", '"null"'), ("' null '", "null"))
_JSON_NUMBERS = (
    (
        "'[1e300, -0.0, 0.1, 1e-7, 12345678.9, 0.30000000000000004, 1000, 1e3]'",
        "["
        + ",".join([_exact(1e300), "-0.0", "0.1", _exact(1e-7), _exact(12345678.9), "0.30000000000000004", "1000"])
        + ",1000.0]",
    ),
    (
        "'[1.7976931348623157e308, 5e-324, 0.001, 9999999.5]'",
        f"[{_exact(1.7976931348623157e308)},{_exact(5e-324)},0.001,9999999.5]",
    ),
    (
        "'[9223372036854775807, -9223372036854775808, 18446744073709551615, 65535, -32768, 4294967295]'",
        "[9223372036854775807,-9223372036854775808,18446744073709551615,65535,-32768,4294967295]",
    ),
    (
        '\'{"f": false, "n": null, "s": "tab\\\\tquote\\\\"nl\\\\n\\\\u0001é", "t": true}\'',
        '{"f":false,"n":null,"s":"tab\\tquote\\"nl\\n\\u0001é","t":true}',
    ),
    NULL,
)


CASES: list[Case] = [
    # ------------------------------------------------------------------------------ integers
    case("tinyint", "tinyint", ("-128", "-128"), ("0", "0"), ("127", "127"), NULL),
    case("tinyint_unsigned", "tinyint unsigned", ("0", "0"), ("255", "255"), ("128", "128"), NULL),
    case("bool", "tinyint(1)", ("TRUE", "1"), ("FALSE", "0"), ("-1", "-1"), NULL),
    case("smallint", "smallint", ("-32768", "-32768"), ("32767", "32767"), ("-1", "-1"), NULL),
    case("smallint_unsigned", "smallint unsigned", ("65535", "65535"), ("32768", "32768"), ("0", "0"), NULL),
    case("mediumint", "mediumint", ("-8388608", "-8388608"), ("8388607", "8388607"), ("-1", "-1"), NULL),
    case("mediumint_unsigned", "mediumint unsigned", ("16777215", "16777215"), ("8388608", "8388608"), NULL),
    case("int", "int", ("-2147483648", "-2147483648"), ("2147483647", "2147483647"), ("-1", "-1"), NULL),
    case("int_unsigned", "int unsigned", ("4294967295", "4294967295"), ("2147483648", "2147483648"), NULL),
    case(
        "bigint",
        "bigint",
        ("-9223372036854775808", "-9223372036854775808"),
        ("9223372036854775807", "9223372036854775807"),
        ("-1", "-1"),
        NULL,
    ),
    case(
        "bigint_unsigned",
        "bigint unsigned",
        ("18446744073709551615", "18446744073709551615"),
        ("9223372036854775808", "9223372036854775808"),
        ("0", "0"),
        NULL,
    ),
    case("int_zerofill", "int(5) zerofill", ("42", "42"), ("4294967295", "4294967295"), NULL),
    # ------------------------------------------------------------------------------ DECIMAL
    case(
        "decimal_65_30",
        "decimal(65,30)",
        (D65, D65),
        ("-" + D65, "-" + D65),
        ("-0.000000000000000000000000000001", "-1E-30"),
        ("0.000000000000000000000000000001", "1E-30"),
        ("0", "0E-30"),
        ("1.5", "1.5" + "0" * 29),
        (
            "-12345678901234567890.123456789012345678901234567890",
            "-12345678901234567890.123456789012345678901234567890",
        ),
        ("123456789", "123456789." + "0" * 30),
        NULL,
    ),
    # Small values of a wide DECIMAL with more digits than a double holds: Maxwell's text is scientific
    # (BigDecimal.toString); compaction, history and undo keep every digit in plain notation.
    case(
        "decimal_65_30_small",
        "decimal(65,30)",
        ("0.000000012345678901234567890123", "1.2345678901234567890123E-8"),
        ("-0.000000000000000000000000000123", "-1.23E-28"),
        ("0.000001234567890123456789012345", "0.000001234567890123456789012345"),
        NULL,
    ),
    case(
        "decimal_10_2",
        "decimal(10,2)",
        ("12.5", "12.50"),
        ("-0.01", "-0.01"),
        ("99999999.99", "99999999.99"),
        ("-99999999.99", "-99999999.99"),
        ("0", "0.00"),
        ("-7", "-7.00"),
        NULL,
    ),
    case("decimal_5_0", "decimal(5,0)", ("12345", "12345"), ("-12345", "-12345"), ("0", "0"), NULL),
    case(
        "decimal_10_10",
        "decimal(10,10)",
        ("0.1234567890", "0.1234567890"),
        ("-0.0000000001", "-1E-10"),
        ("0", "0E-10"),
        NULL,
    ),
    case(
        "decimal_18_9",
        "decimal(18,9)",
        ("123456789.123456789", "123456789.123456789"),
        ("-1.000000001", "-1.000000001"),
        ("-999999999.999999999", "-999999999.999999999"),
        NULL,
    ),
    case(
        "decimal_20_0_unsigned",
        "decimal(20,0) unsigned",
        ("12345678901234567890", "12345678901234567890"),
        ("0", "0"),
        NULL,
    ),
    # ------------------------------------------------------------------------------ FLOAT / DOUBLE
    case(
        "float",
        "float",
        ("1.1", "1.1"),
        ("-1.1", "-1.1"),
        ("0", "0.0"),
        ("0.1", "0.1"),
        ("123456.7", "123456.7"),
        ("3.4028234e38", "3.4028235E38"),
        ("-3.4028234e38", "-3.4028235E38"),
        ("1.17549435e-38", "1.1754944E-38"),  # JDK 19+ (JDK 17 prints 1.17549435E-38)
        ("1.4e-45", "1.4E-45"),
        ("16777216", "1.6777216E7"),
        ("1e10", "1.0E10"),
        ("1e20", "1.0E20"),
        ("3.14159265358979", "3.1415927"),
        NULL,
    ),
    case("float_7_3", "float(7,3)", ("1.25", "1.25"), ("-9999.999", "-9999.999"), ("0.001", "0.001"), NULL),
    case(
        "double",
        "double",
        ("4.2341", "4.2341"),
        ("1.7976931348623157e308", "1.7976931348623157E308"),
        ("-1.7976931348623157e308", "-1.7976931348623157E308"),
        ("2.2250738585072014e-308", "2.2250738585072014E-308"),
        ("5e-324", "4.9E-324"),
        ("0.1e0 + 0.2e0", "0.30000000000000004"),
        ("1e20", "1.0E20"),
        ("1e15", "1.0E15"),
        ("123456789012345678", "1.2345678901234568E17"),
        ("0", "0.0"),
        ("-100", "-100.0"),
        NULL,
    ),
    # ------------------------------------------------------------------------------ BIT
    case("bit1", "bit(1)", ("b'1'", "1"), ("b'0'", "0"), NULL),
    case("bit5", "bit(5)", ("b'10101'", "21"), ("b'11111'", "31"), ("b'0'", "0"), NULL),
    case("bit8", "bit(8)", ("b'10101010'", "170"), ("b'11111111'", "255"), ("b'0'", "0"), NULL),
    case("bit12", "bit(12)", ("b'111111111111'", "4095"), ("b'100000000001'", "2049"), NULL),
    case(
        "bit64",
        "bit(64)",
        (BITS64, "18446744073709551615"),
        ("b'1'", "1"),
        ("0x8000000000000000", "9223372036854775808"),
        NULL,
    ),
    # ------------------------------------------------------------------------------ DATE / YEAR
    case(
        "date",
        "date",
        _s("2020-02-29"),
        _s("1000-01-01"),
        _s("9999-12-31"),
        _s("0000-00-00"),
        _s("2020-00-00"),
        NULL,
        setup=ZERO_DATES,
    ),
    case("year", "year", ("1901", "1901"), ("2155", "2155"), ("2024", "2024"), ("0", "0"), NULL),
    # ------------------------------------------------------------------------------ TIME
    case(
        "time",
        "time",
        _s("00:00:00"),
        _s("838:59:59"),
        _s("-838:59:59"),
        _s("-00:00:01"),
        _s("12:34:56"),
        _s("-12:34:56"),
        NULL,
    ),
    case(
        "time1",
        "time(1)",
        _s("12:34:56.7"),
        _s("-12:34:56.7"),
        _s("-00:00:00.1"),
        _text("00:00:00", "00:00:00.0"),
        NULL,
    ),
    case(
        "time2",
        "time(2)",
        _s("-00:00:00.01"),
        _s("23:59:59.99"),
        _text("-01:00:00.5", "-01:00:00.50"),
        NULL,
    ),
    case(
        "time3",
        "time(3)",
        _s("00:00:00.001"),
        _text("-01:00:00.5", "-01:00:00.500"),
        _s("-00:00:00.999"),
        NULL,
    ),
    case(
        "time4",
        "time(4)",
        _s("-00:00:00.0001"),
        _s("12:00:00.1234"),
        _s("-12:00:00.9999"),
        NULL,
    ),
    case(
        "time5",
        "time(5)",
        _s("-00:00:00.00001"),
        _s("100:00:00.12345"),
        NULL,
    ),
    case(
        "time6",
        "time(6)",
        _s("-00:00:00.000001"),
        _s("838:59:59.000000"),
        _s("-838:59:59.000000"),
        _text("00:00:00", "00:00:00.000000"),
        _text("-12:34:56.5", "-12:34:56.500000"),
        NULL,
    ),
    # MariaDB takes fractions at TIME's limit (MySQL's limit is 838:59:59 whole: it refuses these).
    case("time1_limit", "time(1)", _s("838:59:59.9"), _s("-838:59:59.9"), flavors=MARIADB),
    case("time2_limit", "time(2)", _s("-838:59:59.99"), flavors=MARIADB),
    case("time3_limit", "time(3)", _s("-838:59:59.999"), flavors=MARIADB),
    case("time6_limit", "time(6)", _s("838:59:59.999999"), _s("-838:59:59.999999"), flavors=MARIADB),
    # ------------------------------------------------------------------------------ DATETIME
    case(
        "datetime",
        "datetime",
        _s("2016-10-21 05:33:37"),
        _s("1000-01-01 00:00:00"),
        _s("9999-12-31 23:59:59"),
        _s("0000-00-00 00:00:00"),
        _s("2020-00-00 00:00:00"),
        NULL,
        setup=ZERO_DATES,
    ),
    case(
        "datetime1",
        "datetime(1)",
        _s("2016-10-21 05:33:37.5"),
        _text("2016-10-21 05:33:37", "2016-10-21 05:33:37.0"),
        NULL,
    ),
    case(
        "datetime2",
        "datetime(2)",
        _s("2020-01-01 00:00:00.99"),
        _s("2020-01-01 00:00:00.01"),
        NULL,
    ),
    case(
        "datetime3",
        "datetime(3)",
        _s("2016-10-21 05:33:37.523"),
        _text("0000-00-00 00:00:00", "0000-00-00 00:00:00.000"),
        NULL,
        setup=ZERO_DATES,
    ),
    case(
        "datetime4",
        "datetime(4)",
        _s("2016-10-21 05:33:37.1234"),
        _s("1999-12-31 23:59:59.0001"),
        NULL,
    ),
    case(
        "datetime5",
        "datetime(5)",
        _s("2016-10-21 05:33:37.12345"),
        NULL,
    ),
    case(
        "datetime6",
        "datetime(6)",
        _text("2016-10-21 05:33:37.523", "2016-10-21 05:33:37.523000"),
        _s("9999-12-31 23:59:59.999999"),
        _text("0000-00-00 00:00:00", "0000-00-00 00:00:00.000000"),
        _s("1000-01-01 00:00:00.000001"),
        NULL,
        setup=ZERO_DATES,
    ),
    # ------------------------------------------------------------------------------ TIMESTAMP (UTC)
    case(
        "timestamp",
        "timestamp NULL DEFAULT NULL",
        _s("2016-10-21 05:33:37"),
        _s("1970-01-01 00:00:01"),
        _s("2038-01-19 03:14:07"),
        _s("0000-00-00 00:00:00"),
        NULL,
        setup=ZERO_DATES,
    ),
    case(
        "timestamp_session_tz",
        "timestamp NULL DEFAULT NULL",
        _text("2016-10-21 10:33:37", "2016-10-21 05:33:37"),
        _text("2000-01-01 04:00:00", "1999-12-31 23:00:00"),
        NULL,
        setup=("SET SESSION time_zone = '+05:00'",),
    ),
    case(
        "timestamp1",
        "timestamp(1) NULL DEFAULT NULL",
        _s("2016-10-21 05:33:37.5"),
        _text("2016-10-21 05:33:37", "2016-10-21 05:33:37.0"),
        NULL,
    ),
    case(
        "timestamp2",
        "timestamp(2) NULL DEFAULT NULL",
        _s("2016-10-21 05:33:37.07"),
        NULL,
    ),
    case(
        "timestamp3",
        "timestamp(3) NULL DEFAULT NULL",
        _s("2016-10-21 05:33:37.523"),
        _text("0000-00-00 00:00:00", "0000-00-00 00:00:00.000"),
        NULL,
        setup=ZERO_DATES,
    ),
    case(
        "timestamp4",
        "timestamp(4) NULL DEFAULT NULL",
        _s("2016-10-21 05:33:37.0001"),
        NULL,
    ),
    case(
        "timestamp5",
        "timestamp(5) NULL DEFAULT NULL",
        _s("2016-10-21 05:33:37.99999"),
        NULL,
    ),
    case(
        "timestamp6",
        "timestamp(6) NULL DEFAULT NULL",
        _text("2016-10-21 05:33:37.523", "2016-10-21 05:33:37.523000"),
        _s("2038-01-19 03:14:07.999999"),
        _text("0000-00-00 00:00:00", "0000-00-00 00:00:00.000000"),
        NULL,
        setup=ZERO_DATES,
    ),
    # ------------------------------------------------------------------------------ strings
    case(
        "varchar_utf8mb4",
        "varchar(255) CHARACTER SET utf8mb4",
        _s("plain"),
        ("''", '""'),
        _s("emoji 😀 ok"),
        _s("a  "),
        ("'say \"hi\" \\\\ back'", '"say \\"hi\\" \\\\ back"'),
        ("'tab\\there\\nline'", '"tab\\there\\nline"'),
        NULL,
    ),
    case(
        "varchar_long_utf8mb4",
        "varchar(300) CHARACTER SET utf8mb4",
        ("REPEAT('é', 300)", '"' + "é" * 300 + '"'),
        _s("x"),
        NULL,
    ),
    case("varchar_utf8mb3", "varchar(20) CHARACTER SET utf8mb3", _s("héllo wörld"), NULL),
    case(
        "char_utf8mb4",
        "char(10) CHARACTER SET utf8mb4",
        _s("abc"),
        _text("abc   ", "abc"),
        ("''", '""'),
        _s("😀x"),
        NULL,
    ),
    case(
        "char_long_utf8mb4",
        "char(100) CHARACTER SET utf8mb4",
        _s("x😀"),
        ("REPEAT('z', 100)", '"' + "z" * 100 + '"'),
        NULL,
    ),
    case(
        "latin1",
        "varchar(20) CHARACTER SET latin1",
        _s("é"),
        _s("€ and Ÿ"),
        _s("café"),
        ("CONVERT(x'81' USING latin1)", '"\u0081"'),
        NULL,
    ),
    case("char_latin1", "char(5) CHARACTER SET latin1", _s("é"), _s("ab"), NULL),
    case("latin2", "varchar(20) CHARACTER SET latin2", _s("Łódź ąę"), NULL),
    case("ascii", "varchar(20) CHARACTER SET ascii", _s("hello"), NULL),
    case("ucs2", "varchar(20) CHARACTER SET ucs2", _s("é€ab"), NULL),
    case("char_ucs2", "char(4) CHARACTER SET ucs2", _s("ab"), _s("é"), NULL),
    case("utf16", "varchar(20) CHARACTER SET utf16", _s("é😀"), NULL),
    case("utf16le", "varchar(20) CHARACTER SET utf16le", _s("é😀"), NULL),
    case("utf32", "varchar(20) CHARACTER SET utf32", _s("é😀"), NULL),
    case("big5", "varchar(20) CHARACTER SET big5", _s("中文"), NULL),
    case("sjis", "varchar(20) CHARACTER SET sjis", _s("日本語"), NULL),
    case("greek", "varchar(20) CHARACTER SET greek", _s("αβγ"), NULL),
    case("cp1251", "varchar(20) CHARACTER SET cp1251", _s("привет"), NULL),
    case("gbk", "varchar(20) CHARACTER SET gbk", _s("中文"), NULL),
    # EUC-JP with a JIS X 0212 character (three bytes), Windows-31J with an NEC special character, GB18030 four-byte
    # sequences (MySQL only: MariaDB has no gb18030): the worker refused these charsets, which Maxwell reads.
    case("ujis", "varchar(20) CHARACTER SET ujis", _s("日本語"), ("x'8fb0a1'", '"丂"'), NULL),
    case("cp932", "varchar(20) CHARACTER SET cp932", _s("日本語"), ("x'8740'", '"①"'), NULL),
    case("gb18030", "varchar(20) CHARACTER SET gb18030", _s("中文€😀"), NULL, flavors=MYSQL),
    case("gb2312", "varchar(20) CHARACTER SET gb2312", _s("中文"), NULL),
    case("hebrew", "varchar(20) CHARACTER SET hebrew", _s("שלום"), NULL),
    case("euckr", "varchar(20) CHARACTER SET euckr", _s("한국어"), NULL),
    case("tis620", "varchar(20) CHARACTER SET tis620", _s("ภาษาไทย"), NULL),
    case("latin5", "varchar(20) CHARACTER SET latin5", _s("ğüş"), NULL),
    case("cp1250", "varchar(20) CHARACTER SET cp1250", _s("Łódź"), NULL),
    case("cp850", "varchar(20) CHARACTER SET cp850", _s("é"), NULL),
    case("cp852", "varchar(20) CHARACTER SET cp852", _s("ř"), NULL),
    case("cp866", "varchar(20) CHARACTER SET cp866", _s("привет"), NULL),
    case("cp1256", "varchar(20) CHARACTER SET cp1256", _s("مرحبا"), NULL),
    case("cp1257", "varchar(20) CHARACTER SET cp1257", _s("ąčę"), NULL),
    case("macroman", "varchar(20) CHARACTER SET macroman", _s("é"), NULL),
    case("tinytext", "tinytext CHARACTER SET utf8mb4", _s("tiny ✓"), ("''", '""'), NULL),
    case(
        "text",
        "text CHARACTER SET utf8mb4",
        ("REPEAT('ab', 200)", '"' + "ab" * 200 + '"'),
        _s("emoji 😀"),
        NULL,
    ),
    case("mediumtext", "mediumtext CHARACTER SET utf8mb4", _s("medium"), NULL),
    case("longtext", "longtext CHARACTER SET utf8mb4", _s("long"), NULL),
    case("text_latin1", "text CHARACTER SET latin1", _s("café €"), NULL),
    # ------------------------------------------------------------------------------ binary (base64)
    case(
        "binary4",
        "binary(4)",
        ("'a'", '"YQAAAA=="'),
        ("x'00000000'", '"AAAAAA=="'),
        ("x'61000062'", '"YQAAYg=="'),
        ("x'01020304'", '"AQIDBA=="'),
        NULL,
    ),
    case(
        "varbinary",
        "varbinary(10)",
        ("x'00ff'", '"AP8="'),
        ("''", '""'),
        ("x'000000'", '"AAAA"'),
        ("'abc'", '"YWJj"'),
        NULL,
    ),
    case("varchar_binary_charset", "varchar(8) CHARACTER SET binary", ("'abc'", '"YWJj"'), NULL),
    case("char_binary_charset", "char(3) CHARACTER SET binary", ("'a'", '"YQAA"'), NULL),
    case("tinyblob", "tinyblob", ("x'00'", '"AA=="'), NULL),
    case("blob", "blob", ("x'deadbeef'", '"3q2+7w=="'), ("''", '""'), NULL),
    case("mediumblob", "mediumblob", ("x'ff'", '"/w=="'), NULL),
    case("longblob", "longblob", ("'hello'", '"aGVsbG8="'), NULL),
    # ------------------------------------------------------------------------------ ENUM / SET
    case(
        "enum",
        "enum('a','b''q','c,d','unsigned')",
        ("'a'", '"a"'),
        ("'c,d'", '"c,d"'),
        ("'b''q'", '"b\'q"'),
        ("'unsigned'", '"unsigned"'),
        ("'nope'", '""'),
        NULL,
        setup=ZERO_DATES,
    ),
    case("enum_latin1", "enum('é','ü') CHARACTER SET latin1", ("'é'", '"é"'), ("'ü'", '"ü"'), NULL),
    case("enum_300", ENUM300, ("'v299'", '"v299"'), ("'v0'", '"v0"'), NULL),
    case(
        "set",
        "set('a','b','c','d')",
        ("'a,c'", '["a","c"]'),
        ("'c,a'", '["a","c"]'),
        ("''", "[]"),
        ("'a,b,c,d'", '["a","b","c","d"]'),
        NULL,
    ),
    case("set_20", SET20, ("'m19,m0'", '["m0","m19"]'), ("'m7,m8'", '["m7","m8"]'), NULL),
    case("set_64", SET64, ("'m63,m0'", '["m0","m63"]'), ("'m32'", '["m32"]'), NULL),
    # ------------------------------------------------------------------------------ JSON
    # MySQL's binary JSON as mysql-binlog-connector-java prints it (compact); MariaDB's JSON, a LONGTEXT, as the
    # text it holds.
    case("json", "json", *_JSON, mariadb=_verbatim(_JSON)),
    # Doubles inside JSON as Maxwell prints them: Java's Double.toString when it has no exponent, else the
    # double's exact decimal expansion (BigDecimal.toPlainString). Integers of every width, uint64 included.
    case("json_numbers", "json", *_JSON_NUMBERS, mariadb=_verbatim(_JSON_NUMBERS)),
    # The JSON document null and SQL NULL: Maxwell's text prints both `null`; the change log marks the document
    # (`json_null`), so that compaction, history and undo keep it a JSON value.
    # MariaDB's text ` null ` is printed `null` (a document null, whatever its spacing).
    case("json_null", "json", *_JSON_NULLS, mariadb=("null", "null", "[null]", '"null"', "null")),
    # Over 64 KiB: MySQL's binary JSON switches to 4-byte offsets (large object, large array).
    case(
        "json_large",
        "json",
        ("JSON_OBJECT('k', REPEAT('x', 70000), 'n', 1)", '{"k":"' + "x" * 70000 + '","n":1}'),
        ("CONCAT('[', REPEAT('1,', 40000), '1]')", "[" + "1," * 40000 + "1]"),
        ("JSON_ARRAY(REPEAT('y', 70000), JSON_OBJECT('a', 2.5))", '["' + "y" * 70000 + '",{"a":2.5}]'),
        NULL,
        mariadb=(  # MariaDB's JSON functions write ", " and ": "
            '{"k": "' + "x" * 70000 + '", "n": 1}',
            "[" + "1," * 40000 + "1]",
            '["' + "y" * 70000 + '", {"a": 2.5}]',
            "null",
        ),
    ),
    # MySQL only: DECIMAL and temporal values inside a JSON document are opaque values of their own type in the
    # binary form (MariaDB's JSON is text: a CAST inside JSON_ARRAY becomes a number or a string there).
    case(
        "json_opaque",
        "json",
        (
            "JSON_ARRAY(CAST('2024-01-02' AS DATE), CAST('12:34:56' AS TIME), CAST('12:34:56.5' AS TIME(1)), "
            "CAST('-01:00:00.000250' AS TIME(6)), CAST('2024-01-02 03:04:05.123' AS DATETIME(3)), "
            "CAST('2024-01-02 03:04:05' AS DATETIME))",
            '["2024-01-02","12:34:56","12:34:56.5","-01:00:00.00025","2024-01-02 03:04:05.123","2024-01-02 03:04:05"]',
        ),
        (
            "JSON_OBJECT('d', CAST(1.50 AS DECIMAL(5,2)), 'neg', CAST(-0.001 AS DECIMAL(10,3)))",
            '{"d":1.50,"neg":-0.001}',
        ),
        ("JSON_ARRAY(CAST('ab' AS BINARY))", '["YWI="]'),
        NULL,
        flavors=MYSQL,
    ),
    # ------------------------------------------------------------------------------ MySQL-only columns
    # VECTOR (9.0+): Maxwell has no VECTOR; rendered as a JSON array of its float32 values, each as a FLOAT
    # column renders (shortest float32 digits), so a consumer reads numbers, not opaque bytes.
    case(
        "vector",
        "vector(3)",
        ("STRING_TO_VECTOR('[1,2.5,-3]')", "[1.0,2.5,-3.0]"),
        ("STRING_TO_VECTOR('[0.1,1e-7,3.4028235e38]')", "[0.1,1.0E-7,3.4028235E38]"),
        NULL,
        flavors=MYSQL,
    ),
    # A column an index expression hides (MySQL's functional index): not a column of the table for a reader.
    case("functional_index", "int, INDEX ((v + 1))", ("7", "7"), ("-1", "-1"), NULL, flavors=MYSQL),
    case(
        "collation_0900",
        "varchar(20) COLLATE utf8mb4_0900_as_cs",
        _s("é😀\uff21"),
        _s("abc"),
        NULL,
        flavors=MYSQL,
    ),
    case("collation_ja_0900", "varchar(20) COLLATE utf8mb4_ja_0900_as_cs", _s("日本語ｶﾅ"), NULL, flavors=MYSQL),
    case("collation_0900_bin", "char(5) COLLATE utf8mb4_0900_bin", _s("ß"), NULL, flavors=MYSQL),
    # Invisible columns (MySQL 8.0.23+, MariaDB 10.3+) are in every row image.
    case("invisible", "int INVISIBLE", ("5", "5"), NULL),
    # ------------------------------------------------------------------------------ GEOMETRY (WKT)
    # JTS's layout, as Maxwell prints it; coordinates with all their shortest digits (JTS keeps 16 fraction digits:
    # 0.30000000000000004 becomes 0.3 in Maxwell's lines, a documented difference).
    case(
        "geometry",
        "geometry",
        ("ST_GeomFromText('POINT(1 2)')", '"POINT (1 2)"'),
        ("ST_GeomFromText('LINESTRING(0 0,1 1,2 2)')", '"LINESTRING (0 0, 1 1, 2 2)"'),
        (
            "ST_GeomFromText('POLYGON((0 0,10 0,10 10,0 10,0 0),(1 1,2 1,2 2,1 1))')",
            '"POLYGON ((0 0, 10 0, 10 10, 0 10, 0 0), (1 1, 2 1, 2 2, 1 1))"',
        ),
        ("ST_GeomFromText('MULTIPOINT(1 1,2 2)')", '"MULTIPOINT ((1 1), (2 2))"'),
        ("ST_GeomFromText('MULTILINESTRING((0 0,1 1),(2 2,3 3))')", '"MULTILINESTRING ((0 0, 1 1), (2 2, 3 3))"'),
        (
            "ST_GeomFromText('MULTIPOLYGON(((0 0,1 0,1 1,0 0)),((2 2,3 2,3 3,2 2)))')",
            '"MULTIPOLYGON (((0 0, 1 0, 1 1, 0 0)), ((2 2, 3 2, 3 3, 2 2)))"',
        ),
        (
            "ST_GeomFromText('GEOMETRYCOLLECTION(POINT(1 1),LINESTRING(0 0,1 1))')",
            '"GEOMETRYCOLLECTION (POINT (1 1), LINESTRING (0 0, 1 1))"',
        ),
        ("ST_GeomFromText('GEOMETRYCOLLECTION EMPTY')", '"GEOMETRYCOLLECTION EMPTY"'),
        ("ST_GeomFromText('POINT(-1.5 0.30000000000000004)')", '"POINT (-1.5 0.30000000000000004)"'),
        ("ST_GeomFromText('POINT(1e20 1e-7)')", '"POINT (100000000000000000000 0.0000001)"'),
        NULL,
    ),
    case("point", "point", ("POINT(1.5, -2.25)", '"POINT (1.5 -2.25)"'), NULL),
    case("linestring", "linestring", ("LINESTRING(POINT(1, 2), POINT(3, 4))", '"LINESTRING (1 2, 3 4)"'), NULL),
    case(
        "polygon",
        "polygon",
        ("ST_GeomFromText('POLYGON((0 0,1 0,0 1,0 0))')", '"POLYGON ((0 0, 1 0, 0 1, 0 0))"'),
        NULL,
    ),
    case(
        "geometrycollection",
        "geometrycollection",
        ("ST_GeomFromText('GEOMETRYCOLLECTION(POINT(3 4))')", '"GEOMETRYCOLLECTION (POINT (3 4))"'),
        NULL,
    ),
    # ------------------------------------------------------------------------------ generated columns
    case(
        "generated_virtual",
        "bigint AS (b * 10) VIRTUAL",
        ("7", "70"),
        ("-3", "-30"),
        NULL,
        base="int",
    ),
    case(
        "generated_stored",
        "varchar(40) AS (CONCAT(b, '!')) STORED",
        ("'x'", '"x!"'),
        ("'é'", '"é!"'),
        NULL,
        base="varchar(20)",
    ),
]


def cases_for(flavor: str) -> list[Case]:
    """The cases a server of `flavor` runs."""
    return [c for c in CASES if flavor in c.flavors]


CASES_BY_NAME = {c.name: c for c in CASES}
assert len(CASES_BY_NAME) == len(CASES), "case names must be unique"
assert all(len(c.values) == len(c.expected) for c in CASES)
