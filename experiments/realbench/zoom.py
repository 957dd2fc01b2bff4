"""Motion zoom: a crop of the camera's frame that follows where people move.

A person far from the camera is a few pixels tall once the whole frame is squeezed to the model's
input. `MotionZoom` looks at the frames the camera samples (one per sampling interval), finds
where the picture changed over the last `memory_s`, and keeps a crop around it with the frame's
aspect ratio, never smaller than `min_fraction` of the frame (at most 1 / min_fraction zoom).

The crop moves only when it has to (hysteresis): when the motion leaves it, or when it is much
larger than the motion needs. When nothing moves (a person lying still after a fall) it stays
where it is, so the person stays in view. A window's T frames therefore almost always share
one crop.

Measured on real footage (README, row "160px, motion zoom" of the real-footage benchmark), this
zoom makes the fall model worse: the crop moves when the motion is largest, which is during the
fall, so the model sees a cut mid-descent. It is kept for that benchmark row and
`experiments/zoomed_clips.py`; the daemon does not use it.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from edge_hf.core.video import Crop, VideoError, cut, file_fps, tick_frames


@dataclass(frozen=True)
class ZoomSettings:
    """How `MotionZoom` finds motion and frames it."""

    memory_s: float = 1.5  # motion this recent is kept in the crop
    min_fraction: float = 0.5  # the crop's side is at least this fraction of the frame's
    margin: float = 0.25  # added around the motion on each side, as a fraction of its size
    zoom_in_ratio: float = 1.6  # reframe tighter once the crop is this much wider than needed
    work_width: int = 160  # motion is measured on the frame shrunk to this width
    diff_level: int = 25  # grey-level change (of 255) that counts as motion
    min_motion: float = 0.002  # fraction of the frame that must change for motion to count

    def __post_init__(self) -> None:
        if not 0.0 < self.min_fraction <= 1.0:
            raise ValueError(f"min_fraction must be in (0, 1] (got {self.min_fraction})")
        if self.memory_s <= 0 or self.margin < 0 or self.zoom_in_ratio < 1.0:
            raise ValueError("memory_s must be > 0, margin >= 0 and zoom_in_ratio >= 1")


def _motion_box(mask: np.ndarray, min_pixels: int) -> tuple[float, float, float, float] | None:
    """(x0, y0, x1, y1) in mask pixels around where `mask` is set, ignoring stray specks (the
    1st-99th percentile of the set pixels' coordinates); None when too little is set."""
    ys, xs = np.nonzero(mask)
    if len(xs) < min_pixels:
        return None
    x0, x1 = np.percentile(xs, (1, 99))
    y0, y1 = np.percentile(ys, (1, 99))
    return float(x0), float(y0), float(x1) + 1.0, float(y1) + 1.0


class MotionZoom:
    """Per camera: feed each sampled BGR frame to `update`, get the crop to use for it."""

    def __init__(
        self, frame_wh: tuple[int, int], interval_s: float, settings: ZoomSettings
    ) -> None:
        self.width, self.height = frame_wh
        self.settings = settings
        self.crop: Crop = (0, 0, self.width, self.height)
        self._scale = settings.work_width / self.width
        self._work_wh = (settings.work_width, max(1, round(self.height * self._scale)))
        self._previous: np.ndarray | None = None
        self._masks: deque[np.ndarray] = deque(maxlen=max(1, round(settings.memory_s / interval_s)))
        self._min_pixels = max(1, round(settings.min_motion * self._work_wh[0] * self._work_wh[1]))

    def update(self, frame_bgr: np.ndarray) -> Crop:
        """The crop for this frame, after taking its motion into account."""
        fh, fw = frame_bgr.shape[:2]
        if (fw, fh) != (self.width, self.height):
            raise ValueError(
                f"frame is {fw}x{fh}, the zoom was set up for {self.width}x{self.height}"
            )
        grey = cv2.cvtColor(cv2.resize(frame_bgr, self._work_wh, interpolation=cv2.INTER_AREA),
                            cv2.COLOR_BGR2GRAY)  # fmt: skip
        grey = cv2.GaussianBlur(grey, (5, 5), 0)
        if self._previous is not None:
            changed = (cv2.absdiff(grey, self._previous) > self.settings.diff_level).astype(
                np.uint8
            )
            moved = cv2.morphologyEx(changed, cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
            self._masks.append(moved)
            recent = np.bitwise_or.reduce(np.stack(self._masks), axis=0)
            box = _motion_box(recent, self._min_pixels)
            if box is not None:
                self._reframe(tuple(v / self._scale for v in box))  # type: ignore[arg-type]
        self._previous = grey
        return self.crop

    def _reframe(self, motion: tuple[float, float, float, float]) -> None:
        """Move the crop to frame `motion` (frame pixels) if it is outside, or far too wide."""
        x0, y0, x1, y1 = motion
        cx, cy, cw, _ = self.crop
        inside = cx <= x0 and cy <= y0 and x1 <= cx + cw and y1 <= cy + self.crop[3]
        target = self._framing(motion)
        if inside and cw <= self.settings.zoom_in_ratio * target[2]:
            return
        self.crop = target

    def _framing(self, motion: tuple[float, float, float, float]) -> Crop:
        """The crop around `motion` with margins, the frame's aspect ratio and the minimum size,
        shifted to lie inside the frame."""
        s = self.settings
        x0, y0, x1, y1 = motion
        aspect = self.width / self.height
        w = (x1 - x0) * (1 + 2 * s.margin)
        h = (y1 - y0) * (1 + 2 * s.margin)
        w = min(self.width, max(w, h * aspect, s.min_fraction * self.width))
        h = min(self.height, w / aspect)
        w = h * aspect
        left = min(max((x0 + x1 - w) / 2, 0.0), self.width - w)
        top = min(max((y0 + y1 - h) / 2, 0.0), self.height - h)
        x, y = round(left), round(top)
        return x, y, min(round(w), self.width - x), min(round(h), self.height - y)


def _frames(src: Path, crop: Crop | None) -> Iterator[tuple[np.ndarray, bool]]:
    """(frame, is it the last) of `src`, its `crop` region, one frame read ahead."""
    cap = cv2.VideoCapture(str(src))
    try:
        ok, frame = cap.read()
        if not ok:
            raise VideoError(f"{src}: no frame could be decoded; is it a video file?")
        while ok:
            ok, following = cap.read()
            yield cut(frame, crop), not ok
            frame = following
    finally:
        cap.release()


def zoom_video(
    src: Path, crop: Crop | None, dst: Path, interval_s: float, width: int,
    settings: ZoomSettings, fps: float | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Write `src` (its `crop` region) as a motion-zoomed camera would deliver it to `dst`
    (MJPG, `width` pixels wide, the frame's aspect ratio); how much it zoomed.

    The zoom sees the frame nearest each sampling tick (k * interval_s), as the daemon samples;
    every frame is written as the crop current at its time.
    """
    if fps is None:
        cap = cv2.VideoCapture(str(src))
        fps = file_fps(float(cap.get(cv2.CAP_PROP_FPS) or 0.0), str(src))
        cap.release()
    zoom: MotionZoom | None = None
    out: cv2.VideoWriter | None = None
    tmp = dst.with_suffix(".part.avi")
    crops: list[Crop] = []
    # The frame indices the daemon samples (tick_frames over the indices themselves, lazily).
    picks = (i for _, i in tick_frames(itertools.count(), fps, interval_s))
    pick = next(picks)
    for i, (frame, last) in enumerate(_frames(src, crop)):
        if zoom is None or out is None:
            fh, fw = frame.shape[:2]
            size = (width, round(width * fh / fw))
            zoom = MotionZoom((fw, fh), interval_s, settings)
            dst.parent.mkdir(parents=True, exist_ok=True)
            out = cv2.VideoWriter(str(tmp), cv2.VideoWriter.fourcc(*"MJPG"), fps, size)
            out.set(cv2.VIDEOWRITER_PROP_QUALITY, 95)
        # Frame i is sampled if it is the one nearest some tick (ticks past the end: the last).
        sampled = last or pick == i
        while pick <= i:
            pick = next(picks)
        x, y, w, h = zoom.update(frame) if sampled else zoom.crop
        crops.append((x, y, w, h))
        out.write(cv2.resize(frame[y : y + h, x : x + w], size, interpolation=cv2.INTER_AREA))
    if out is None or zoom is None:  # (_frames raises before it yields nothing)
        raise VideoError(f"{src}: no frame could be decoded")
    out.release()
    tmp.rename(dst)
    widths = np.array([c[2] for c in crops], float) / zoom.width
    return {
        "frames": len(crops),
        "zoom_mean": round(float(np.mean(1.0 / widths)), 3),
        "zoomed_frames": round(float(np.mean(widths < 0.999)), 3),
        "reframes": sum(a != b for a, b in itertools.pairwise(crops)),
    }
