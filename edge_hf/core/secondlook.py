"""The person stage's second look (`person.second_look`): where a small (far) person was seen in
the last seconds, or something moved away from everyone found, the pose model looks again at a
square around them cut from the camera's frame, at its own input size, as MoveNet's own
single-person demo crops around the last keypoints; a person lying far away is found there when
the whole frame at 256 px misses them. `LookSettings` says how (measured on the conditions
benchmark's far clips: `python -m experiments.look_sweep`).
"""

from __future__ import annotations

from dataclasses import dataclass

import cv2
import numpy as np

from edge_hf.core.pose import Box, Person, PoseEstimator, iou, pose_frame, shrunk
from edge_hf.core.posetrack import feet_distance

LOOK_ZOOM = 2.5  # the camera view a second look cuts from: long side at most LOOK_ZOOM * side
UPRIGHT_FEET = 1.0  # a person found keeps the upright height of one seen this near (heights)
UPRIGHT_ASPECT = 0.6  # standing: a box at most this wide for its height
UPRIGHT_KEEP_S = 10.0  # a standing height carried over (not measured again) is kept this long
# What else decides a second look's people, for caches of them (`clippeople`): bump on a change
LOOK_RULES = f"zoom-{LOOK_ZOOM:g}-upright-{UPRIGHT_FEET:g}-{UPRIGHT_ASPECT:g}-{UPRIGHT_KEEP_S:g}-v2"


@dataclass(frozen=True)
class LookSettings:
    """The second look (`SecondLook`): a square `margin` times a box's long side (at least
    the pose model's side / `max_upscale` view pixels: it finds few people in a blurred,
    enlarged picture) cut from the camera view at up to LOOK_ZOOM times the pose model's
    side and given to the pose model at its own size, as MoveNet's single-person demo crops around
    the last keypoints. The boxes: people seen in the last `keep_s` whom the whole frame no longer
    shows, then what moved since the last pose frame (a blob of at least `min_motion_px` pose-frame
    pixels changed by `motion_level` grey levels, away from everyone found), then people found
    whose box's long side is under `small_px` pose-frame pixels.
    Only where the square is at most `max_share` of the view's long side (a small, far person; a
    near one gains nothing from a closer look) and the person, when last seen standing, was at
    most `max_upright_share` of the frame's height (a near person fallen behind a sofa is not far
    away because what shows of them is small: a square there finds a low-scoring part of them,
    read standing, and they are never lost); at most `max_crops` squares per frame.
    A person found in a square counts from `crop_min_score` (the whole frame's: 0.2): the square
    is where someone was just seen, and a person lying far away scores 0.15-0.22 there, found
    more often in a square of 200 px than of 160 (`max_upscale` 1.28: less enlarged). On the
    conditions benchmark's far clips the pose rules and head on these poses caught 14 of 16 falls
    against 9 with 160 px at 0.2, the same 2 of 29 activity clips, no event on the negatives."""

    keep_s: float = 3.0
    margin: float = 2.0
    max_upscale: float = 1.28  # a square is at least side / max_upscale view pixels
    max_share: float = 0.6
    max_upright_share: float = 0.35  # nor around a person who stood taller than this (frame)
    max_crops: int = 2
    motion_level: int = 25
    min_motion_px: int = 48
    small_px: int = 48  # a found person is looked at again when shorter than this (pose pixels)
    crop_min_score: float = 0.15  # a person found in a square counts from this score


def look_key(look: LookSettings) -> str:
    """What decides the poses a second look with `look` gives: its settings and LOOK_RULES (the
    key of caches of those poses, and of heads fitted on them)."""
    return f"{look}|{LOOK_RULES}"


LOOK_SHARE = 0.75  # the live person stage looks again only while busy less than this share


