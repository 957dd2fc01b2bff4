"""Evidence that shows no one: the people at a fall drawn as stick figures on a plain background.

With `snapshots.mode: skeleton` (the default) a fall's snapshot is the person stage's people at
the fall (each person's keypoints joined by limbs, and their box; the person the fall is about
in FALLEN's colour) drawn at the camera's resolution; no pixel of the camera's picture goes
into it (the picture never leaves the inference loop: `Pipeline` hands over `Skeleton` instead).
Drawn without anti-aliasing and written as PNG, so every pixel is the background or one of
PALETTE's colours: what `tests/test_evidence.py` checks, pixel by pixel.

Pure functions of their inputs: `figures` (people -> 0-1 of the view), `draw` (-> BGR array),
`encode_png`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import cv2
import numpy as np

from edge_hf.core.pose import MIN_KEYPOINT_SCORE, Person, iou

BACKGROUND = (48, 40, 36)  # BGR, a dark slate
FALLEN = (64, 64, 235)  # the person the fall is about (red)
OTHER = (96, 200, 96)  # anyone else (green)
TEXT = (235, 235, 235)
PALETTE = (BACKGROUND, FALLEN, OTHER, TEXT)
# COCO's 17 keypoints joined as MoveNet's own demo does: face, arms, torso, legs.
LIMBS = (
    (0, 1), (0, 2), (1, 3), (2, 4), (5, 6), (5, 7), (7, 9), (6, 8), (8, 10),
    (5, 11), (6, 12), (11, 12), (11, 13), (13, 15), (12, 14), (14, 16),
)  # fmt: skip
Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class Figure:
    """One person as a skeleton shows them: box (x0, y0, x1, y1) and keypoints (17, 3: x, y,
    score), x and y as 0-1 of the camera's view (its crop, or the whole frame)."""

    box: Box
    keypoints: np.ndarray


@dataclass(frozen=True)
class PoseTick:
    """The people the person stage found in one pose frame of a camera (sample time `t`; the
    pose frame's (height, width): the view's proportions)."""

    t: float
    figures: tuple[Figure, ...]
    hw: tuple[int, int] = (0, 0)


@dataclass(frozen=True)
class Skeleton:
    """What a skeleton picture shows: the camera's frame size (width, height), the view within it
    (`cameras[].crop`, None: the whole frame), the people, and the fallen person's box (0-1 of
    the view; None: nobody named)."""

    size: tuple[int, int]
    crop: tuple[int, int, int, int] | None
    figures: tuple[Figure, ...]
    fallen: Box | None = None


def figures(people: Sequence[Person], frame_hw: tuple[int, int]) -> tuple[Figure, ...]:
    """People found in a pose frame of `frame_hw` (its pixels) as 0-1 of that frame (= the view)."""
    h, w = frame_hw
    scale = np.array([w, h, 1.0])
    out = []
    for p in people:
        x0, y0, x1, y1 = p.box
        out.append(Figure((x0 / w, y0 / h, x1 / w, y1 / h), np.asarray(p.keypoints) / scale))
    return tuple(out)


def _fallen(sk: Skeleton) -> Figure | None:
    """The figure the fall is about: the one whose box overlaps the event's person most."""
    if sk.fallen is None:
        return None
    named = sk.fallen
    best = max(sk.figures, key=lambda f: iou(f.box, named), default=None)
    return best if best is not None and iou(best.box, named) > 0.3 else None


def draw(sk: Skeleton, caption: str = "") -> np.ndarray:
    """The skeleton as a BGR picture of the camera's size: a plain background, each person's
    limbs, joints and box (the fallen one in FALLEN, the others in OTHER), and `caption`."""
    w, h = sk.size
    canvas = np.empty((h, w, 3), np.uint8)
    canvas[:] = BACKGROUND
    vx, vy, vw, vh = sk.crop if sk.crop is not None else (0, 0, w, h)
    line = max(2, round(max(w, h) / 320))

    def px(x: float, y: float) -> tuple[int, int]:
        return round(vx + x * vw), round(vy + y * vh)

    fallen = _fallen(sk)
    for f in sorted(sk.figures, key=lambda f: f is fallen):  # (the fallen one drawn last, on top)
        colour = FALLEN if f is fallen else OTHER
        cv2.rectangle(canvas, px(*f.box[:2]), px(*f.box[2:]), colour, max(1, line // 2), cv2.LINE_8)
        seen = f.keypoints[:, 2] >= MIN_KEYPOINT_SCORE
        for a, b in LIMBS:
            if seen[a] and seen[b]:
                cv2.line(canvas, px(*f.keypoints[a, :2]), px(*f.keypoints[b, :2]), colour, line,
                         cv2.LINE_8)  # fmt: skip
        for k in np.flatnonzero(seen):
            cv2.circle(canvas, px(*f.keypoints[k, :2]), line + 1, colour, -1, cv2.LINE_8)
    text = caption if sk.figures else f"{caption}  (no person found)".strip()
    if text:  # (on a mask first: OpenCV 5 smooths text whatever the line type)
        scale = max(0.4, h / 720)
        mask = np.zeros((h, w), np.uint8)
        cv2.putText(mask, text, (round(10 * scale), round(28 * scale)), cv2.FONT_HERSHEY_SIMPLEX,
                    0.7 * scale, 255, max(1, round(scale * 1.5)), cv2.LINE_8)  # fmt: skip
        canvas[mask >= 128] = TEXT
    return canvas


def encode_png(picture: np.ndarray) -> bytes:
    """A picture as PNG bytes (lossless: the palette survives); OSError if OpenCV cannot."""
    ok, encoded = cv2.imencode(".png", picture, [cv2.IMWRITE_PNG_COMPRESSION, 3])
    if not ok:
        raise OSError("OpenCV could not encode it")
    return encoded.tobytes()
