"""GTID sets of both flavors: parsing, canonical printing, set algebra, containment and errors."""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Callable

import pytest
from mysqlcapture_worker.gtid import Gtid, GtidSet, gtid_in_set

pytestmark = pytest.mark.unit

A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
B = "24da167a-0c0c-11e8-8442-00059a3c7b00"  # sorts before A


def _set(text: str) -> GtidSet:
    return GtidSet.parse(text)


ROUND_TRIPS = [
    ("mysql-canonical", f"{A}:1-5:7", f"{A}:1-5:7"),
    ("mysql-two-uuids-sorted-lowercased", f"{A.upper()}:1-5,{B}:1-55", f"{B}:1-55,{A}:1-5"),
    ("mysql-server-output-with-newline", f"{A}:1-5,\n{B}:1-3", f"{B}:1-3,{A}:1-5"),
    ("mysql-adjacent-merged", f"{A}:1-3:4-6:8", f"{A}:1-6:8"),
    ("mysql-overlapping-merged", f"{A}:5-10:1-7", f"{A}:1-10"),
    ("mysql-nested-merged", f"{A}:1-10:3-4", f"{A}:1-10"),
    ("mysql-same-uuid-twice", f"{A}:1-2,{A}:3", f"{A}:1-3"),
    ("mysql-point-range", f"{A}:5-5", f"{A}:5"),
    ("mysql-spaces", f" {A} : 1-2 , {B}:9 ", f"{B}:9,{A}:1-2"),
    ("mysql-tagged", f"{A}:tag:1-5", f"{A}:tag:1-5"),
    ("mysql-tags-sorted-lowercased", f"{A}:1-5:Blue:1-2:alpha:3", f"{A}:1-5:alpha:3:blue:1-2"),
    ("mysql-tag-then-untagged", f"{A}:x:1,{A}:2", f"{A}:2:x:1"),
    ("mysql-max-gno", f"{A}:{2**63 - 1}", f"{A}:{2**63 - 1}"),
    ("mariadb-one", "0-1-100", "0-1-100"),
    ("mariadb-domains-sorted", "2-5-7,0-1-100,1-1-3", "0-1-100,1-1-3,2-5-7"),
    ("mariadb-binlog-state-highest-seq", "0-1-100,0-3-120,0-2-90", "0-3-120"),
    ("mariadb-spaces", " 0-1-5 , 1-2-3 ", "0-1-5,1-2-3"),
    ("empty", "", ""),
    ("blank", " \n ", ""),
]


@pytest.mark.parametrize("text,expected", [c[1:] for c in ROUND_TRIPS], ids=[c[0] for c in ROUND_TRIPS])
def test_parse_prints_canonical_form(text: str, expected: str) -> None:
    parsed = _set(text)
    assert str(parsed) == expected
    assert _set(str(parsed)) == parsed
    assert str(_set(str(parsed))) == expected


@pytest.mark.parametrize(
    "text,flavor,expected",
    [
        (f"{A}:1", None, "mysql"),
        ("0-1-1", None, "mariadb"),
        ("", None, None),
        (None, None, None),
        ("", "mysql", "mysql"),
        ("", "mariadb", "mariadb"),
        (f"{A}:1", "mysql", "mysql"),
        ("0-1-1", "mariadb", "mariadb"),
    ],
    ids=["mysql", "mariadb", "empty", "none", "empty-mysql", "empty-mariadb", "given-mysql", "given-mariadb"],
)
def test_flavor(text: str | None, flavor: str | None, expected: str | None) -> None:
    parsed = GtidSet.parse(text, flavor)  # type: ignore[arg-type]
    assert parsed.flavor == expected
    assert parsed.is_empty() is (not text)


def test_intervals_by_uuid_and_tag() -> None:
    s = _set(f"{A}:1-3:4-6:8:t:2,{B}:1")
    assert s.intervals(A) == ((1, 6), (8, 8))
    assert s.intervals(A.upper()) == ((1, 6), (8, 8))
    assert s.intervals(f"{A}:T") == ((2, 2),)
    assert s.intervals(B) == ((1, 1),)
    assert s.intervals("00000000-0000-0000-0000-000000000000") == ()
    assert _set("0-1-5").intervals(A) == ()


