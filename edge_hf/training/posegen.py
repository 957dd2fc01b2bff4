"""Generated motion seen by a camera and MoveNet: per-tick `Person` detections, as the daemon's
pose model reports them (`edge_hf.core.pose.Person`, keypoints in `KEYPOINTS` order, pixels).

`random_camera` places a camera relative to the person (`Camera.azimuth_deg` from the motion's
`facing_deg`: 0 or 180 looks along a lying body, 90 from its side), `project` takes world points
through a pinhole with radial distortion, and `observe` turns a `Motion` into what MoveNet
MultiPose would have found at each tick: keypoints with noise, scores that fall with size,
lying, motion blur, self-occlusion and leaving the frame, left/right swaps, ticks where nobody is
found, the odd ghost person, boxes padded beyond the keypoints like MoveNet's. `MoveNetErrors`'
defaults are fitted to MoveNet's output over the real clips' cached poses
(`experiments/posegen_check.py`, benchmarks/results/pose/posegen_check.md); `stats` is what was
compared.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from edge_hf.core.pose import MIN_PERSON_SCORE, POSE_SIDE, Person
from edge_hf.training.posestats import stats, stats_many
from edge_hf.training.skeleton import Motion

__all__ = [
    "Camera", "MoveNetErrors", "observe", "project", "random_camera", "random_errors", "stats",
    "stats_many",
]  # fmt: skip

LEFT = (1, 3, 5, 7, 9, 11, 13, 15)
RIGHT = (2, 4, 6, 8, 10, 12, 14, 16)
_MIRROR = np.arange(17)
_MIRROR[list(LEFT)], _MIRROR[list(RIGHT)] = RIGHT, LEFT
SIZES = ((640, 480), (1280, 720), (1920, 1080), (800, 600), (320, 240), (720, 1280))
_SIZE_P = (0.3, 0.3, 0.1, 0.1, 0.1, 0.1)
FPS = (5.0, 10.0, 12.5, 15.0, 20.0, 25.0, 30.0)
_FPS_P = (0.05, 0.1, 0.05, 0.25, 0.1, 0.2, 0.25)


@dataclass(frozen=True)
class Camera:
    """A camera seen from the person: `distance_m` along the floor from the point it aims at,
    in the direction `azimuth_deg` from the motion's facing, `height_m` up, looking down by
    `pitch_deg` (0 level, 90 straight down) and `pan_deg` aside; a lens of `hfov_deg`
    (horizontal, undistorted) with radial distortion `k1` (negative: barrel); `size` (w, h)."""

    height_m: float = 2.2
    pitch_deg: float = 25.0
    azimuth_deg: float = 90.0
    distance_m: float = 4.0
    hfov_deg: float = 70.0
    k1: float = 0.0
    size: tuple[int, int] = (640, 480)
    fps: float = 15.0
    pan_deg: float = 0.0
    roll_deg: float = 0.0

    @property
    def focal_px(self) -> float:
        return self.size[0] / 2 / math.tan(math.radians(self.hfov_deg) / 2)


def random_camera(
    rng: np.random.Generator,
    azimuth: float | None = None,
    pitch: float | None = None,
    exclude: Callable[[Camera], bool] | None = None,
    tries: int = 10_000,
) -> Camera:
    """A random home camera aimed roughly at the person (sometimes so far off, or so close, that
    part of them is out of frame); `azimuth`, `pitch` fixed if given; cameras for which
    `exclude(camera)` is true (held-out views) are drawn again."""
    for _ in range(tries):
        cam = _draw_camera(rng, azimuth, pitch)
        if cam is not None and (exclude is None or not exclude(cam)):
            return cam
    raise ValueError(f"no camera in {tries} draws that `exclude` lets through")


def _draw_camera(
    rng: np.random.Generator, azimuth: float | None, pitch: float | None
) -> Camera | None:
    size = SIZES[rng.choice(len(SIZES), p=_SIZE_P)]
    hfov = float(rng.uniform(30, 120))
    # barrel distortion grows with the field of view (none on a tele lens)
    k1 = -0.085 * float(np.clip((hfov - 60) / 60, 0, 1)) ** 1.5 * float(rng.uniform(0.5, 1.1))
    vfov = math.degrees(2 * math.atan(math.tan(math.radians(hfov) / 2) * size[1] / size[0]))
    aim_z = float(rng.uniform(0.2, 1.0))  # the height on the person it aims at
    ceiling = pitch is None and rng.random() < 0.1
    height = float(rng.uniform(2.3, 3.0) if ceiling else rng.uniform(0.3, 3.0))
    if pitch is None and not ceiling:
        distance = float(rng.uniform(1.0, 8.0))
        tilt = math.degrees(math.atan2(height - aim_z, distance)) + rng.normal(0, vfov / 8)
        pitch_deg = float(np.clip(tilt, 0.0, 90.0))
    else:
        pitch_deg = float(rng.uniform(75, 90)) if pitch is None else float(pitch)
        if pitch_deg < 5:
            height, distance = float(rng.uniform(0.3, 1.5)), float(rng.uniform(1.0, 8.0))
        else:  # where a camera this steep must stand to see the person
            if pitch_deg > 45 and pitch is not None:
                height = float(rng.uniform(2.0, 3.0))
            distance = (height - aim_z) / math.tan(math.radians(pitch_deg))
            if not 0.0 <= distance <= 8.0:
                return None
    return Camera(
        height_m=height,
        pitch_deg=pitch_deg,
        azimuth_deg=float(rng.uniform(0, 360) if azimuth is None else azimuth),
        distance_m=distance,
        hfov_deg=hfov,
        k1=k1,
        size=size,
        fps=float(FPS[rng.choice(len(FPS), p=_FPS_P)]),
        pan_deg=float(rng.normal(0, hfov / 8)),
        roll_deg=float(rng.normal(0, 2)),
    )


def pose_of(camera: Camera, facing_deg: float = 0.0, target: Sequence[float] = (0.0, 0.0)
            ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The camera's centre (3,) and rotation (3, 3: rows right, down, forward) in the world,
    for a person facing `facing_deg` whose reference point on the floor is `target`."""
    view = math.radians(facing_deg + camera.azimuth_deg)
    d = camera.distance_m
    centre = np.array([target[0] - d * math.cos(view), target[1] - d * math.sin(view),
                       camera.height_m])  # fmt: skip
    yaw, p = view + math.radians(camera.pan_deg), math.radians(camera.pitch_deg)
    fwd = np.array([math.cos(p) * math.cos(yaw), math.cos(p) * math.sin(yaw), -math.sin(p)])
    right = np.array([math.sin(yaw), -math.cos(yaw), 0.0])
    down = np.cross(fwd, right)
    r = math.radians(camera.roll_deg)
    right, down = (
        math.cos(r) * right + math.sin(r) * down,
        -math.sin(r) * right + math.cos(r) * down,
    )
    return centre, np.stack([right, down, fwd])


