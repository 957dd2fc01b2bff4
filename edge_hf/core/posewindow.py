"""A tracked person's last seconds of poses as one array: the pose-sequence model's input.

The pose rules track people from one pose tick to the next (`edge_hf.core.posefall`); each track
keeps what the pose model reported for it at every tick (a `Person`, or None where it was not
found). The window is its last `ticks` ticks, oldest first, one row per tick:

- 17 keypoints as x, y, seen: a keypoint the pose model scored below `MIN_KEYPOINT_SCORE` is
  (0, 0, 0), a seen one (x, y, 1) — scores themselves differ between pose models and the
  generator, a seen/not-seen mask does not;
- the box x0, y0, x1, y1 and whether the person was found at that tick.

Coordinates are in the person's own size, so the window carries no room and no camera
resolution: the origin is the bottom centre of the person's box at the last tick they were found
(where they are now), the unit the largest box side over the window (about their height, lying or
standing), y down as in the picture. A track younger than the window, and ticks the person was not
found, are rows of zeros: the model is told "not seen", never a guess.

One implementation for the generator's training windows, the real clips' and the daemon's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from edge_hf.core.pose import MIN_KEYPOINT_SCORE, POSE_RATE_HZ, Person

N_KEYPOINTS = 17
FEATURES_PER_TICK = N_KEYPOINTS * 3 + 5  # keypoints x, y, seen; box; found
NORMALISATION = "box-bottom-centre/max-side/seen-mask"  # the contract's name for the rule above


@dataclass(frozen=True)
class WindowSpec:
    """How many pose ticks at which rate make one window."""

    rate_hz: float = POSE_RATE_HZ
    ticks: int = 20  # 4 s at 5 Hz: a fall's descent (0.4-1.2 s) with the seconds before and after

    @property
    def seconds(self) -> float:
        return self.ticks / self.rate_hz


def window_array(history: Sequence[Person | None], ticks: int) -> np.ndarray:
    """(ticks, FEATURES_PER_TICK) float32 of one track's last `ticks` pose ticks (`history`
    oldest first, None where the person was not found); zeros before the track began."""
    out = np.zeros((ticks, FEATURES_PER_TICK), np.float32)
    recent = list(history)[-ticks:]
    seen = [p for p in recent if p is not None]
    if not seen:
        return out
    last = seen[-1]
    cx, cy = (last.box[0] + last.box[2]) / 2, last.box[3]
    unit = max(max(p.width, p.height) for p in seen)
    unit = unit if unit > 1e-6 else 1.0
    first = ticks - len(recent)
    for i, p in enumerate(recent):
        if p is None:
            continue
        row = out[first + i]
        kp = np.asarray(p.keypoints, np.float32)
        ok = kp[:, 2] >= MIN_KEYPOINT_SCORE
        xy = np.stack([(kp[:, 0] - cx) / unit, (kp[:, 1] - cy) / unit], axis=1)
        row[: N_KEYPOINTS * 3] = np.concatenate([xy * ok[:, None], ok[:, None]], axis=1).ravel()
        x0, y0, x1, y1 = p.box
        row[N_KEYPOINTS * 3 :] = ((x0 - cx) / unit, (y0 - cy) / unit, (x1 - cx) / unit,
                                   (y1 - cy) / unit, 1.0)  # fmt: skip
    return out