UNIONS = [
    ("mysql-disjoint-uuids", f"{A}:1-5", f"{B}:1-2", f"{B}:1-2,{A}:1-5"),
    ("mysql-adjacent", f"{A}:1-5", f"{A}:6-9", f"{A}:1-9"),
    ("mysql-overlap", f"{A}:1-5:9", f"{A}:4-7", f"{A}:1-7:9"),
    ("mysql-fills-gap", f"{A}:1-5:7-9", f"{A}:6", f"{A}:1-9"),
    ("mysql-tags-kept-apart", f"{A}:1-5", f"{A}:t:1-5", f"{A}:1-5:t:1-5"),
    ("mysql-with-empty", f"{A}:1-5", "", f"{A}:1-5"),
    ("mariadb-max-per-domain", "0-1-10,1-1-5", "0-2-12,2-3-1", "0-2-12,1-1-5,2-3-1"),
    ("mariadb-lower-seq-ignored", "0-1-10", "0-2-3", "0-1-10"),
    ("mariadb-with-empty", "0-1-10", "", "0-1-10"),
    ("empty-with-empty", "", "", ""),
]


@pytest.mark.parametrize("a,b,expected", [c[1:] for c in UNIONS], ids=[c[0] for c in UNIONS])
def test_union(a: str, b: str, expected: str) -> None:
    assert str(_set(a).union(_set(b))) == expected
    assert str(_set(a) | _set(b)) == expected
    assert _set(b) | _set(a) == _set(a) | _set(b)


SUBTRACTIONS = [
    ("mysql-hole", f"{A}:1-10", f"{A}:3-4", f"{A}:1-2:5-10"),
    ("mysql-many-holes", f"{A}:1-20", f"{A}:2:5-7:20", f"{A}:1:3-4:8-19"),
    ("mysql-spanning-two", f"{A}:1-5:10-15", f"{A}:4-11", f"{A}:1-3:12-15"),
    ("mysql-everything", f"{A}:1-10", f"{A}:1-10", ""),
    ("mysql-more-than-everything", f"{A}:3-4", f"{A}:1-10", ""),
    ("mysql-other-uuid", f"{A}:1-10", f"{B}:1-10", f"{A}:1-10"),
    ("mysql-one-uuid-of-two", f"{A}:1-3,{B}:1-2", f"{B}:1-2", f"{A}:1-3"),
    ("mysql-tag-is-not-untagged", f"{A}:1-5:t:1-5", f"{A}:1-5", f"{A}:t:1-5"),
    ("mysql-minus-empty", f"{A}:1-10", "", f"{A}:1-10"),
    ("empty-minus-mysql", "", f"{A}:1-10", ""),
    ("mariadb-domains-ahead", "0-1-10,1-1-5,2-1-3", "0-1-10,1-2-4", "1-1-5,2-1-3"),
    ("mariadb-behind", "0-1-10", "0-2-20", ""),
    ("mariadb-minus-empty", "0-1-10", "", "0-1-10"),
]


@pytest.mark.parametrize("a,b,expected", [c[1:] for c in SUBTRACTIONS], ids=[c[0] for c in SUBTRACTIONS])
def test_subtract(a: str, b: str, expected: str) -> None:
    assert str(_set(a).subtract(_set(b))) == expected
    assert str(_set(a) - _set(b)) == expected
    assert (_set(a) - _set(b)).is_empty() is (expected == "")


def test_mariadb_gaps_describe_missing_seq_ranges() -> None:
    assert _set("0-1-10,1-1-5,2-1-3").mariadb_gaps(_set("0-1-10,1-2-4")) == {1: (5, 5), 2: (1, 3)}
    assert _set("0-1-10").mariadb_gaps(_set("0-1-20")) == {}


CONTAINMENTS = [
    ("mysql-equal", f"{A}:1-5", f"{A}:1-3:4-5", True, True),
    ("mysql-superset", f"{A}:1-10,{B}:1", f"{A}:2-3", True, False),
    ("mysql-disjoint", f"{A}:1-5", f"{A}:6-9", False, False),
    ("mysql-partial-overlap", f"{A}:1-5", f"{A}:4-9", False, False),
    ("mysql-vs-empty", f"{A}:1-5", "", True, False),
    ("empty-vs-empty", "", "", True, True),
    ("mariadb-ahead", "0-1-10,1-1-5", "0-2-9", True, False),
    ("mariadb-missing-domain", "0-1-10", "0-1-10,1-1-1", False, True),
    ("mariadb-crossed", "0-1-10,1-1-1", "0-1-5,1-1-2", False, False),
    ("mariadb-same-seq-other-server", "0-1-5", "0-2-5", True, True),
    ("mariadb-vs-empty", "0-1-5", "", True, False),
]


