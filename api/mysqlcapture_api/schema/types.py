"""The column type vocabulary shared by schema capture and the DDL parser: aliases, charsets, sizes."""

from __future__ import annotations

from mysqlcapture_api.schema.model import BINARY_TYPES, ENUM_TYPES, INTEGER_TYPES, STRING_TYPES

GEOMETRY_TYPES = frozenset(
    {
        "geometry",
        "point",
        "linestring",
        "polygon",
        "multipoint",
        "multilinestring",
        "multipolygon",
        "geometrycollection",
    }
)
NUMERIC_TYPES = INTEGER_TYPES | {"decimal", "float", "double"}
TEXT_TYPES = ("tinytext", "text", "mediumtext", "longtext")
BLOB_TYPES = ("tinyblob", "blob", "mediumblob", "longblob")
# Types whose values are characters in a charset (and follow the table's default charset).
CHARSET_TYPES = STRING_TYPES | ENUM_TYPES | {"json"}
KNOWN_TYPES = (
    NUMERIC_TYPES
    | STRING_TYPES
    | BINARY_TYPES
    | ENUM_TYPES
    | GEOMETRY_TYPES
    | {"bit", "date", "time", "datetime", "timestamp", "year", "json", "vector"}
)

# Maxwell's unalias_type plus MariaDB's synonyms (the right side is what information_schema reports).
ALIASES = {
    "geomcollection": "geometrycollection",  # MySQL 8+'s information_schema name
    "integer": "int",
    "int1": "tinyint",
    "int2": "smallint",
    "int3": "mediumint",
    "int4": "int",
    "int8": "bigint",
    "middleint": "mediumint",
    "bool": "tinyint",
    "boolean": "tinyint",
    "numeric": "decimal",
    "dec": "decimal",
    "fixed": "decimal",
    "real": "double",
    "float8": "double",
    "float4": "float",
    "character": "char",
    "nchar": "char",
    "nvarchar": "varchar",
    "varcharacter": "varchar",
}

CHARSET_MAXLEN = {
    "armscii8": 1,
    "ascii": 1,
    "big5": 2,
    "binary": 1,
    "cp1250": 1,
    "cp1251": 1,
    "cp1256": 1,
    "cp1257": 1,
    "cp850": 1,
    "cp852": 1,
    "cp866": 1,
    "cp932": 2,
    "dec8": 1,
    "eucjpms": 3,
    "euckr": 2,
    "gb18030": 4,
    "gb2312": 2,
    "gbk": 2,
    "geostd8": 1,
    "greek": 1,
    "hebrew": 1,
    "hp8": 1,
    "keybcs2": 1,
    "koi8r": 1,
    "koi8u": 1,
    "latin1": 1,
    "latin2": 1,
    "latin5": 1,
    "latin7": 1,
    "macce": 1,
    "macroman": 1,
    "sjis": 2,
    "swe7": 1,
    "tis620": 1,
    "ucs2": 2,
    "ujis": 3,
    "utf16": 4,
    "utf16le": 4,
    "utf32": 4,
    "utf8mb3": 3,
    "utf8mb4": 4,
}
_BY_LENGTH = sorted(CHARSET_MAXLEN, key=len, reverse=True)
_SIZE_LIMITS = (255, 65535, 16777215)


class UnsupportedColumnTypeError(ValueError):
    """A column type the worker cannot decode; the message names the table, the column and the type."""

    def __init__(self, message: str, *, database: str = "", table: str = "") -> None:
        super().__init__(message)
        self.database = database
        self.table = table


def unsupported(database: str, table: str, column: str, type_name: str) -> UnsupportedColumnTypeError:
    return UnsupportedColumnTypeError(
        f"column {database}.{table}.{column} has type {type_name!r}, which the capture cannot decode. "
        "Exclude the table (spec.tables.exclude) or change the column to a supported type.",
        database=database,
        table=table,
    )


def charset_name(name: str) -> str:
    """A charset name as information_schema spells it (MariaDB's `utf8` is `utf8mb3`)."""
    lowered = name.lower()
    return "utf8mb3" if lowered in ("utf8", "utf8mb3") else lowered


def charset_of_collation(collation: str) -> str | None:
    """The charset a collation belongs to (`latin1_swedish_ci` -> `latin1`); None when it does not say."""
    lowered = collation.lower()
    if lowered == "binary":
        return "binary"
    if lowered.startswith("utf8_"):
        return "utf8mb3"
    for cs in _BY_LENGTH:
        if lowered.startswith(cs + "_"):
            return cs
    return None


def _sized(family: tuple[str, ...], nbytes: int) -> str:
    for limit, name in zip(_SIZE_LIMITS, family, strict=False):
        if nbytes <= limit:
            return name
    return family[-1]


def text_type_for(length: int, charset: str) -> str:
    """The TEXT type MariaDB creates for TEXT(length) in `charset` (the smallest holding length chars)."""
    return _sized(TEXT_TYPES, length * CHARSET_MAXLEN.get(charset, 4))


def blob_type_for(length: int) -> str:
    return _sized(BLOB_TYPES, length)


def converted_text_type(type_name: str, old_charset: str | None, new_charset: str) -> str:
    """The TEXT type after CONVERT TO CHARACTER SET: big enough for as many characters as before."""
    index = TEXT_TYPES.index(type_name)
    max_bytes = (*_SIZE_LIMITS, 4294967295)[index]
    chars = max_bytes // CHARSET_MAXLEN.get(old_charset or "utf8mb4", 4)
    grown = text_type_for(chars, new_charset)
    return grown if TEXT_TYPES.index(grown) > index else type_name


def binary_form(type_name: str) -> str:
    """The binary type a character type becomes under CHARACTER SET binary (char -> binary, text -> blob)."""
    if type_name in TEXT_TYPES:
        return BLOB_TYPES[TEXT_TYPES.index(type_name)]
    return {"char": "binary", "varchar": "varbinary"}.get(type_name, type_name)


def parse_enum_values(column_type: str) -> tuple[str, ...]:
    """Members of `enum('a','b''c')` as information_schema.COLUMNS.COLUMN_TYPE writes them, unescaped."""
    body = column_type[column_type.index("(") + 1 : column_type.rindex(")")]
    values: list[str] = []
    i = 0
    while i < len(body):
        if body[i] != "'":
            i += 1
            continue
        i += 1
        out: list[str] = []
        while i < len(body):
            ch = body[i]
            if ch == "'" and body[i + 1 : i + 2] == "'":
                out.append("'")
                i += 2
            elif ch == "\\" and i + 1 < len(body):
                out.append(body[i + 1])
                i += 2
            elif ch == "'":
                i += 1
                break
            else:
                out.append(ch)
                i += 1
        values.append("".join(out))
    return tuple(values)
