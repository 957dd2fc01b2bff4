"""People tracked from one pose tick to the next (`PoseFallRules`' tracks).

A person is matched to the track whose box overlaps most (IoU at least `min_iou`), else to the one
whose feet (box bottom centre) moved least, at most `max_feet_move` of their heights: a falling
person's feet stay put while the box turns from tall to wide. A track unseen for `forget_s` is
dropped. Each track carries what the rules know of its person (`Track`): when and how tall they
were last upright, since when down, whether fallen, their last poses (the sequence model's window).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from edge_hf.core.pose import Box, Person, iou

INHERIT_FEET = 1.5  # a new track takes the window of a track lost this near (in heights)


def feet_distance(a: Box, b: Box) -> float:
    """Distance between the two boxes' bottom centres, in the taller box's heights: a falling
    person's feet stay put while the box turns from tall to wide (little overlap between ticks)."""
    dx = (a[0] + a[2]) / 2 - (b[0] + b[2]) / 2
    dy = a[3] - b[3]
    return float(np.hypot(dx, dy)) / max(a[3] - a[1], b[3] - b[1], 1e-6)


@dataclass
class Track:
    box: Box
    seen_t: float
    id: int = 0  # per camera, from 1, in the order people were first seen
    upright_t: float | None = None
    upright_hip_y: float | None = None
    upright_height: float | None = None
    down_since: float | None = None
    fallen: bool = False
    fell_at: float | None = None  # when the confirmed fall's "down" began
    stand_height: float | None = None  # the box height when last upright before that fall
    # (since when upright again, when the fall began, height before it): a fallen person seen
    # upright, not yet reported up (`GOT_UP_S` upright and as tall as before)
    getting_up: tuple[float, float, float | None] | None = None
    # (t, hip_y, aspect) of the last HISTORY_S, for the head's features
    history: deque[tuple[float, float | None, float]] = field(default_factory=deque)
    # what the pose model found of this person at each tick since the track began (None: not
    # found), the last `window_ticks`: the sequence model's window
    poses: deque[Person | None] = field(default_factory=deque)
    seq_since: float | None = None  # since when the sequence model's P(falling) is high
    by_seq: bool = False  # the fall was confirmed by the sequence model


class Tracker:
    """One camera's tracks (see the module docstring)."""

    def __init__(self, forget_s: float, min_iou: float, max_feet_move: float) -> None:
        self.forget_s, self.min_iou, self.max_feet_move = forget_s, min_iou, max_feet_move
        self.tracks: list[Track] = []
        self._ids = 0

    def match(
        self, people: list[Person], t: float, standing_tall: Callable[[Track, Person], bool]
    ) -> list[tuple[Track, Person]]:
        """Each person's track, in the order of `people`: the pairs that overlap most first
        (a person found near someone lying keeps their own track), then by the feet for the
        rest; a new track for whoever is left. A fallen person's track never goes by the feet to
        someone standing at full height (`standing_tall`: nobody gets up from the floor between
        two ticks: that is someone walking past)."""
        self.tracks = [tr for tr in self.tracks if t - tr.seen_t <= self.forget_s]
        free = list(self.tracks)
        chosen: dict[int, Track] = {}
        by_overlap = sorted(
            ((iou(tr.box, p.box), i, k) for i, p in enumerate(people) for k, tr in enumerate(free)),
            key=lambda x: -x[0],
        )
        for overlap, i, k in by_overlap:
            if overlap < self.min_iou:
                break
            if i not in chosen and free[k] not in chosen.values():
                chosen[i] = free[k]
        free = [tr for tr in free if tr not in chosen.values()]
        for i, p in enumerate(people):
            if i in chosen:
                continue
            near = [tr for tr in free if not (tr.fallen and standing_tall(tr, p))]
            best = min(near, key=lambda tr: feet_distance(tr.box, p.box), default=None)
            if best is not None and feet_distance(best.box, p.box) <= self.max_feet_move:
                chosen[i] = best
                free.remove(best)
        pairs = []
        for i, p in enumerate(people):
            tr = chosen.get(i)
            if tr is None:
                self._ids += 1
                tr = Track(p.box, t, self._ids)
                self.tracks.append(tr)
            tr.box, tr.seen_t = p.box, t
            pairs.append((tr, p))
        return pairs

    def keep_poses(self, pairs: list[tuple[Track, Person]], window_ticks: int) -> None:
        """Each track's pose at this tick kept, the last `window_ticks` (None where not found),
        a track born this tick taking over the poses of one lost nearby (`inherit`)."""
        found = {id(tr): p for tr, p in pairs}
        self.inherit(pairs, found, window_ticks)
        for tr in self.tracks:
            if tr.poses.maxlen != window_ticks:
                tr.poses = deque(tr.poses, maxlen=window_ticks)
            tr.poses.append(found.get(id(tr)))

    def inherit(
        self, pairs: list[tuple[Track, Person]], found: dict[int, Person], window_ticks: int
    ) -> None:
        """A track born this tick takes over the poses of a track lost nearby (not found now,
        feet within INHERIT_FEET heights): the tracker often loses a person mid-fall (the box
        turns from tall to wide between two ticks, or the pose model misses the descent), and
        the new track's window would hold no descent. Only the window inherits; the rules'
        state of the new track starts afresh."""
        lost = [tr for tr in self.tracks if id(tr) not in found and tr.poses]
        for tr, p in pairs:
            if tr.poses or not lost:
                continue
            old = min(lost, key=lambda o: feet_distance(o.box, p.box))
            if feet_distance(old.box, p.box) <= INHERIT_FEET:
                tr.poses, old.poses = old.poses, deque(maxlen=window_ticks)
                lost.remove(old)