@pytest.mark.parametrize("a,b,a_has_b,b_has_a", [c[1:] for c in CONTAINMENTS], ids=[c[0] for c in CONTAINMENTS])
def test_contains_both_ways(a: str, b: str, a_has_b: bool, b_has_a: bool) -> None:
    assert _set(a).contains(_set(b)) is a_has_b
    assert (_set(a) >= _set(b)) is a_has_b
    assert (_set(b) <= _set(a)) is a_has_b
    assert _set(b).contains(_set(a)) is b_has_a
    assert (_set(b) >= _set(a)) is b_has_a


ADDS = [
    ("mysql-into-empty", "", f"{A}:1", f"{A}:1"),
    ("mysql-extends-interval", f"{A}:1-5", f"{A}:6", f"{A}:1-6"),
    ("mysql-joins-intervals", f"{A}:1-5:7", f"{A}:6", f"{A}:1-7"),
    ("mysql-new-interval", f"{A}:1-5", f"{A}:9", f"{A}:1-5:9"),
    ("mysql-already-in", f"{A}:1-5", f"{A}:3", f"{A}:1-5"),
    ("mysql-new-uuid-uppercase", f"{A}:1-5", f"{B.upper()}:1", f"{B}:1,{A}:1-5"),
    ("mysql-tagged", f"{A}:1", f"{A}:T:2", f"{A}:1:t:2"),
    ("mariadb-into-empty", "", "0-1-1", "0-1-1"),
    ("mariadb-next-seq-new-server", "0-1-5,1-1-2", "0-2-6", "0-2-6,1-1-2"),
    ("mariadb-new-domain", "0-1-5", "1-1-1", "0-1-5,1-1-1"),
    ("mariadb-sets-even-lower-seq", "0-1-5", "0-1-3", "0-1-3"),
]


@pytest.mark.parametrize("start,gtid,expected", [c[1:] for c in ADDS], ids=[c[0] for c in ADDS])
def test_add_returns_new_set(start: str, gtid: str, expected: str) -> None:
    original = _set(start)
    assert str(original.add(gtid)) == expected
    assert str(original.add(Gtid.parse(gtid))) == expected
    assert str(original) == str(_set(start))


def test_a_streams_next_transaction_is_added_as_the_general_path_adds_it() -> None:
    """`add` of a GTID string takes a shortcut for a stream's next transaction (no parse, no normalizing again):
    random sets and GTIDs, added as text and as parsed GTIDs, give equal sets with equal text and flavor."""
    rng = random.Random(7)
    sids = [A, B, f"{A}:tg", f"{B}:x1"]
    for _ in range(3000):
        if rng.random() < 0.5:
            text = ",".join(
                f"{sid}:" + ":".join(f"{lo}-{lo + rng.randint(0, 4)}" for lo in sorted(rng.sample(range(1, 60, 6), 3)))
                for sid in rng.sample(sids, rng.randint(1, 3))
            )
            start = _set(text)
            sid, seq = rng.choice(sids), rng.randint(1, 70)
            gtid = f"{sid}:{seq}"
            if rng.random() < 0.5 and start.intervals(sid):
                gtid = f"{sid}:{start.intervals(sid)[-1][1] + 1}"  # the stream's next one
        else:
            start = _set(",".join(f"{d}-{rng.randint(1, 3)}-{rng.randint(1, 50)}" for d in rng.sample(range(4), 2)))
            gtid = f"{rng.randint(0, 4)}-{rng.randint(1, 3)}-{rng.randint(1, 60)}"
        quick, general = start.add(gtid), start.add(Gtid.parse(gtid))
        assert quick == general and str(quick) == str(general) and quick.flavor == general.flavor, (start, gtid)
        assert str(quick) == str(_set(str(quick))), (start, gtid)  # the shortcut's result is in canonical form


@pytest.mark.parametrize(
    "start,next_gtid",
    [
        (f"{A}:1-5,{B}:3", lambda n: f"{A}:{n + 5}"),  # the last source (B sorts first)
        (f"{A}:1-5,{B}:3", lambda n: f"{B}:{n + 3}"),
        (f"{A}:1-5:t:7", lambda n: f"{A}:t:{n + 7}"),  # a tag of the same uuid, last in the text
        (f"{A}:1-5:t:7", lambda n: f"{A}:{n + 5}"),
        ("0-1-10,1-2-4", lambda n: f"1-{1 + n % 3}-{n + 4}"),  # the last domain, its server changing
        ("0-1-10,1-2-4", lambda n: f"0-1-{n + 10}"),
        ("7-1-99", lambda n: f"7-1-{n + 99}"),
    ],
    ids=["last-sid", "first-sid", "last-tag", "untagged", "last-domain", "first-domain", "one-domain"],
)
def test_a_streams_set_text_follows_every_transaction(start: str, next_gtid: Callable[[int], str]) -> None:
    """The engine writes its set's text after every transaction (`add`'s shortcut, one after the other): always the
    text of the same set made anew."""
    gtids = _set(start)
    for n in range(1, 40):
        gtids = gtids.add(next_gtid(n))
        assert str(gtids) == str(_set(str(gtids))) == str(GtidSet(gtids.sids, gtids.domains)), (n, str(gtids))


