"""A binlog coordinate (file and position): the one value every part of the capture names a binlog place with."""

from __future__ import annotations

from dataclasses import dataclass
from functools import total_ordering

# Where the first event of every binlog file starts, after its 4-byte magic number.
FIRST_EVENT_POS = 4


@total_ordering
@dataclass(frozen=True, eq=True)
class Coordinate:
    """A place in a server's binlog: `file` (e.g. `mysql-bin.000042`) and the byte offset `pos` within it.

    Ordered as the server writes: files by the number after their last dot, so `b.999999` comes before
    `b.1000000` once the numbering outgrows its zero padding (the file names alone sort the other way), then by
    position. A file without a numeric suffix sorts before every numbered one. The text form is `file:pos`
    (`str` and `parse` round-trip; the file may itself hold colons, the position is after the last one).

    An empty `file` is allowed: the capture has no place on this server yet (it continues there by GTID set).
    Coordinates of different servers are not comparable in any meaningful way; comparing them is the caller's
    mistake, not caught here.
    """

    file: str
    pos: int

    def __post_init__(self) -> None:
        if self.pos < 0:
            raise ValueError(f"a binlog position cannot be negative: {self.file}:{self.pos}")

    @classmethod
    def start_of(cls, file: str) -> Coordinate:
        """The first event of `file`."""
        return cls(file, FIRST_EVENT_POS)

    @classmethod
    def parse(cls, text: str) -> Coordinate:
        """The coordinate written as `file:pos` (the form `str` gives)."""
        file, sep, pos = text.rpartition(":")
        if not sep or not pos.isdigit():
            raise ValueError(f"not a binlog coordinate (file:pos): {text!r}")
        return cls(file, int(pos))

    @classmethod
    def read(cls, file: str, pos: int) -> Coordinate:
        """The coordinate of a position read off the binlog (an unsigned header field), made without `__init__`'s
        check: the stream makes one or two for every event."""
        out = object.__new__(cls)
        out.__dict__.update(file=file, pos=pos)
        return out

    def at(self, pos: int) -> Coordinate:
        """Another position in the same file."""
        return Coordinate(self.file, pos)

    @property
    def sort_key(self) -> tuple[int, str, str, int]:
        """The ordering: file number, the name before it, the name itself (zero-padding ties), position."""
        base, _, suffix = self.file.rpartition(".")
        if suffix.isdigit():
            return (int(suffix), base, self.file, self.pos)
        return (-1, self.file, self.file, self.pos)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, Coordinate):
            return NotImplemented
        if self.file == other.file:
            return self.pos < other.pos
        return self.sort_key < other.sort_key

    def __gt__(self, other: object) -> bool:
        if not isinstance(other, Coordinate):
            return NotImplemented
        if self.file == other.file:
            return self.pos > other.pos
        return self.sort_key > other.sort_key

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}"


# No place known on the server yet: a capture that starts or continues there by GTID set, until it passes a boundary.
NOWHERE = Coordinate("", FIRST_EVENT_POS)
