"""Synthetic action videos: an articulated stick person on varied rooms, written as real mp4 files.

The classes come in ambiguous pairs so that only time tells them apart:
- `fall` and `lie_down` follow the *same* pose path (upright -> lying on the floor) with the same
  easing; a fall takes 0.4-0.7 s, a lie-down 2-3 s. Any single frame could be either.
- `sit_down` and `stand_up` are the same path played forwards and backwards at the same speed;
  in a generated set, the two clips of one index share room, person, place and tempo, so each is
  the other played backwards.
`pick_up` (bend and rise) and `walk` add everyday motion. Sensor noise, lighting drift and camera
jitter make every clip different; a seed makes the whole set reproducible.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import cv2
import numpy as np

CLASSES = ("fall", "lie_down", "sit_down", "stand_up", "pick_up", "walk")
SHAKE_TAU_S = 0.5  # how slowly the camera shake wanders
MANIFEST_FIELDS = (
    "path",
    "label",
    "subject",
    "fps",
    "frames",
    "start_s",
    "end_s",
    "fall_start_s",
    "fall_end_s",
)


@dataclass(frozen=True)
class Pose:
    """A stick person: feet anchor on the floor, body tilt, knee/hip bends and walking phase."""

    x: float  # anchor (between the feet) in pixels
    tilt: float  # whole-body rotation about the feet, radians; pi/2 is lying flat
    crouch: float  # 0 standing straight .. 1 sitting (thighs horizontal)
    bend: float  # torso forward bend about the hips, radians
    stride: float  # walking leg swing, radians
    facing: float = 1.0  # +1 faces right, -1 faces left


def _smoothstep(u: float) -> float:
    u = min(max(u, 0.0), 1.0)
    return u * u * (3.0 - 2.0 * u)


def _lerp(a: float, b: float, u: float) -> float:
    return a + (b - a) * u


@dataclass(frozen=True)
class _Action:
    """An action as a function of time: the pose at t seconds, and when the motion happens."""

    pose: Callable[[float], Pose]
    start_s: float
    end_s: float
    duration_s: float


def _make_action(
    label: str,
    rng: np.random.Generator,
    width: int,
    lead_s: float | None = None,
    tail_s: float | None = None,
    place: np.random.Generator | None = None,
) -> _Action:
    """`place` (default `rng`) draws where the person stands, which way they face and the tempo:
    clips that share it are the same scene acted differently (sit_down is then stand_up played
    backwards), so nothing but the motion tells their labels apart."""
    place = rng if place is None else place
    side = place.choice([-1.0, 1.0])  # which way the body goes down / faces
    x0 = float(place.uniform(0.3, 0.7) * width)
    tempo = float(place.uniform(0.0, 1.0))  # slow .. quick end of each class's duration range
    lead = float(rng.uniform(0.3, 0.6))
    tail = float(rng.uniform(0.3, 0.6))
    lead = lead if lead_s is None else lead_s  # draws above keep the rng sequence unchanged
    tail = tail if tail_s is None else tail_s
    stand = Pose(x0, 0.0, 0.0, 0.0, 0.0, float(side))
    if label in ("fall", "lie_down"):
        # Same path and easing; only the speed differs (a fall takes 0.4-0.7 s, lying down 2-3 s).
        motion = _lerp(0.7, 0.4, tempo) if label == "fall" else _lerp(3.0, 2.0, tempo)
        lying = replace(stand, tilt=side * math.pi / 2 * 0.97)

        def pose(t: float) -> Pose:
            u = _smoothstep((t - lead) / motion)
            return replace(
                stand, tilt=_lerp(0.0, lying.tilt, u), crouch=0.15 * math.sin(math.pi * u)
            )

    elif label in ("sit_down", "stand_up"):
        motion = _lerp(1.0, 0.6, tempo)
        forward = label == "sit_down"

        def pose(t: float) -> Pose:
            u = _smoothstep((t - lead) / motion)
            u = u if forward else 1.0 - u
            return replace(stand, crouch=u, bend=0.35 * math.sin(math.pi * u))

    elif label == "pick_up":
        motion = _lerp(2.0, 1.2, tempo)

        def pose(t: float) -> Pose:
            u = math.sin(math.pi * min(max((t - lead) / motion, 0.0), 1.0))
            return replace(stand, bend=1.3 * u, crouch=0.35 * u)

    elif label == "walk":
        motion = _lerp(2.5, 1.5, tempo)
        speed = side * float(rng.uniform(0.15, 0.3)) * width  # pixels per second
        cadence = float(rng.uniform(1.6, 2.2))  # steps per second

        def pose(t: float) -> Pose:
            tt = min(max(t - lead, 0.0), motion)
            return replace(
                stand, x=x0 + speed * tt, stride=0.45 * math.sin(2 * math.pi * cadence * tt)
            )

    else:
        raise ValueError(f"unknown class {label!r}; choose from {', '.join(CLASSES)}")
    return _Action(pose, lead, lead + motion, lead + motion + tail)


@dataclass(frozen=True)
class _Look:
    """What does not change within a clip: the room, the person's colours and size."""

    background: np.ndarray
    floor_y: float
    height: float
    thickness: int
    skin: tuple[int, int, int]
    shirt: tuple[int, int, int]
    trousers: tuple[int, int, int]


