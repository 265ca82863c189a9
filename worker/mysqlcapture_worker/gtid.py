"""GTID sets for both flavors: MySQL `uuid:intervals` sets and MariaDB `domain-server-seq` positions."""

from __future__ import annotations

import re
from dataclasses import dataclass

_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_MARIADB = re.compile(r"^(\d+)-(\d+)-(\d+)$")

Interval = tuple[int, int]


def _merge(intervals: list[Interval]) -> tuple[Interval, ...]:
    out: list[Interval] = []
    for lo, hi in sorted(intervals):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return tuple(out)


@dataclass(frozen=True)
class GtidSet:
    """An immutable GTID set.

    MySQL: `sids` maps a source uuid (lower case, optionally `uuid:tag`) to merged inclusive intervals.
    MariaDB: `domains` maps a replication domain to (server_id, seq): every transaction of that
    domain up to `seq` is included (MariaDB's GTID position semantics).
    """

    sids: tuple[tuple[str, tuple[Interval, ...]], ...] = ()
    domains: tuple[tuple[int, tuple[int, int]], ...] = ()

    @property
    def flavor(self) -> str | None:
        if self.sids:
            return "mysql"
        if self.domains:
            return "mariadb"
        return None

    def is_empty(self) -> bool:
        return not self.sids and not self.domains

    @classmethod
    def parse(cls, text: str | None) -> GtidSet:
        """Parse either flavor's text form; an empty string is the empty set."""
        text = (text or "").replace("\n", "").strip()
        if not text:
            return cls()
        sids: dict[str, list[Interval]] = {}
        domains: dict[int, tuple[int, int]] = {}
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            m = _MARIADB.match(part)
            if m:
                domain, server, seq = (int(g) for g in m.groups())
                if domain not in domains or domains[domain][1] < seq:
                    domains[domain] = (server, seq)
                continue
            pieces = part.split(":")
            if not _UUID.match(pieces[0]):
                raise ValueError(f"invalid GTID set element {part!r}: expected uuid:interval or domain-server-seq")
            sid = pieces[0].lower()
            for token in pieces[1:]:
                if re.fullmatch(r"\d+(-\d+)?", token):
                    lo_s, _, hi_s = token.partition("-")
                    lo, hi = int(lo_s), int(hi_s or lo_s)
                    if lo < 1 or hi < lo:
                        raise ValueError(f"invalid GTID interval {token!r} in {part!r}")
                    sids.setdefault(sid, []).append((lo, hi))
                elif re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]{0,31}", token):
                    sid = f"{pieces[0].lower()}:{token.lower()}"
                else:
                    raise ValueError(f"invalid GTID interval {token!r} in {part!r}")
        if sids and domains:
            raise ValueError(f"GTID set {text!r} mixes MySQL and MariaDB GTIDs")
        return cls(
            sids=tuple(sorted((k, _merge(v)) for k, v in sids.items())),
            domains=tuple(sorted(domains.items())),
        )

    def __str__(self) -> str:
        if self.domains:
            return ",".join(f"{d}-{s}-{n}" for d, (s, n) in self.domains)
        return ",".join(sid + "".join(f":{lo}" if lo == hi else f":{lo}-{hi}" for lo, hi in iv) for sid, iv in self.sids)

    def add(self, gtid: str) -> GtidSet:
        """This set with one more transaction."""
        return self.union(GtidSet.parse(gtid))

    def union(self, other: GtidSet) -> GtidSet:
        sids: dict[str, list[Interval]] = {k: list(v) for k, v in self.sids}
        for k, v in other.sids:
            sids.setdefault(k, []).extend(v)
        domains = dict(self.domains)
        for d, (server, seq) in other.domains:
            if d not in domains or domains[d][1] < seq:
                domains[d] = (server, seq)
        return GtidSet(tuple(sorted((k, _merge(v)) for k, v in sids.items())), tuple(sorted(domains.items())))

    __or__ = union

    def subtract(self, other: GtidSet) -> GtidSet:
        """Transactions in this set and not in `other` (MariaDB: domains where this is ahead of `other`)."""
        theirs = dict(other.sids)
        sids = []
        for sid, intervals in self.sids:
            remaining = list(intervals)
            for lo_o, hi_o in theirs.get(sid, ()):
                nxt: list[Interval] = []
                for lo, hi in remaining:
                    if hi < lo_o or lo > hi_o:
                        nxt.append((lo, hi))
                        continue
                    if lo < lo_o:
                        nxt.append((lo, lo_o - 1))
                    if hi > hi_o:
                        nxt.append((hi_o + 1, hi))
                remaining = nxt
            if remaining:
                sids.append((sid, _merge(remaining)))
        their_domains = dict(other.domains)
        domains = tuple((d, v) for d, v in self.domains if d not in their_domains or their_domains[d][1] < v[1])
        return GtidSet(tuple(sids), domains)

    __sub__ = subtract

    def contains(self, other: GtidSet) -> bool:
        """True when every transaction of `other` is in this set."""
        return other.subtract(self).is_empty()

    __ge__ = contains
