"""Person-centred hyperframes: one crop around the people for all T frames of a window.

A person far from the camera is a few pixels tall once the whole frame is squeezed to the
model's input. A model trained with `crop: person` (its contract, ONNX metadata `edge_hf.crop`)
sees instead a square cut around the people the person stage found, the same cut for every frame
of the window, so the descent stays inside it (unlike the motion zoom of the real-footage
benchmark, which moved mid-fall):

- frames are kept at `WORK_SCALE` times the model's input size (the camera frame, or its
  configured crop, squeezed by the model's resize rule, exactly as for a full-frame model);
- the people are the person boxes of the pose ticks in the `lookback_s` before the window's
  newest sample (or, when none of those found anybody, of the newest tick within `hold_s` that
  did: a person lying still is often missed for a moment); their union, widened by `margin` of
  its size on each side, made square and at least `min_fraction` of the frame, kept inside it;
- nobody found: the whole frame. Several people: the union of their boxes (one window a camera).

Training (`HyperframeDataset`, boxes from `clip_boxes` over each clip at the person stage's rate)
and the daemon (`Pipeline.process`, boxes from the live person stage) both go through `BoxTrack`,
`crop_box` and `cut`: one implementation.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from edge_hf.core import video
from edge_hf.core.clippeople import clip_people
from edge_hf.core.contract import ModelContract
from edge_hf.core.contract import PersonCropRule as PersonCropRule  # the contract carries it
from edge_hf.core.pose import PoseEstimator
from edge_hf.core.video import Crop, shrink

log = logging.getLogger(__name__)

FULL, PERSON = "full", "person"
CROPS = (FULL, PERSON)
WORK_SCALE = 2  # frames are kept at this multiple of the model's input size
Box = tuple[float, float, float, float]  # x0, y0, x1, y1 as fractions (0-1) of the frame


def rule_of(contract: ModelContract) -> PersonCropRule | None:
    """The crop rule a model's contract records (checked when the contract was read), or None
    for a whole-frame model."""
    return PersonCropRule.from_json(contract.crop_rule) if contract.crop == PERSON else None


def work_size(input_size: tuple[int, int]) -> tuple[int, int]:
    """(H, W) at which a person-crop model's frames are kept before the crop."""
    return input_size[0] * WORK_SCALE, input_size[1] * WORK_SCALE


class BoxTrack:
    """The person boxes found at each pose tick of one camera (or clip), oldest first."""

    def __init__(self, rule: PersonCropRule, keep_s: float | None = None) -> None:
        self.rule = rule
        self.keep_s = keep_s  # forget ticks older than this (None: keep all, a clip's track)
        self.times: list[float] = []
        self.boxes: list[list[Box]] = []

    def add(self, t: float, boxes: Sequence[Box]) -> None:
        if self.times and t < self.times[-1]:
            raise ValueError(f"pose tick {t} is older than the last one {self.times[-1]}")
        self.times.append(t)
        self.boxes.append(list(boxes))
        if self.keep_s is not None:
            drop = bisect.bisect_left(self.times, t - self.keep_s)
            if drop > 64:  # trim now and then, not on every tick
                del self.times[:drop], self.boxes[:drop]

    def boxes_for(self, t: float) -> list[Box]:
        """The boxes a window whose newest sample is at `t` is cut around (the rule above)."""
        end = bisect.bisect_right(self.times, t + 1e-6)
        start = bisect.bisect_right(self.times, t - self.rule.lookback_s + 1e-6)
        recent = [b for boxes in self.boxes[start:end] for b in boxes]
        if recent:
            return recent
        for i in range(start - 1, -1, -1):
            if self.times[i] < t - self.rule.hold_s - 1e-6:
                break
            if self.boxes[i]:
                return list(self.boxes[i])
        return []


def normalised(boxes: Sequence[Box], frame_hw: tuple[int, int]) -> list[Box]:
    """Pixel boxes of a frame of `frame_hw` as fractions of it, clipped to [0, 1]."""
    h, w = frame_hw

    def clip(v: float) -> float:
        return min(1.0, max(0.0, v))

    return [(clip(x0 / w), clip(y0 / h), clip(x1 / w), clip(y1 / h)) for x0, y0, x1, y1 in boxes]


def crop_box(boxes: Sequence[Box], frame_hw: tuple[int, int], rule: PersonCropRule) -> Crop | None:
    """The square crop (x, y, w, h in pixels of a frame of `frame_hw`) around `boxes`; None
    (the whole frame) when there are none."""
    if not boxes:
        return None
    fh, fw = frame_hw
    x0 = min(b[0] for b in boxes) * fw
    y0 = min(b[1] for b in boxes) * fh
    x1 = max(b[2] for b in boxes) * fw
    y1 = max(b[3] for b in boxes) * fh
    side = max(x1 - x0, y1 - y0) * (1 + 2 * rule.margin)
    side = round(min(min(fh, fw), max(side, rule.min_fraction * min(fh, fw))))
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    x = int(min(max(round(cx - side / 2), 0), fw - side))
    y = int(min(max(round(cy - side / 2), 0), fh - side))
    return x, y, side, side


def cut(
    frames: Sequence[np.ndarray], crop: Crop | None, size: tuple[int, int], resize: str
) -> list[np.ndarray]:
    """Each frame's `crop` (the whole frame when None) brought to `size` (H, W) by `resize`."""
    out = []
    for f in frames:
        f = video.cut(f, crop)
        out.append(np.ascontiguousarray(shrink(f, (size[1], size[0]), resize)))
    return out


def clip_boxes(
    path: Path,
    crop: Crop | None,
    estimator: PoseEstimator,
    rate_hz: float,
    cache_dir: Path | None = None,
) -> list[tuple[float, list[Box]]]:
    """(tick, normalised person boxes) of a video file at `rate_hz`, as the person stage would
    see them (`edge_hf.core.clippeople.clip_people`, cached in `cache_dir`)."""
    return [
        (t, normalised([p.box for p in people], hw))
        for t, hw, people in clip_people(path, crop, estimator, rate_hz, cache_dir)
    ]
