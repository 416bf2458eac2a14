"""Fixed, reproducible draw keys. Every audit draws over its own family of distinct (seed, round, position) keys.

A family is a grid that looks like real traffic: key ``i`` has seed ``SEEDS[i // 65536]`` (random 64-bit seeds from
a fixed generator, one per 16 rounds x 4096 positions), round ``(i // 4096) % 16`` and position ``i % 4096``.
Low-entropy counters next to each other are the hard case for a counter-based generator, and the realistic one.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

from stats.samplers import Keys

MASTER_SEED = 0x5EED_A0D1  # every key of every audit derives from this and the family's label
ROUNDS = 16
POSITIONS = 4096
PER_SEED = ROUNDS * POSITIONS
_ONE = np.uint64(1)


def _seeds(label: str, count: int) -> npt.NDArray[np.uint64]:
    rng = np.random.default_rng([MASTER_SEED, zlib.crc32(label.encode())])
    seeds = rng.integers(0, 1 << 64, size=count, dtype=np.uint64)
    if np.unique(seeds).size != count:  # 2^-40-ish; refuse rather than silently repeat keys
        raise AssertionError(f"key family {label!r}: repeated seed")
    return seeds


class Family:
    """Keys ``0 .. n-1`` of the family ``label``, handed out in chunks."""

    def __init__(self, label: str, n: int) -> None:
        self.label = label
        self.n = n
        self._seeds = _seeds(label, -(-n // PER_SEED))

    def keys(self, start: int, stop: int) -> Keys:
        i = np.arange(start, stop, dtype=np.uint64)
        per_seed, positions = np.uint64(PER_SEED), np.uint64(POSITIONS)
        return Keys(self._seeds[i // per_seed], (i // positions) % np.uint64(ROUNDS), i % positions)

    def chunks(self, size: int) -> Iterator[Keys]:
        for start in range(0, self.n, size):
            yield self.keys(start, min(self.n, start + size))


def pair(kind: str, base: Keys) -> tuple[Keys, Keys]:
    """Two keys per base key that differ in one thing only.

    ``position``: (s, r, 2p) and (s, r, 2p + 1); ``round``: (s, 2r, p) and (s, 2r + 1, p); ``seed``: (s, r, p) and
    (s XOR 2^b, r, p) with b = key index mod 64, so every seed bit is flipped in 1/64 of the pairs. Pairs are
    disjoint, so the pairs are independent of one another under the null hypothesis.
    """
    s, r, p = base.seed, base.round, base.position
    if kind == "position":
        return Keys(s, r, p << _ONE), Keys(s, r, (p << _ONE) | _ONE)
    if kind == "round":
        return Keys(s, r << _ONE, p), Keys(s, (r << _ONE) | _ONE, p)
    if kind == "seed":
        bit = np.arange(s.size, dtype=np.uint64) % np.uint64(64)
        return Keys(s, r, p), Keys(s ^ (_ONE << bit), r, p)
    raise ValueError(f"pair kind: {kind!r}")
