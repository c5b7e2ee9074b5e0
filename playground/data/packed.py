"""The sentence pairs a web session keeps: packed as UTF-8 bytes, read back as (source, target) tuples."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence

from playground.errors import DataError

Pair = tuple[str, str]


class PackedPairs(Sequence):
    """Sentence pairs packed as UTF-8 bytes with end offsets: a read-only sequence of (source, target) tuples that
    holds ~1 byte per character and 16 per pair, where a list of tuples of str holds ~200 bytes per pair more.
    What a web session keeps for as long as it lives; each pair is decoded when it is read."""

    def __init__(self, pairs: Iterable[Pair] = (), *, _sides: tuple | None = None):
        if _sides is None:
            src, tgt, src_ends, tgt_ends = bytearray(), bytearray(), array("Q"), array("Q")
            for source, target in pairs:
                src += source.encode()
                tgt += target.encode()
                src_ends.append(len(src))
                tgt_ends.append(len(tgt))
            _sides = ((src, src_ends), (tgt, tgt_ends))
        self._sides = _sides

    @property
    def nbytes(self) -> int:
        return sum(len(data) + ends.itemsize * len(ends) for data, ends in self._sides)

    def swapped(self) -> PackedPairs:
        """The same pairs as (target, source), sharing the bytes."""
        return PackedPairs(_sides=self._sides[::-1])

    def __len__(self) -> int:
        return len(self._sides[0][1])

    def _text(self, side: int, i: int) -> str:
        data, ends = self._sides[side]
        return data[ends[i - 1] if i else 0:ends[i]].decode()

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError("pair index out of range")
        return self._text(0, i), self._text(1, i)


def session_pairs(pairs: Sequence[Pair], what: str) -> PackedPairs:
    """`pairs` packed as a web session keeps them (as they are when packed already); a DataError past the pairs one
    session may hold (PLAYGROUND_MAX_SESSION_DATA_MB). `what` names them in the message ("This data")."""
    from playground.data.files import too_large
    from playground.limits import max_session_data_bytes
    from playground.settings import MB

    packed = pairs if isinstance(pairs, PackedPairs) else PackedPairs(pairs)
    held, limit = packed.nbytes, max_session_data_bytes()
    if held > limit:
        raise DataError(too_large(f"{what} ({len(packed):,} pairs)", f"{held / MB:,.1f} MB in memory",
                                  f"{limit / MB:,.1f} MB per session", "PLAYGROUND_MAX_SESSION_DATA_MB"))
    return packed