def project(
    joints: np.ndarray,
    camera: Camera,
    facing_deg: float = 0.0,
    target: Sequence[float] = (0.0, 0.0),
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """World points (..., 3) to pixels (..., 2), their depth along the optical axis (...) and
    whether each is in the frame (in front of the camera, inside the picture, inside the lens's
    field where the distortion still maps outward)."""
    centre, rot = pose_of(camera, facing_deg, target)
    cam = (np.asarray(joints, float) - centre) @ rot.T
    depth = cam[..., 2]
    safe = np.where(depth > 1e-6, depth, 1e-6)
    x, y = cam[..., 0] / safe, cam[..., 1] / safe
    r2 = x * x + y * y
    scale = 1 + camera.k1 * r2
    f = camera.focal_px
    w, h = camera.size
    xy = np.stack([w / 2 + f * x * scale, h / 2 + f * y * scale], axis=-1)
    inside = (xy[..., 0] >= 0) & (xy[..., 0] < w) & (xy[..., 1] >= 0) & (xy[..., 1] < h)
    monotonic = 1 + 3 * camera.k1 * r2 > 0  # beyond it the lens folds back: not imaged
    return xy, depth, (depth > 0.05) & inside & monotonic


@dataclass(frozen=True)
class MoveNetErrors:
    """How MoveNet MultiPose (256-pixel input) gets a person wrong. Sizes are in the model's
    input pixels (the frame's long side scaled to `side`); jitter and pads are shares of the
    person's box. Keypoint scores: a per-tick quality (mean `score_mean`, wandering with
    `quality_sd` over `quality_tau_s`) less what size, lying, blur, occlusion and the frame's edge
    take, plus `score_sd` per keypoint; the person's score follows their mean."""

    side: int = POSE_SIDE
    min_size_px: float = 22.0  # a person's long side below this: never found
    ref_size_px: float = 80.0  # the long side at which a visible keypoint scores `score_mean`
    full_size_px: float = 200.0  # larger than this gains no more
    size_gain: float = 0.2  # score gained per e-fold of size
    score_mean: float = 0.6
    score_sd: float = 0.12
    quality_sd: float = 0.1
    quality_tau_s: float = 1.5
    lying_drop: float = 0.08  # a body across the picture (twice that upside down)
    blur_drop: float = 0.08  # moving a box height per second or faster
    occluded_drop: float = 0.15  # a joint behind the body
    out_drop: float = 0.6  # a joint outside the frame
    jitter: float = 0.0025  # keypoint noise (sd), share of the person's long side, confident
    jitter_low: float = 0.008  # ... scored at 0.2 or below
    jitter_hidden: float = 0.004  # ... more for a joint behind the body
    onto: float = 0.1  # per tick, a hidden joint put on its visible counterpart ...
    onto_end: float = 0.3  # ... and back where it is
    swap: float = 0.002  # per tick, the whole body's left/right labels swapped
    swap_back: float = 3.0  # ... times this seen from behind
    lost: float = 0.02  # per tick, not found though the scores would pass
    lost_hard: float = 0.08  # ... more for a lying, small or half-hidden person
    lost_stay: float = 0.8  # a lost tick followed by another
    ghost: float = 0.004  # per tick, a spurious second person appears
    ghost_stay: float = 0.6
    box_pad: float = 0.1  # box beyond the keypoints' extent: share of that extent
    box_pad_cross: float = 0.04  # ... plus share of the other side's extent
    box_sd: float = 0.015
    box_score: float = 0.2  # keypoints scored below this do not count for the box
    person_a: float = 0.835  # person score = a * mean keypoint score + b + N(0, sd)
    person_b: float = 0.015
    person_sd: float = 0.05


def random_errors(rng: np.random.Generator) -> MoveNetErrors:
    """`MoveNetErrors` varied around the fitted defaults (a worse or better day for MoveNet)."""
    e = MoveNetErrors()

    def k(lo: float = 0.6, hi: float = 1.6) -> float:
        return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))

    return replace(
        e,
        min_size_px=e.min_size_px * k(0.8, 1.3),
        score_mean=e.score_mean + float(rng.normal(0, 0.04)),
        quality_sd=e.quality_sd * k(),
        size_gain=e.size_gain * k(0.7, 1.4),
        lying_drop=e.lying_drop * k(),
        occluded_drop=e.occluded_drop * k(),
        jitter=e.jitter * k(),
        jitter_low=e.jitter_low * k(),
        swap=e.swap * k(0.3, 3.0),
        lost=e.lost * k(0.3, 3.0),
        lost_hard=e.lost_hard * k(0.5, 2.0),
        ghost=e.ghost * k(0.2, 4.0),
        box_pad=e.box_pad * k(0.8, 1.25),
    )