class LookBudget:
    """The live person stage's spare time for second looks: a square is cut only while the stage,
    whole frames and squares together, has been busy less than `share` of the wall time (a
    bucket that fills at `share` seconds a second, at most `cap_s`). Every camera's whole frame
    is always run; the squares get what is left, so turning `person.second_look` on never costs
    the stage a camera: with few cameras each gets its squares, with many they get fewer, then
    none (`PersonCounters.looks` says how many ran). Replays give no budget: every square, as
    the benchmarks measure it."""

    def __init__(self, share: float = LOOK_SHARE, cap_s: float = 0.2) -> None:
        self.share, self.cap_s = share, cap_s
        self.square_s = 0.0  # what one square has cost (a running mean; 0: none run yet)
        self._left = 0.0  # seconds of pose-model time the squares may still take
        self._t: float | None = None

    @property
    def cap(self) -> float:
        """The most the bucket holds: `cap_s`, or one and a half squares where a square costs
        more (a slow board, a stall: else no square would ever fit again)."""
        return max(self.cap_s, 1.5 * self.square_s)

    def squares(self, now: float, wanted: int) -> int:
        """How many of `wanted` squares fit the time left at `now` (monotonic seconds)."""
        if self._t is not None:
            self._left = min(self.cap, self._left + self.share * max(now - self._t, 0.0))
        self._t = now
        if self._left <= 0.0:
            return 0
        if self.square_s <= 0.0:
            return min(wanted, 1)  # (what a square costs is not known yet: one, to learn it)
        return min(wanted, int(self._left // self.square_s))

    def spent(self, seconds: float, squares: int = 0) -> None:
        """`seconds` of pose-model time used (a whole frame, or `squares` squares)."""
        self._left = max(self._left - seconds, -self.cap)
        if squares:
            each = seconds / squares
            self.square_s = each if self.square_s <= 0.0 else 0.8 * self.square_s + 0.2 * each


def _height(up: tuple[float, float] | None) -> float | None:
    return None if up is None else up[0]


def view_frame(
    frame_bgr: np.ndarray, crop: tuple[int, int, int, int] | None, side: int
) -> np.ndarray:
    """The camera view a second look cuts from: the `crop`, the long side at most LOOK_ZOOM
    times `side`, still BGR (a resize; `SecondLook.people` prepares it as `pose_frame` would
    only on a tick that cuts a square from it: the night denoising of this large view is the
    costly part)."""
    return shrunk(frame_bgr, crop, round(side * LOOK_ZOOM))


def _inside(a: Box, b: Box) -> float:
    """The share of box `a`'s area that lies in box `b`."""
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    return ix * iy / max((a[2] - a[0]) * (a[3] - a[1]), 1e-6)


def _grown(b: Box, by: float) -> Box:
    """Box `b` grown by `by` of its width and height on each side."""
    dx, dy = by * (b[2] - b[0]), by * (b[3] - b[1])
    return (b[0] - dx, b[1] - dy, b[2] + dx, b[3] + dy)


def _scaled(p: Person, k: float, dx: float = 0.0, dy: float = 0.0) -> Person:
    """`p` with every coordinate multiplied by `k` after shifting by (dx, dy)."""
    x0, y0, x1, y1 = p.box
    kp = p.keypoints.copy()
    kp[:, 0] = (kp[:, 0] + dx) * k
    kp[:, 1] = (kp[:, 1] + dy) * k
    return Person(((x0 + dx) * k, (y0 + dy) * k, (x1 + dx) * k, (y1 + dy) * k), p.score, kp)


def motion_boxes(before: np.ndarray, now: np.ndarray, level: int, min_px: int) -> list[Box]:
    """Boxes (pixels) of the blobs that changed between two grey frames, largest first."""
    diff = cv2.absdiff(cv2.GaussianBlur(before, (5, 5), 0), cv2.GaussianBlur(now, (5, 5), 0))
    mask = cv2.dilate((diff >= level).astype(np.uint8), np.ones((3, 3), np.uint8), iterations=2)
    n, _, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
    blobs = sorted((stats[i] for i in range(1, n)), key=lambda st: -int(st[4]))
    return [
        (float(x), float(y), float(x + w), float(y + h))
        for x, y, w, h, area in blobs
        if area >= min_px
    ]


class SecondLook:
    """One camera's people, found in its pose frame and looked at again closer (`LookSettings`)
    where someone small was seen in the last seconds or something moved: a person far away, whom
    the pose model at its side does not find in the whole frame (lying, or even standing), is
    found in a square around them. Keeps where people were and the last frame (per camera: one
    `SecondLook` each)."""

    def __init__(self, estimator: PoseEstimator, settings: LookSettings | None = None) -> None:
        self.estimator, self.s = estimator, settings or LookSettings()
        # (when, box in pose-frame pixels, its person's height when last seen standing and when
        # that was, or None)
        self._seen: list[tuple[float, Box, tuple[float, float] | None]] = []
        self._grey: np.ndarray | None = None  # the last pose frame, grey
        self.crops = 0  # second-look runs of the pose model (its cost)

    def boxes(self, found: list[Person], small_rgb: np.ndarray) -> list[tuple[Box, float | None]]:
        """What to look at again (pose-frame pixels), each with its person's height when last
        seen upright (None: not known), in order: people lost from the whole frame (most
        recently seen first), what moved where nobody was found, small people found."""
        grey = cv2.cvtColor(small_rgb, cv2.COLOR_RGB2GRAY)
        before, self._grey = self._grey, grey
        lost = [(b, _height(up)) for _, b, up in sorted(self._seen, key=lambda s: -s[0])
                if all(iou(b, p.box) < 0.3 for p in found)]  # fmt: skip
        moved: list[tuple[Box, float | None]] = []
        if before is not None and before.shape == grey.shape:
            near = [_grown(p.box, 0.5) for p in found] + [b for b, _ in lost]
            moved = [
                (b, _height(self._upright_at(b)))
                for b in motion_boxes(before, grey, self.s.motion_level, self.s.min_motion_px)
                if all(_inside(b, o) < 0.5 for o in near)
            ]  # fmt: skip
        small = [
            (p.box, _height(self._upright(p, 0.0)))
            for p in found
            if max(p.width, p.height) < self.s.small_px
        ]
        return lost + moved + small

    def _upright(self, p: Person, t: float) -> tuple[float, float] | None:
        """`p`'s height when last seen standing (a box at most UPRIGHT_ASPECT wide for its
        height) and when, at `t`: now, unless they look a third shorter than the person who stood
        at their feet a moment ago (nobody shrinks between two ticks: that is part of them,
        crouched or half hidden); else that person's (`_upright_at`)."""
        before = self._upright_at(p.box)
        if p.width > UPRIGHT_ASPECT * p.height:
            return before
        if before is not None and p.height < before[0] / 1.5:
            return before
        return p.height, t

    def _upright_at(self, box: Box) -> tuple[float, float] | None:
        """The standing height (and when it was measured) of the person seen whose box, grown
        by a quarter, overlaps `box` and whose feet are nearest (within UPRIGHT_FEET heights: a
        falling person's feet stay put), measured in the last UPRIGHT_KEEP_S; or None. (Not a
        person standing beside: a far one next to a near one keeps their own height.)"""
        near = [
            (feet_distance(b, box), up)
            for w, b, up in self._seen
            if up is not None
            and w - up[1] <= UPRIGHT_KEEP_S
            and _inside(box, _grown(b, 0.25)) > 0.0
        ]
        d, up = min(near, key=lambda x: x[0], default=(np.inf, None))
        return up if d <= UPRIGHT_FEET else None

    def square(
        self, box: Box, k: float, view_hw: tuple[int, int], upright: float | None = None
    ) -> tuple[int, int, int] | None:
        """The square (x, y, side in view pixels) around `box` (pose-frame pixels; `k` view
        pixels per pose-frame pixel), or None where it would gain nothing: too large, or its
        person stood taller than `max_upright_share` of the frame (`upright`, pose-frame pixels;
        None: not known)."""
        x0, y0, x1, y1 = box
        least = round(self.estimator.side / self.s.max_upscale)
        side = max(least, round(self.s.margin * max(x1 - x0, y1 - y0) * k))
        if side > self.s.max_share * max(view_hw):
            return None
        if upright is not None and upright * k > self.s.max_upright_share * view_hw[0]:
            return None
        cx, cy = (x0 + x1) / 2 * k, (y0 + y1) / 2 * k
        x = int(min(max(cx - side / 2, 0), max(view_hw[1] - side, 0)))
        y = int(min(max(cy - side / 2, 0), max(view_hw[0] - side, 0)))
        return x, y, side

    def people(self, t: float, small_rgb: np.ndarray, view_bgr: np.ndarray) -> list[Person]:
        """The people at `t` in pixels of `small_rgb` (the pose frame), best first: the pose
        model on the whole frame, then `closer`. `view_bgr`: `view_frame`'s."""
        return self.closer(t, self.estimator.people(small_rgb), small_rgb, view_bgr)

    def closer(
        self,
        t: float,
        found: list[Person],
        small_rgb: np.ndarray,
        view_bgr: np.ndarray,
        limit: int | None = None,
    ) -> list[Person]:
        """`found` (the pose model's people on the whole pose frame `small_rgb` at `t`) with each
        square's best person (the one on the box looked for, else the best scoring) in place of
        those it overlaps, best first; at most `limit` squares (None: `max_crops`; the live
        person stage gives only its spare time: `LookBudget`). `view_bgr`: `view_frame`'s,
        prepared as the pose model is given a frame (`pose_frame`) only when a square is cut."""
        most = self.s.max_crops if limit is None else min(limit, self.s.max_crops)
        k = max(view_bgr.shape[:2]) / max(small_rgb.shape[:2])  # view pixels per pose pixel
        looked: list[Box] = []
        squares: list[tuple[Box, int, int, int]] = []  # (box looked for, x, y, side)
        for box, upright in self.boxes(found, small_rgb):
            if len(looked) >= most:
                break
            sq = self.square(box, k, view_bgr.shape[:2], upright)
            if sq is None or any(_inside(box, b) > 0.8 for b in looked):
                continue
            x, y, side = sq
            looked.append((x / k, y / k, (x + side) / k, (y + side) / k))
            squares.append((box, x, y, side))
        self.crops += len(squares)
        # (already at its size: pose_frame only converts it, or denoises a grey one)
        view_rgb = pose_frame(view_bgr, None, max(view_bgr.shape[:2])) if squares else view_bgr
        # (the squares in one `people_batch`: one run with a batched pose model)
        nears = self.estimator.people_batch(
            [view_rgb[y : y + side, x : x + side] for _, x, y, side in squares],
            self.s.crop_min_score,
        )
        for (box, x, y, _), near in zip(squares, nears, strict=True):
            near = [_scaled(p, 1 / k, x, y) for p in near]
            best = max(near, key=lambda p: (iou(p.box, box) > 0, p.score), default=None)
            if best is not None:
                found = [
                    p for p in found
                    if iou(p.box, best.box) < 0.3 and _inside(best.box, p.box) < 0.7
                ] + [best]  # fmt: skip
        found.sort(key=lambda p: -p.score)
        now = [(t, p.box, self._upright(p, t)) for p in found]
        keep = [(w, b, up) for w, b, up in self._seen
                if t - w <= self.s.keep_s and all(iou(b, p.box) < 0.1 for p in found)]  # fmt: skip
        self._seen = now + keep
        return found