def _random_colour(rng: np.random.Generator, lo: int = 20, hi: int = 235) -> tuple[int, int, int]:
    c = rng.integers(lo, hi, 3)
    return int(c[0]), int(c[1]), int(c[2])


def _make_look(rng: np.random.Generator, width: int, height: int) -> _Look:
    floor_y = float(rng.uniform(0.72, 0.9) * height)
    wall, floor = np.array(_random_colour(rng)), np.array(_random_colour(rng))
    bg = np.empty((height, width, 3), np.float32)
    ramp = np.linspace(0.8, 1.2, height, dtype=np.float32)[:, None, None]
    bg[:] = wall * ramp
    bg[int(floor_y) :] = floor * ramp[int(floor_y) :]
    for _ in range(int(rng.integers(2, 7))):  # furniture and pictures
        x1, y1 = int(rng.integers(0, width)), int(rng.integers(0, height))
        w, h = (
            int(rng.integers(width // 12, width // 3)),
            int(rng.integers(height // 12, height // 3)),
        )
        cv2.rectangle(bg, (x1, y1), (x1 + w, y1 + h), _random_colour(rng), -1)
    bg += rng.normal(0, 6, (height, width, 1)).astype(np.float32)  # texture
    scale = float(rng.uniform(0.6, 0.85) * floor_y)
    return _Look(
        background=np.clip(bg, 0, 255),
        floor_y=floor_y,
        height=scale,
        thickness=max(2, int(scale / 11)),
        skin=_random_colour(rng, 120, 230),
        shirt=_random_colour(rng),
        trousers=_random_colour(rng),
    )


def _draw_person(img: np.ndarray, pose: Pose, look: _Look) -> None:
    """Draw the stick person; body coordinates have the feet at the origin, then rotate by tilt."""
    h, f = look.height, pose.facing
    shin, thigh, torso, arm, head = 0.25 * h, 0.25 * h, 0.34 * h, 0.3 * h, 0.09 * h
    phi = pose.crouch * math.pi / 2  # thigh angle from vertical: 0 standing, pi/2 sitting
    knee_y = -shin
    hip = (-f * thigh * math.sin(phi), knee_y - thigh * math.cos(phi))
    shoulder = (hip[0] + f * torso * math.sin(pose.bend), hip[1] - torso * math.cos(pose.bend))
    head_c = (
        shoulder[0] + f * 1.3 * head * math.sin(pose.bend),
        shoulder[1] - 1.3 * head * math.cos(pose.bend),
    )
    legs = []
    for sgn in (-1.0, 1.0):
        foot = (sgn * math.sin(pose.stride) * (shin + thigh) * 0.6, 0.0)
        knee = (foot[0] * 0.5, knee_y)
        legs.append((foot, knee))
    hands = []
    for sgn in (-1.0, 1.0):
        a = f * (pose.bend + 0.25) + sgn * pose.stride * 0.8
        hands.append((shoulder[0] + arm * math.sin(a), shoulder[1] + arm * math.cos(a)))

    c, s = math.cos(pose.tilt), math.sin(pose.tilt)

    def to_img(p: tuple[float, float]) -> tuple[int, int]:
        return round(pose.x + p[0] * c - p[1] * s), round(look.floor_y + p[0] * s + p[1] * c)

    t = look.thickness
    for foot, knee in legs:
        cv2.line(img, to_img(foot), to_img(knee), look.trousers, t, cv2.LINE_AA)
        cv2.line(img, to_img(knee), to_img(hip), look.trousers, t, cv2.LINE_AA)
    cv2.line(img, to_img(hip), to_img(shoulder), look.shirt, int(t * 1.8), cv2.LINE_AA)
    for hand in hands:
        cv2.line(img, to_img(shoulder), to_img(hand), look.shirt, t, cv2.LINE_AA)
    cv2.circle(img, to_img(head_c), int(head), look.skin, -1, cv2.LINE_AA)


def render_clip(
    label: str,
    seed: int,
    fps: float,
    width: int = 320,
    height: int = 240,
    lead_s: float | None = None,
    tail_s: float | None = None,
    look_seed: int | None = None,
) -> tuple[Iterator[np.ndarray], _Action, int]:
    """Frames (BGR uint8) of one clip, its action timing and its frame count.

    `lead_s` / `tail_s` override the still time before and after the action (demo scenes).
    `look_seed` fixes the room, the person, where they stand, which way they face and the tempo,
    independently of the action.
    """
    rng = np.random.default_rng(seed)
    look = _make_look(rng, width, height)
    place = None
    if look_seed is not None:
        look = _make_look(np.random.default_rng(look_seed), width, height)
        place = np.random.default_rng(look_seed + 1)
    action = _make_action(label, rng, width, lead_s, tail_s, place)
    n_frames = max(1, round(action.duration_s * fps))
    drift_phase, drift_amp = float(rng.uniform(0, 2 * math.pi)), float(rng.uniform(0.03, 0.12))
    # Camera shake of a wall-mounted camera: a slow random walk (time constant SHAKE_TAU_S) of
    # at most about a pixel at 320 px wide, the same in time whatever the fps.
    shake = float(rng.uniform(0.1, 0.5)) * width / 320
    noise = float(rng.uniform(2.0, 7.0))

    def frames() -> Iterator[np.ndarray]:
        frng = np.random.default_rng(seed + 1)
        keep = math.exp(-1.0 / (fps * SHAKE_TAU_S))
        offset = frng.normal(0, shake, 2)
        for i in range(n_frames):
            t = i / fps
            img = look.background.copy()
            _draw_person(img, action.pose(t), look)
            img *= 1.0 + drift_amp * math.sin(drift_phase + 0.8 * t)  # lighting drift
            if i:
                offset = keep * offset + math.sqrt(1 - keep * keep) * frng.normal(0, shake, 2)
            dx, dy = offset  # camera shake
            m = np.array([[1, 0, dx], [0, 1, dy]], dtype=np.float32)
            img = cv2.warpAffine(img, m, (width, height), borderMode=cv2.BORDER_REFLECT)
            img += frng.normal(0, noise, (height, width, 3)).astype(np.float32)  # sensor noise
            yield np.clip(img, 0, 255).astype(np.uint8)

    return frames(), action, n_frames


def write_video(
    path: Path, frames: Iterator[np.ndarray], fps: float, size: tuple[int, int]
) -> None:
    """Write BGR frames to an mp4 (MPEG-4 Part 2, which every OpenCV build can write)."""
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"mp4v"), fps, size)
    if not writer.isOpened():
        raise OSError(f"OpenCV cannot write {path}")
    try:
        for f in frames:
            writer.write(f)
    finally:
        writer.release()


def generate(
    out: Path,
    clips_per_class: int,
    fps: float,
    seed: int = 0,
    width: int = 320,
    height: int = 240,
    classes: tuple[str, ...] = CLASSES,
    progress: Callable[[int, int], None] | None = None,
) -> Path:
    """Write `clips_per_class` clips of each class under `out` and `out/manifest.csv`."""
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    total = clips_per_class * len(classes)
    for i in range(clips_per_class):
        for c, label in enumerate(classes):
            # Every class of index i shares one room, person, place and tempo: the still content
            # then says nothing about the label, and a network must learn the motion (memorising
            # rooms or where someone stands does not separate sit_down from stand_up).
            clip_seed = seed * 1_000_003 + i * 101 + c
            look_seed = seed * 1_000_003 + i * 101 + 97
            frames, action, n = render_clip(
                label, clip_seed, fps, width, height, look_seed=look_seed
            )
            rel = f"{label}/{label}_{seed}_{i:04d}.mp4"
            (out / label).mkdir(exist_ok=True)
            write_video(out / rel, frames, fps, (width, height))
            is_fall = label == "fall"
            rows.append(
                {
                    "path": rel,
                    "label": label,
                    # One person in one room acting every class: a subject, so that a validation
                    # split by subject never sees a scene whose other takes it trained on.
                    "subject": f"s{seed}-{i:04d}",
                    "fps": f"{fps:g}",
                    "frames": n,
                    "start_s": f"{action.start_s:.3f}",
                    "end_s": f"{action.end_s:.3f}",
                    "fall_start_s": f"{action.start_s:.3f}" if is_fall else "",
                    "fall_end_s": f"{action.end_s:.3f}" if is_fall else "",
                }
            )
            if progress is not None:
                progress(len(rows), total)
    manifest = out / "manifest.csv"
    with manifest.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=MANIFEST_FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    return manifest


DEMO_CLIPS = {"fall_demo.mp4": ("fall", 7), "lie_down_demo.mp4": ("lie_down", 8)}


def write_demo_clips(out: Path, fps: float = 15.0) -> list[Path]:
    """Two demo scenes at `fps`: a fall, and its hard negative, a slow lie-down (same end pose).

    Each stands still for 3 s first and stays down for 4 s after, like a camera would see it.
    """
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, (label, seed) in DEMO_CLIPS.items():
        frames, _, _ = render_clip(label, 9000 + seed, fps, 320, 240, lead_s=3.0, tail_s=4.0)
        write_video(out / name, frames, fps, (320, 240))
        paths.append(out / name)
    return paths