def _at(motion: Motion, times: np.ndarray) -> np.ndarray:
    """The motion's joints at `times` (s), linearly between its ticks, held at its ends."""
    src = np.arange(len(motion.joints)) / motion.rate_hz
    flat = motion.joints.reshape(len(src), -1)
    out = np.stack([np.interp(times, src, flat[:, c]) for c in range(flat.shape[1])], axis=1)
    return out.reshape(len(times), 17, 3)


def _body_axes(joints: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors (N, 3) to the body's left and its front, from shoulders and hips."""
    left = (joints[:, 5] - joints[:, 6]) + (joints[:, 11] - joints[:, 12])
    left /= np.maximum(np.linalg.norm(left, axis=1, keepdims=True), 1e-9)
    up = joints[:, [5, 6]].mean(axis=1) - joints[:, [11, 12]].mean(axis=1)
    front = np.cross(left, up)
    front /= np.maximum(np.linalg.norm(front, axis=1, keepdims=True), 1e-9)
    return left, front


def hidden(joints: np.ndarray, centre: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """How far (0-1) each joint (N, 17) is hidden behind the body from a camera at `centre`:
    a side's joints when the camera looks at the other side, the face from behind; and how
    much the camera sees the person's back (N,)."""
    left, front = _body_axes(joints)
    ray = joints - centre
    ray /= np.maximum(np.linalg.norm(ray, axis=2, keepdims=True), 1e-9)
    across = np.einsum("nkc,nc->nk", ray, left)  # > 0: looking at the body's right side
    behind = np.einsum("nkc,nc->nk", ray, front)  # > 0: looking at its back
    out = np.zeros(joints.shape[:2])
    out[:, list(LEFT)] = np.clip((across[:, list(LEFT)] - 0.3) / 0.4, 0, 1)
    out[:, list(RIGHT)] = np.clip((-across[:, list(RIGHT)] - 0.3) / 0.4, 0, 1)
    face = np.clip((behind[:, :3] - 0.2) / 0.4, 0, 1)
    out[:, :3] = np.maximum(out[:, :3], face)
    return out, behind[:, [11, 12]].mean(axis=1)


@dataclass
class _Track:
    """What carries over from one frame to the next for one take: the person's quality, whether
    MoveNet has lost them, a ghost's place."""

    quality: float = 0.0
    lost: bool = False
    ghost: np.ndarray | None = None
    onto: np.ndarray = field(default_factory=lambda: np.zeros(17, bool))


def _frames(
    motion: Motion, camera: Camera, rate_hz: float | None
) -> tuple[int, np.ndarray, np.ndarray, tuple[float, float]]:
    """Ticks, the camera frame each tick sees, the joints then, and where the camera aims (the
    pelvis's median place)."""
    rate = rate_hz or motion.rate_hz
    n = max(1, round(motion.duration_s * rate))
    frame = np.floor(np.arange(n) / rate * camera.fps + 0.5).astype(int)
    joints = _at(motion, frame / camera.fps)
    tx, ty = np.median(motion.joints[:, [11, 12]].mean(axis=1)[:, :2], axis=0)
    return n, frame, joints, (float(tx), float(ty))


def skeleton_boxes(
    motion: Motion, camera: Camera, rate_hz: float | None = None
) -> list[tuple[float, float, float, float] | None]:
    """The box of the true skeleton's joints in frame at each tick of `observe` (None with fewer
    than 3 in frame): which detection is the moving person (training labels)."""
    _, _, joints, target = _frames(motion, camera, rate_hz)
    xy, _, inside = project(joints, camera, motion.facing_deg, target)
    out: list[tuple[float, float, float, float] | None] = []
    for k in range(len(xy)):
        p = xy[k][inside[k]]
        lo, hi = (p.min(axis=0), p.max(axis=0)) if len(p) >= 3 else (None, None)
        out.append(None if lo is None or hi is None else
                   (float(lo[0]), float(lo[1]), float(hi[0]), float(hi[1])))  # fmt: skip
    return out


def observe(
    motion: Motion,
    camera: Camera,
    errors: MoveNetErrors,
    rng: np.random.Generator,
    rate_hz: float | None = None,
) -> list[list[Person]]:
    """What the pose model finds at each tick of `motion` (at `rate_hz`, the motion's own by
    default) through `camera`: usually one `Person`, sometimes none, now and then a ghost too.
    A camera slower than the ticks repeats its last frame's detections."""
    rate = rate_hz or motion.rate_hz
    n, frame, joints, target = _frames(motion, camera, rate)
    xy, _, inside = project(joints, camera, motion.facing_deg, target)
    centre, _ = pose_of(camera, motion.facing_deg, target)
    hid, back = hidden(joints, centre)
    track = _Track(quality=float(rng.normal(0, errors.quality_sd)))
    out: list[list[Person]] = []
    for k in range(n):
        if k and frame[k] == frame[k - 1]:
            out.append(out[-1])
            continue
        dt = (frame[k] - frame[k - 1]) / camera.fps if k else 1.0 / rate
        rho = math.exp(-dt / errors.quality_tau_s)
        track.quality = rho * track.quality + math.sqrt(1 - rho * rho) * float(
            rng.normal(0, errors.quality_sd)
        )
        prev = xy[k - 1] if k else None
        person = _detect(xy[k], inside[k], hid[k], back[k], prev, dt, camera, errors, track, rng)
        people = [] if person is None else [person]
        ghost = _ghost(person, camera, errors, track, rng)
        out.append(people + ([ghost] if ghost is not None else []))
    return out


def _extent(xy: np.ndarray) -> tuple[float, float, float, float]:
    return (
        float(xy[:, 0].min()),
        float(xy[:, 1].min()),
        float(xy[:, 0].max()),
        float(xy[:, 1].max()),
    )


def _detect(
    xy: np.ndarray,
    inside: np.ndarray,
    hid: np.ndarray,
    back: float,
    prev: np.ndarray | None,
    dt: float,
    camera: Camera,
    e: MoveNetErrors,
    track: _Track,
    rng: np.random.Generator,
) -> Person | None:
    """MoveNet's view of one person in one frame (true pixels `xy`), or None when not found."""
    if inside.sum() < 3:
        return None
    w, h = camera.size
    x0, y0, x1, y1 = _extent(xy[inside])
    ew, eh = max(x1 - x0, 1.0), max(y1 - y0, 1.0)
    size = max(ew, eh) * e.side / max(w, h)  # the long side in the model's input pixels
    if size < e.min_size_px:
        return None
    small = float(np.clip((e.ref_size_px - size) / (e.ref_size_px - e.min_size_px), 0, 1))
    dx, dy = xy[[11, 12]].mean(axis=0) - xy[[5, 6]].mean(axis=0)
    lying = (1 - math.cos(math.atan2(abs(dx), dy))) / 2  # 0 upright, 0.5 across, 1 upside down
    speed = 0.0 if prev is None else float(np.linalg.norm(xy - prev, axis=1).mean()) / dt / eh
    gain = e.size_gain * math.log(min(size, e.full_size_px) / e.ref_size_px)
    quality = (e.score_mean + gain + track.quality - 2 * e.lying_drop * lying
               - e.blur_drop * min(speed, 1.0))  # fmt: skip
    scores = quality + rng.normal(0, e.score_sd, 17) - e.occluded_drop * hid - e.out_drop * ~inside
    scores = np.clip(scores, 0.005, 0.98)
    person_score = (
        e.person_a * float(scores.mean()) + e.person_b + float(rng.normal(0, e.person_sd))
    )
    hard = max(small, 2 * lying if lying < 0.5 else 1.0, 1 - float(inside.mean()))
    p_lost = e.lost_stay if track.lost else e.lost + e.lost_hard * hard
    track.lost = bool(rng.random() < p_lost)
    if track.lost or person_score < MIN_PERSON_SCORE:
        return None
    scale = max(ew, eh)
    low = np.clip((0.5 - scores) / 0.3, 0, 1)
    sd = scale * (e.jitter + (e.jitter_low - e.jitter) * low + e.jitter_hidden * hid)
    kp = xy + rng.normal(0, 1, (17, 2)) * sd[:, None]
    # a hidden limb is often put on the one that shows (both ankles on the near leg), for a
    # few ticks at a time
    track.onto = np.where(track.onto, rng.random(17) >= e.onto_end,
                          rng.random(17) < e.onto * hid) & (hid > 0)  # fmt: skip
    onto = track.onto
    kp[onto] = xy[_MIRROR[onto]] + rng.normal(0, 1, (int(onto.sum()), 2)) * sd[onto, None]
    kp[:, 0] = np.clip(kp[:, 0], 0, w - 1)
    kp[:, 1] = np.clip(kp[:, 1], 0, h - 1)
    if rng.random() < e.swap * (e.swap_back if back > 0.3 else 1.0):
        kp, scores = kp[_MIRROR], scores[_MIRROR]
    # MoveNet's box: its fairly sure keypoints' extent padded, most across the body's narrow side
    sure = scores >= e.box_score
    x0, y0, x1, y1 = _extent(kp[sure] if sure.sum() >= 3 else kp)
    ew, eh = max(x1 - x0, 1.0), max(y1 - y0, 1.0)
    padx = e.box_pad * ew + e.box_pad_cross * eh
    pady = e.box_pad * eh + e.box_pad_cross * ew
    edges = np.array([x0 - padx, y0 - pady, x1 + padx, y1 + pady]) + rng.normal(
        0, e.box_sd * scale, 4
    )
    box = (float(np.clip(edges[0], 0, w)), float(np.clip(edges[1], 0, h)),
           float(np.clip(edges[2], 0, w)), float(np.clip(edges[3], 0, h)))  # fmt: skip
    keypoints = np.concatenate([kp, scores[:, None]], axis=1).astype(np.float32)
    return Person(box, float(min(person_score, 0.99)), keypoints)


def _ghost(
    person: Person | None,
    camera: Camera,
    e: MoveNetErrors,
    track: _Track,
    rng: np.random.Generator,
) -> Person | None:
    """A spurious low-scoring person (a coat, a chair, a reflection), staying a few ticks where
    it appeared."""
    on = track.ghost is not None
    if not (rng.random() < (e.ghost_stay if on else e.ghost)):
        track.ghost = None
        return None
    w, h = camera.size
    if track.ghost is None:
        if person is not None:
            kp = person.keypoints[:, :2].copy()
            kp -= kp.mean(axis=0)
        else:
            kp = rng.normal(0, 1, (17, 2)) * [0.05 * h, 0.15 * h]
        kp *= rng.uniform(0.4, 1.0)
        kp += [rng.uniform(0, w), rng.uniform(0, h)]
        track.ghost = kp
    kp = track.ghost + rng.normal(0, 0.01 * h, (17, 2))
    kp[:, 0] = np.clip(kp[:, 0], 0, w - 1)
    kp[:, 1] = np.clip(kp[:, 1], 0, h - 1)
    scores = np.clip(rng.normal(0.22, 0.1, 17), 0.005, 0.9)
    x0, y0, x1, y1 = _extent(kp)
    pad = 0.1 * max(x1 - x0, y1 - y0)
    box = (max(x0 - pad, 0.0), max(y0 - pad, 0.0), min(x1 + pad, float(w)), min(y1 + pad, float(h)))
    score = float(rng.uniform(MIN_PERSON_SCORE, 0.32))
    return Person(box, score, np.concatenate([kp, scores[:, None]], axis=1).astype(np.float32))