MEMBERSHIP = [
    ("mysql-inside", f"{A}:3", f"{A}:1-5", True),
    ("mysql-first", f"{A}:1", f"{A}:1-5:9", True),
    ("mysql-in-gap", f"{A}:6", f"{A}:1-5:9", False),
    ("mysql-other-uuid", f"{B}:1", f"{A}:1-5", False),
    ("mysql-uppercase", f"{A.upper()}:5", f"{A}:1-5", True),
    ("mysql-tagged", f"{A}:t:2", f"{A}:t:1-2", True),
    ("mysql-untagged-not-in-tag", f"{A}:2", f"{A}:t:1-2", False),
    ("mariadb-below", "0-1-5", "0-2-7", True),
    ("mariadb-equal", "0-2-7", "0-2-7", True),
    ("mariadb-above", "0-1-8", "0-2-7", False),
    ("mariadb-other-domain", "1-1-1", "0-1-7", False),
    ("mysql-in-empty", f"{A}:1", "", False),
    ("mariadb-in-empty", "0-1-1", "", False),
]


@pytest.mark.parametrize("gtid,text,expected", [c[1:] for c in MEMBERSHIP], ids=[c[0] for c in MEMBERSHIP])
def test_gtid_in_set(gtid: str, text: str, expected: bool) -> None:
    assert gtid_in_set(gtid, text) is expected
    assert gtid_in_set(Gtid.parse(gtid), _set(text)) is expected
    assert (gtid in _set(text)) is expected


@pytest.mark.parametrize(
    "text,expected,printed",
    [
        (f"{A.upper()}:7", Gtid("mysql", 7, sid=A), f"{A}:7"),
        (f"{A}:Tag_1:7", Gtid("mysql", 7, sid=f"{A}:tag_1"), f"{A}:tag_1:7"),
        (" 0-1-100 ", Gtid("mariadb", 100, domain=0, server_id=1), "0-1-100"),
        (
            "4294967295-4294967295-18446744073709551615",
            Gtid("mariadb", 2**64 - 1, domain=2**32 - 1, server_id=2**32 - 1),
            "4294967295-4294967295-18446744073709551615",
        ),
    ],
    ids=["mysql", "mysql-tagged", "mariadb", "mariadb-max"],
)
def test_single_gtid_parse(text: str, expected: Gtid, printed: str) -> None:
    assert Gtid.parse(text) == expected
    assert str(Gtid.parse(text)) == printed


