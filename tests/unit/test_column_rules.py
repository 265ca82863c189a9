"""spec.columns on rendered rows: the compiled batch path equals the reference, value for value, and both give the
values a reader would compute from the source's own (HMAC of the text, characters kept or masked)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import random

import pyarrow as pa
import pytest
from mysqlcapture_api.changelog import pk_hash
from mysqlcapture_api.columns import Columns
from mysqlcapture_api.javatext import jackson_string
from mysqlcapture_api.schema.model import ColumnDef, TableDef
from mysqlcapture_worker.column_rules import ColumnRuleError, ColumnRules, TableRules, elements, members
from pydantic import ValidationError

KEY = b"k3y-\x00-\xff"
TABLE = TableDef(
    "shop",
    "users",
    (
        ColumnDef("id", "int"),
        ColumnDef("email", "varchar", charset="utf8mb4"),
        ColumnDef("password_hash", "varchar", charset="utf8mb4"),
        ColumnDef("card", "char", charset="latin1"),
        ColumnDef("note", "text", charset="utf8mb4"),
        ColumnDef("photo", "blob"),
        ColumnDef("doc", "json"),
        ColumnDef("score", "double"),
        ColumnDef("kind", "enum", enum_values=("a", "b")),
        ColumnDef("plain", "varchar", charset="utf8mb4"),
    ),
    primary_key=("id", "email"),
)


def rules(algorithm: str = "sha256", keep: int = 4, length: int = 3) -> ColumnRules:
    spec = Columns.model_validate(
        {
            "exclude": ["*.*.password_hash"],
            "hash": {
                "columns": ["shop.users.email", "shop.users.photo", "shop.users.doc", "shop.users.score"],
                "algorithm": algorithm,
                "keyFrom": {"env": "K"},
            },
            "mask": [{"columns": ["shop.users.card"], "keep": keep, "with": "#"}],
            "truncate": [{"columns": ["shop.users.note", "shop.users.kind"], "length": length}],
        }
    )
    return ColumnRules(spec, KEY)


def mac(raw: bytes, algorithm: str = "sha256") -> str:
    return hmac.new(KEY, raw, getattr(hashlib, algorithm)).hexdigest()


TEXTS = ["", "a", "héllo wörld", "tab\there\nnew", 'quo"te\\back', "😀 emoji 😀x", "\x01\x1f", "日本語のテキスト"]


def random_text(rnd: random.Random) -> str:
    return "".join(
        rnd.choice(["a", "é", "😀", "\n", '"', "\\", "\x02", "語", " ", "Z"]) for _ in range(rnd.randint(0, 12))
    )


def row(rnd: random.Random) -> str:
    def text(v: str | None) -> str:
        return "null" if v is None else jackson_string(v).decode()

    maybe = lambda v: None if rnd.random() < 0.15 else v  # noqa: E731
    photo = maybe(base64.b64encode(rnd.randbytes(rnd.randint(0, 9))).decode())
    doc = rnd.choice(['{"a":[1,{"b":"}]"}],"c":null}', "[]", '"s"', "null", '{"k":"v\\"x"}'])
    return (
        "{"
        + ",".join(
            [
                f'"id":{rnd.randint(-5, 10**12)}',
                f'"email":{text(maybe(random_text(rnd)))}',
                f'"password_hash":{text(maybe(random_text(rnd)))}',
                f'"card":{text(maybe(random_text(rnd)))}',
                f'"note":{text(maybe(random_text(rnd)))}',
                f'"photo":{text(photo)}',
                f'"doc":{doc}',
                f'"score":{rnd.choice(["1.0E10", "-0.0", "3.25", "null"])}',
                f'"kind":{text(maybe(rnd.choice(["a", "b", ""])))}',
                f'"plain":{text(maybe(random_text(rnd)))}',
            ]
        )
        + "}"
    )


@pytest.mark.parametrize("algorithm", ["sha256", "sha512"])
@pytest.mark.parametrize("seed", range(6))
def test_the_compiled_batch_equals_the_reference_value_for_value(algorithm: str, seed: int) -> None:
    rnd = random.Random(seed)
    table_rules = rules(algorithm, keep=rnd.randint(0, 5), length=rnd.randint(0, 5)).for_table(TABLE)
    assert table_rules is not None and table_rules.native is not None
    datas = [row(rnd) for _ in range(300)]
    # `old` holds some columns only, in table order.
    olds = ["{" + ",".join(f"{k}:{v}" for k, v in members(d) if rnd.random() < 0.5) + "}" for d in datas]
    pks = ["[" + ",".join(v for k, v in members(d) if k in ('"id"', '"email"')) + "]" for d in datas]
    hashes = [pk_hash("shop", "users", p) for p in pks]
    arrays = [pa.array(x, pa.string()) for x in (datas, olds, pks, hashes)]
    cut = rnd.randint(0, 299)  # a sliced batch (a chunk's cut) as well as a whole one
    for args in (arrays, [a.slice(cut) for a in arrays]):
        compiled = compiled_batch(table_rules, *args)
        reference = table_rules.batch(*args)
        for got, want in zip(compiled, reference, strict=True):
            assert got is not None and want is not None
            assert got.to_pylist() == want.to_pylist()
    _, _, pk, hashed = compiled_batch(table_rules, *arrays)
    assert hashed is not None and pk is not None
    assert hashed.to_pylist() == [pk_hash("shop", "users", k) for k in pk.to_pylist()]


def compiled_batch(
    rules: TableRules, data: pa.StringArray, old: pa.StringArray, pk: pa.StringArray, hashes: pa.StringArray
) -> tuple[pa.StringArray, ...]:
    """The compiled rules on rendered text (`Redactor.objects`/`keys`, the functions the renderers apply)."""
    assert rules.native is not None

    def buffers(array: pa.StringArray) -> tuple[int, bytes, bytes]:
        n = len(array)
        _, offsets, values = array.buffers()
        offset_bytes = offsets.to_pybytes()[4 * array.offset : 4 * (array.offset + n + 1)]
        start, end = (int.from_bytes(offset_bytes[i : i + 4], "little") for i in (0, len(offset_bytes) - 4))
        return n, values.to_pybytes()[start:end], offset_bytes

    def strings(column: tuple[int, bytes, bytes]) -> pa.StringArray:
        n, values, offsets = column
        return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(values))

    keys, hashed = rules.native.keys(*buffers(pk))
    return (
        strings(rules.native.objects(*buffers(data))),
        strings(rules.native.objects(*buffers(old))),
        strings(keys),
        strings(hashed),
    )


def test_values_are_what_a_reader_computes_from_the_source_values() -> None:
    table_rules = rules(keep=4, length=3).for_table(TABLE)
    assert table_rules is not None
    photo = bytes(range(7))
    data = (
        '{"id":7,"email":"A😀b","password_hash":"secret","card":"4111111111111111","note":"😀a\\nbc",'
        f'"photo":"{base64.b64encode(photo).decode()}","doc":{{"x":[1,2]}},"score":1.0E10,"kind":"b",'
        '"plain":"keep me"}'
    )
    out = table_rules.object(data)
    assert out is not None
    got = dict(members(out))
    assert '"password_hash"' not in got
    assert got['"email"'] == f'"{mac("A😀b".encode())}"'
    assert got['"photo"'] == f'"{mac(photo)}"'  # a binary column: its bytes
    doc = b'{"x":[1,2]}'
    assert got['"doc"'] == f'"{mac(doc)}"'  # a JSON document: its text as rendered
    assert got['"score"'] == f'"{mac(b"1.0E10")}"'
    assert got['"card"'] == '"############1111"'
    assert got['"note"'] == '"\\uD83D\\uDE00a\\n"'  # three characters, as Jackson escapes them
    assert got['"kind"'] == '"b"'
    assert got['"id"'] == "7" and got['"plain"'] == '"keep me"'
    assert table_rules.object('{"email":null,"card":null}') == '{"email":null,"card":null}'  # NULL stays NULL
    assert table_rules.key('[7,"A😀b"]') == f'[7,"{mac("A😀b".encode())}"]'
    assert elements('[1,"a,b",{"c":[2]}]') == ["1", '"a,b"', '{"c":[2]}']


def test_a_definition_leaves_excluded_columns_out_and_shows_hashed_ones_as_text() -> None:
    definition = rules().definition(TABLE.to_maxwell())
    names = [c["name"] for c in definition["columns"]]
    assert "password_hash" not in names and len(names) == len(TABLE.columns) - 1
    by_name = {c["name"]: c for c in definition["columns"]}
    assert by_name["score"] == {"type": "varchar", "name": "score", "charset": "ascii"}
    assert by_name["card"]["type"] == "char"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"exclude": ["shop.users.id"]}, "spec.columns.exclude: shop.users.id is in the primary key of shop.users"),
        (
            {"mask": [{"columns": ["shop.users.score"], "keep": 1}]},
            "spec.columns.mask: shop.users.score is DOUBLE; truncate and mask",
        ),
        ({"truncate": [{"columns": ["*.*.photo"], "length": 1}]}, "spec.columns.truncate: shop.users.photo is BLOB"),
    ],
)
def test_a_rule_that_cannot_apply_says_which_column_and_what_to_do(spec: dict[str, object], message: str) -> None:
    with pytest.raises(ColumnRuleError, match="^" + message.replace(".", r"\.")):
        ColumnRules(Columns.model_validate(spec)).for_table(TABLE)


def test_a_table_without_a_ruled_column_has_no_rules_and_patterns_are_checked() -> None:
    assert rules().for_table(TableDef("shop", "orders", (ColumnDef("id", "int"),), ("id",))) is None
    with pytest.raises(ValidationError, match=r"not a db\.table\.column pattern"):
        Columns.model_validate({"exclude": ["shop.users"]})
    with pytest.raises(ValidationError, match="set exactly one of env, file, secretKeyRef"):
        Columns.model_validate({"hash": {"columns": ["a.b.c"], "keyFrom": {}}})


def test_referential_action_keys_follow_the_parent_tables_rules() -> None:
    from mysqlcapture_worker.engine.referential import ruled_keys
    from mysqlcapture_worker.engine.rendering import render

    table_rules = rules().for_table(TABLE)
    assert table_rules is not None
    keys = [{"old": [7, "a@b"], "new": [7, "c@d"]}]
    got = ruled_keys(table_rules, ("id", "email"), keys)
    assert render(got) == f'[{{"old":[7,"{mac(b"a@b")}"],"new":[7,"{mac(b"c@d")}"]}}]'
    assert render(ruled_keys(table_rules, ("password_hash",), [{"old": ["x"]}])) == '[{"old":[null]}]'
    assert ruled_keys(table_rules, ("id",), keys) is keys
