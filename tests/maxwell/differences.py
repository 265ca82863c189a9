"""Where mysqlcapture's lines differ from Maxwell 1.44's on purpose: Maxwell changes the value. README's table
"differences from Maxwell" says the same, with the reasons; the compatibility test allows exactly these.

VALUES: (table, column) of a `data`/`old` value (an `old` Maxwell leaves out because its two wrong values are
equal is one too). DEFS: tables whose `def` differs in their DDL lines.

DEF_ORDER: not a difference in kind but Maxwell's own variation: whether a DDL's `def` has "primary-key" before
"columns" or after changes from one Maxwell process to the next (Jackson serializes TableDef's getters in the order
the JVM lists them; of the six Maxwells of the Kafka recording four put "primary-key" first, two "columns"). The
worker always puts "primary-key" first; a `def` is compared member by member, in either order.
"""

from __future__ import annotations

_TIME = "TIME outside 00:00:00-23:59:59 (negative, or beyond 24 h): Maxwell wraps it through java.sql.Time"

VALUES: dict[tuple[str, str], str] = {
    **{(t, "v"): _TIME for t in ("time", "time1", "time2", "time3", "time4", "time5", "time6")},
    **{(t, "v"): _TIME for t in ("time1_limit", "time2_limit", "time3_limit", "time6_limit")},
    ("date", "v"): "a date with zero month or day ('2020-00-00'): Maxwell prints 0000-00-00",
    ("datetime", "v"): "a datetime with zero month or day: Maxwell prints 0000-00-00 00:00:00",
    ("year", "v"): "YEAR 0000: Maxwell prints 1900",
    ("int_zerofill", "v"): "ZEROFILL makes a column UNSIGNED: Maxwell reads it signed (4294967295 becomes -1)",
    ("latin1", "v"): "MySQL's latin1 maps 0x81, 0x8D, 0x8F, 0x90, 0x9D to C1 controls; Maxwell prints U+FFFD",
    ("binary4", "v"): "BINARY(N) keeps its trailing 0x00 bytes (the server returns them); Maxwell drops them",
    ("char_binary_charset", "v"): "the same for CHAR(N) CHARACTER SET binary, which is BINARY(N)",
    ("enum", "v"): "an ENUM member written 'b''q' is b'q (Maxwell keeps both quotes); the invalid value '' is ''"
    " (Maxwell: null)",
    ("float", "v"): "Java 17 prints 1.17549435E-38 for the float Java 19+ (Maxwell's image) prints 1.1754944E-38",
    ("geometry", "v"): "a coordinate keeps all its digits: JTS rounds to 16 fraction digits (0.30000000000000004 "
    "becomes 0.3)",
    ("json_opaque", "v"): "a negative TIME inside MySQL's binary JSON: Maxwell prints '02:0-1:0-1.00000-25'",
}

DEFS: dict[str, str] = {
    "int_zerofill": "ZEROFILL: the column is unsigned",
    "enum": "the member 'b''q' is b'q",
    "char_binary_charset": "the type the server stores (binary), not the one written (char ... CHARACTER SET binary)",
    "varchar_binary_charset": "the type the server stores (varbinary), not the one written",
}

PARTITION_BY_JSON = (
    "partitionBy: column over a JSON column: Maxwell's row map holds the value as a RawJSONString, which has no "
    "toString, so Maxwell hashes its identity hash, a different partition in every Maxwell process; the worker "
    "hashes the JSON text (an array printed as Java prints a list)"
)