ERRORS: list[tuple[str, Callable[[], object], str]] = [
    (
        "garbage",
        lambda: _set("garbage"),
        "invalid GTID 'garbage': expected uuid:interval[:interval...] or domain-server-seq",
    ),
    ("short-uuid", lambda: _set("3e11fa47-71ca:1"), "invalid GTID '3e11fa47-71ca:1'"),
    ("zero-gno", lambda: _set(f"{A}:0"), f"invalid GTID interval '0' in '{A}:0'"),
    ("reversed-interval", lambda: _set(f"{A}:5-3"), f"invalid GTID interval '5-3' in '{A}:5-3'"),
    ("gno-too-big", lambda: _set(f"{A}:{2**63}"), f"invalid GTID interval '{2**63}'"),
    ("bad-interval", lambda: _set(f"{A}:1-x"), f"unexpected token '1-x' in GTID set element '{A}:1-x'"),
    ("empty-token", lambda: _set(f"{A}::1"), f"unexpected token '' in GTID set element '{A}::1'"),
    ("two-tags", lambda: _set(f"{A}:a:b:1"), "unexpected token 'b'"),
    ("uuid-alone", lambda: _set(A), f"GTID set element '{A}' does not end with an interval"),
    ("tag-alone", lambda: _set(f"{A}:1:t"), f"GTID set element '{A}:1:t' does not end with an interval"),
    ("trailing-comma", lambda: _set(f"{A}:1,"), f"empty element in GTID set '{A}:1,'"),
    ("mixed-flavors", lambda: _set(f"0-1-5,{A}:1"), f"mixes MySQL and MariaDB GTIDs at '{A}:1'"),
    ("mariadb-as-mysql", lambda: GtidSet.parse("0-1-5", "mysql"), "GTID set element '0-1-5' is not a MySQL GTID"),
    ("mysql-as-mariadb", lambda: GtidSet.parse(f"{A}:1", "mariadb"), "is not a MariaDB GTID"),
    ("mariadb-two-parts", lambda: _set("0-1"), "invalid GTID '0-1'"),
    ("mariadb-letters", lambda: _set("0-1-x"), "invalid GTID '0-1-x'"),
    ("mariadb-domain-range", lambda: _set("4294967296-1-1"), "MariaDB GTID '4294967296-1-1' out of range"),
    ("unknown-flavor", lambda: GtidSet.parse("", "oracle"), "unknown GTID flavor 'oracle'"),  # type: ignore[arg-type]
    ("gtid-interval", lambda: Gtid.parse(f"{A}:1-5"), f"invalid MySQL GTID '{A}:1-5': '1-5' is an interval"),
    ("gtid-no-number", lambda: Gtid.parse(A), f"invalid MySQL GTID '{A}': expected uuid:n or uuid:tag:n"),
    ("gtid-two-tags", lambda: Gtid.parse(f"{A}:t:u:1"), "expected uuid:n or uuid:tag:n"),
    ("gtid-wrong-flavor", lambda: Gtid.parse("0-1-5", "mysql"), "GTID '0-1-5' is not a MySQL GTID"),
    ("union-across-flavors", lambda: _set(f"{A}:1") | _set("0-1-1"), "cannot combine a mysql GTID set with mariadb"),
    ("empty-mysql-with-mariadb", lambda: GtidSet.empty("mysql") - _set("0-1-1"), "cannot combine a mysql"),
    ("add-across-flavors", lambda: _set("0-1-1").add(f"{A}:1"), f"GTID '{A}:1' is not a MariaDB GTID"),
    ("in-across-flavors", lambda: gtid_in_set("0-1-1", f"{A}:1"), "GTID '0-1-1' is not a MySQL GTID"),
    (
        "constructor-both",
        lambda: GtidSet(sids=((A, ((1, 1),)),), domains=((0, (1, 1)),)),
        "cannot hold both MySQL and MariaDB GTIDs",
    ),
]


@pytest.mark.parametrize("call,message", [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS])
def test_errors_name_the_bad_token(call: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        call()


def test_equality_and_hash_are_by_content() -> None:
    assert _set(f"{A}:1-3:4-5") == _set(f"{A.upper()}:1-5")
    assert hash(_set(f"{A}:1-3:4-5")) == hash(_set(f"{A.upper()}:1-5"))
    assert len({_set(f"{A}:1-5"), _set(f"{A}:1-2:3-5"), _set(f"{B}:1")}) == 2
    assert _set("0-1-5") != _set("0-2-5")
    assert _set("0-1-5") != _set(f"{A}:5")
    assert GtidSet.empty("mysql") == GtidSet.empty("mariadb") == _set("")
    assert hash(GtidSet.empty("mysql")) == hash(_set(""))


def test_empty_results_keep_their_flavor() -> None:
    mysql = _set(f"{A}:1-5")
    assert (mysql - mysql).flavor == "mysql"
    assert (mysql - mysql) == _set("")
    assert (_set("") | mysql).flavor == "mysql"
    assert (_set("0-1-1") - _set("0-1-2")).flavor == "mariadb"
    assert _set("").add("0-1-1").flavor == "mariadb"


def test_immutable_and_canonical_when_built_directly() -> None:
    s = GtidSet(sids=((A.upper(), ((4, 5), (1, 3))), (B, ())))
    assert str(s) == f"{A}:1-5"
    assert s.sids == ((A, ((1, 5),)),)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.sids = ()  # type: ignore[misc]
    assert str(GtidSet(domains=((1, (1, 2)), (0, (2, 9)), (0, (1, 4))))) == "0-2-9,1-1-2"


def test_repr_shows_text_and_flavor() -> None:
    assert repr(_set("0-1-5")) == "GtidSet.parse('0-1-5', flavor='mariadb')"
    assert repr(GtidSet.empty()) == "GtidSet.parse('', flavor=None)"
