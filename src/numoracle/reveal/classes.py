"""Lane classes: the lanes of a packed layout (rows or columns, reveal/lanes.py) that share their trees, found by
fingerprint probes.

Packed probes put a different probe in each lane of a call: sound only among lanes whose output positions have
the same trees. A kernel tiled by rows or columns (OpenBLAS's sgemm: edge tiles, per-thread blocks) has several
kinds of lanes. ``FINGERPRINTS`` masking probes, each put in every lane of one call, give every output position
its answers; lanes whose answers agree at each of their positions on every fingerprint form a class. A class is
a candidate: two lanes could still differ where no fingerprint looked. It is confirmed downstream: each class is
searched with its own lanes packed, every position that answers otherwise than its lane's leader is searched
again (reveal/tree.py), and the verification compares every output on random data, where a class that hid two
trees fails (reveal_order then searches again with every output seeing every probe).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .lanes import Lanes
from .probe import Prober

__all__ = ["LaneClasses", "lane_classes", "FINGERPRINTS"]

FINGERPRINTS = 24     # probes (calls) that tell lanes apart


@dataclass
class LaneClasses:
    """The lanes of ``mode`` grouped by their fingerprints (lane indices, largest class first)."""

    mode: str
    classes: list
    calls: int
    probes: int

    @property
    def cost(self) -> float:
        """Calls of the searches, in units of one tree's probes: a class of k lanes packs k probes a call."""
        return sum(1.0 / len(c) for c in self.classes)


def _pairs(n: int) -> list[tuple[int, int]]:
    """Fingerprint pairs: the ends and the middle, then seeded random pairs (the same for every kernel of n)."""
    pairs = [(0, 1), (0, n - 1), (n - 2, n - 1), (0, n // 2), (n // 2 - 1, n // 2)]
    rng = np.random.default_rng(n)
    while len(pairs) < 4 * FINGERPRINTS and len(set(pairs)) < min(FINGERPRINTS, n * (n - 1) // 2):
        i, j = (int(v) for v in rng.integers(0, n, 2))
        pairs.append((min(i, j), max(i, j)))
    out = [q for q in dict.fromkeys(pairs) if q[0] != q[1]]
    return out[:FINGERPRINTS]


def lane_classes(p: Prober, u: float, M: float, sign: int, mode: str) -> LaneClasses:
    """Every lane's answers to the fingerprint probes (one call each, the probe in every lane); lanes whose answers
    agree bit for bit at each of their positions form a class."""
    lanes = Lanes(p, u, M, sign, mode)
    L, pairs = lanes.lanes, _pairs(p.n)
    a = np.repeat(np.array([i for i, _ in pairs], np.int64), L)
    j = np.repeat(np.array([k for _, k in pairs], np.int64), L)
    c0 = p.calls
    vals = lanes.run(a, j)                                        # (fingerprints x lanes, positions per lane)
    sig = np.ascontiguousarray(vals.reshape(len(pairs), L, -1).transpose(1, 0, 2)).reshape(L, -1)
    groups: dict[bytes, list[int]] = {}
    for lane in range(L):
        groups.setdefault(sig[lane].tobytes(), []).append(lane)
    classes = sorted((np.array(g, np.int64) for g in groups.values()), key=lambda c: (-c.size, int(c[0])))
    return LaneClasses(mode, classes, p.calls - c0, a.size)
