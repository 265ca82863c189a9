"""MySQL/MariaDB collation ids and charset names to the Python codecs that decode them."""

from __future__ import annotations

from collections.abc import Callable

# Collation id -> charset, MySQL 8 and MariaDB 10.11 merged (they agree wherever both define an id).
# "a-b:name" is a run of ids; generated from information_schema.COLLATIONS and
# COLLATION_CHARACTER_SET_APPLICABILITY of both servers.
_RUNS = (
    "1:big5 2:latin2 3:dec8 4:cp850 5:latin1 6:hp8 7:koi8r 8:latin1 9:latin2 10:swe7 11:ascii 12:ujis "
    "13:sjis 14:cp1251 15:latin1 16:hebrew 18:tis620 19:euckr 20:latin7 21:latin2 22:koi8u 23:cp1251 "
    "24:gb2312 25:greek 26:cp1250 27:latin2 28:gbk 29:cp1257 30:latin5 31:latin1 32:armscii8 33:utf8mb3 "
    "34:cp1250 35:ucs2 36:cp866 37:keybcs2 38:macce 39:macroman 40:cp852 41-42:latin7 43:macce 44:cp1250 "
    "45-46:utf8mb4 47-49:latin1 50-52:cp1251 53:macroman 54-55:utf16 56:utf16le 57:cp1256 58-59:cp1257 "
    "60-61:utf32 62:utf16le 63:binary 64:armscii8 65:ascii 66:cp1250 67:cp1256 68:cp866 69:dec8 70:greek "
    "71:hebrew 72:hp8 73:keybcs2 74:koi8r 75:koi8u 76:utf8mb3 77:latin2 78:latin5 79:latin7 80:cp850 "
    "81:cp852 82:swe7 83:utf8mb3 84:big5 85:euckr 86:gb2312 87:gbk 88:sjis 89:tis620 90:ucs2 91:ujis "
    "92-93:geostd8 94:latin1 95-96:cp932 97-98:eucjpms 99:cp1250 101-124:utf16 128-151:ucs2 159:ucs2 "
    "160-183:utf32 192-215:utf8mb3 223:utf8mb3 224-247:utf8mb4 248-250:gb18030 255-271:utf8mb4 "
    "273-275:utf8mb4 277-294:utf8mb4 296-298:utf8mb4 300:utf8mb4 303-323:utf8mb4 576-578:utf8mb3 "
    "608-610:utf8mb4 640-642:ucs2 672-674:utf16 736-738:utf32 1025:big5 1027:dec8 1028:cp850 1030:hp8 "
    "1031:koi8r 1032:latin1 1033:latin2 1034:swe7 1035:ascii 1036:ujis 1037:sjis 1040:hebrew 1042:tis620 "
    "1043:euckr 1046:koi8u 1048:gb2312 1049:greek 1050:cp1250 1052:gbk 1054:latin5 1056:armscii8 "
    "1057:utf8mb3 1059:ucs2 1060:cp866 1061:keybcs2 1062:macce 1063:macroman 1064:cp852 1065:latin7 "
    "1067:macce 1069-1070:utf8mb4 1071:latin1 1074-1075:cp1251 1077:macroman 1078-1079:utf16 1080:utf16le "
    "1081:cp1256 1082-1083:cp1257 1084-1085:utf32 1086:utf16le 1088:armscii8 1089:ascii 1090:cp1250 "
    "1091:cp1256 1092:cp866 1093:dec8 1094:greek 1095:hebrew 1096:hp8 1097:keybcs2 1098:koi8r 1099:koi8u "
    "1101:latin2 1102:latin5 1103:latin7 1104:cp850 1105:cp852 1106:swe7 1107:utf8mb3 1108:big5 1109:euckr "
    "1110:gb2312 1111:gbk 1112:sjis 1113:tis620 1114:ucs2 1115:ujis 1116-1117:geostd8 1119-1120:cp932 "
    "1121-1122:eucjpms 1125:utf16 1147:utf16 1152:ucs2 1174:ucs2 1184:utf32 1206:utf32 1216:utf8mb3 "
    "1238:utf8mb3 1248:utf8mb4 1270:utf8mb4"
)


def _expand(runs: str) -> dict[int, str]:
    out: dict[int, str] = {}
    for run in runs.split():
        ids, name = run.split(":")
        first, _, last = ids.partition("-")
        for i in range(int(first), int(last or first) + 1):
            out[i] = name
    return out


_BY_ID = _expand(_RUNS)
# MariaDB 10.10+ UCA-14.0.0 collations: id = 2048 + 256 * charset + variant.
_UCA1400 = ("utf8mb3", "utf8mb4", "ucs2", "utf16", "utf32")


def charset_of_collation(collation_id: int | None) -> str | None:
    """The charset name of a collation id, None when unknown."""
    if collation_id is None:
        return None
    name = _BY_ID.get(collation_id)
    if name is None and 2048 <= collation_id < 2048 + 256 * len(_UCA1400):
        name = _UCA1400[(collation_id - 2048) >> 8]
    return name


# MySQL charset names -> Python codecs: Maxwell's supported list (the charsets Java's Charset.forName knows by their
# MySQL name, and ujis as EUC-JP; plus utf16le). MySQL's latin1 is cp1252 with the five bytes cp1252 leaves
# undefined mapped to the C1 controls (see _latin1). cp932 is Windows-31J, as MySQL reads it (Java's "cp932" is
# IBM-942C, which differs from it in a few dozen codes: README lists the differences from Maxwell).
CODECS: dict[str, str] = {
    "utf8": "utf-8",
    "utf8mb3": "utf-8",
    "utf8mb4": "utf-8",
    "latin1": "cp1252",
    "latin2": "iso8859_2",
    "ascii": "ascii",
    "ucs2": "utf-16-be",
    "utf16": "utf-16-be",
    "utf16le": "utf-16-le",
    "utf32": "utf-32-be",
    "big5": "big5",
    "cp850": "cp850",
    "sjis": "shift_jis",
    "hebrew": "iso8859_8",
    "tis620": "tis_620",
    "euckr": "euc_kr",
    "gb2312": "gb2312",
    "greek": "iso8859_7",
    "cp1250": "cp1250",
    "gbk": "gbk",
    "latin5": "iso8859_9",
    "macroman": "mac_roman",
    "cp852": "cp852",
    "cp1251": "cp1251",
    "cp866": "cp866",
    "cp1256": "cp1256",
    "cp1257": "cp1257",
    "ujis": "euc_jp",
    "cp932": "cp932",
    "gb18030": "gb18030",
}

# latin-1 text -> MySQL latin1 (cp1252 where defined, C1 control characters elsewhere).
_LATIN1_FIX = {b: bytes([b]).decode("cp1252") for b in range(0x80, 0xA0) if b not in (0x81, 0x8D, 0x8F, 0x90, 0x9D)}
_LATIN1_TABLE = str.maketrans({chr(b): c for b, c in _LATIN1_FIX.items()})


def _latin1(raw: bytes) -> str:
    return raw.decode("latin-1").translate(_LATIN1_TABLE)


def text_decoder(charset: str) -> Callable[[bytes], str] | None:
    """A bytes -> str function for a MySQL charset, None when the charset is not supported.

    Undecodable bytes become U+FFFD, as Java's `new String(bytes, charset)` does in Maxwell.
    """
    if charset == "latin1":
        return _latin1
    codec = CODECS.get(charset)
    if codec is None:
        return None
    if codec == "utf-8":
        return utf8_decode
    return lambda raw: raw.decode(codec, "replace")


def utf8_decode(raw: bytes) -> str:
    return raw.decode("utf-8", "replace")
