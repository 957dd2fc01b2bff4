"""Generated 3D human motion in the 17 COCO keypoints: falls, and daily life that looks like them.

`motion(kind, rng)` scripts one take of a kind (`FALLS`, `DAILY`) on a random body (`Body`:
a child to a tall adult, elderly stooped and slower), renders it through forward kinematics
(`edge_hf.training.body`) at `rate_hz` and labels every tick with a phase:

- UP: upright (standing, walking, sitting on a chair);
- FALLING: the uncontrolled descent of a fall (`Motion.descent`);
- DOWN: on the floor after a fall (lying, slumped, moving, failing to get up) until upright again;
- LOW: low on purpose in daily life (lying down, sitting on the floor, squatting, kneeling...),
  read off the body's geometry: the pelvis or head low, a knee on the floor, or the trunk tilted
  past 55 degrees.

The pelvis rests on the floor or a seat at every tick (`body.ground_z`) except in a descent, where
it drops under gravity (never through the floor), then bounces and settles. Joint angles move
between key poses with minimum jerk, a walking cycle and a small idle sway on top. The world has
the floor at z = 0, z up; `facing_deg` is where the body's long axis points once it lies (the
head's side), or its heading when it never lies: a camera's azimuth is taken from it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from edge_hf.core.contract import POSE_RATE_HZ
from edge_hf.training.body import HEAD, PARAMS, Body, P, ground_z, points, pose, random_body
from edge_hf.training.motion_daily import CHILD_KINDS, DAILY_KINDS, DAILY_STYLES
from edge_hf.training.motion_falls import FALL_KINDS, FALL_STYLES
from edge_hf.training.motion_keys import FALL, LINEAR, Timeline

__all__ = [
    "DAILY", "DOWN", "FALLING", "FALLS", "LOW", "STYLES", "UP", "Body", "Motion", "motion",
    "random_body", "random_motion", "style_of",
]  # fmt: skip

UP, FALLING, DOWN, LOW = 0, 1, 2, 3
PHASES = ("up", "falling", "down", "low")
FALLS = tuple(FALL_KINDS)
DAILY = tuple(DAILY_KINDS)
STYLES = FALL_STYLES + DAILY_STYLES
_KINDS = {**FALL_KINDS, **DAILY_KINDS}


@dataclass(frozen=True)
class Motion:
    """One generated take: (N, 17, 3) float32 world keypoints (metres, floor z = 0) at
    `rate_hz`, a phase per tick, the fall's descent (start_s, end_s) or None."""

    name: str
    fall: bool
    rate_hz: float
    joints: np.ndarray
    phase: np.ndarray
    descent: tuple[float, float] | None
    style: str
    facing_deg: float

    @property
    def duration_s(self) -> float:
        return len(self.joints) / self.rate_hz


def style_of(kind: str) -> str:
    """The style (variation family) of a kind."""
    return _KINDS[kind][0]


def motion(
    kind: str,
    rng: np.random.Generator,
    rate_hz: float = POSE_RATE_HZ,
    duration_s: float = 8.0,
    body: Body | None = None,
) -> Motion:
    """One take of `kind` (see `FALLS`, `DAILY`), `duration_s` long at `rate_hz`, on `body`
    (a random one by default; a small child for the children's kinds)."""
    if kind not in _KINDS:
        raise ValueError(f"unknown motion kind {kind!r}; known: {', '.join(_KINDS)}")
    if body is None:
        body = random_body(rng)
        if kind in CHILD_KINDS:
            body = Body.of(float(rng.uniform(0.85, 1.2)), rng, tempo=1.0, kind="child")
    style, script = _KINDS[kind]
    tl = script(rng, body, duration_s)
    heading = float(rng.uniform(0, 360))
    n = max(1, round(duration_s * rate_hz))
    t = np.arange(n) / rate_hz
    joints = _render(tl, body, t, heading, rng)
    fall = kind in FALL_KINDS
    phase = _phases(joints, body, t, tl.descent if fall else None)
    return Motion(
        name=kind,
        fall=fall,
        rate_hz=rate_hz,
        joints=joints[:, :17].astype(np.float32),
        phase=phase,
        descent=tl.descent if fall else None,
        style=style,
        facing_deg=_facing(joints, t, tl.rest_t),
    )


def random_motion(
    rng: np.random.Generator,
    rate_hz: float = POSE_RATE_HZ,
    duration_s: float = 8.0,
    kinds: tuple[str, ...] | list[str] | None = None,
    styles: tuple[str, ...] | list[str] | None = None,
) -> Motion:
    """A take of a random kind among `kinds` (all by default) whose style is among `styles`."""
    pool = [k for k in (kinds or _KINDS) if styles is None or _KINDS[k][0] in styles]
    if not pool:
        raise ValueError(f"no motion kind among {kinds} has a style among {styles}")
    return motion(pool[rng.integers(len(pool))], rng, rate_hz, duration_s)


def _minjerk(u: np.ndarray) -> np.ndarray:
    return u**3 * (10 - 15 * u + 6 * u**2)


def _keyed(tl: Timeline, t: np.ndarray) -> tuple[np.ndarray, ...]:
    """Poses at `t` between the key poses, and per time: the segment's start and end key,
    its progress u and its eased weight."""
    times = np.array([k.t for k in tl.keys])
    q = np.stack([k.pose for k in tl.keys])
    i = np.clip(np.searchsorted(times, t, side="right") - 1, 0, len(times) - 1)
    j = np.minimum(i + 1, len(times) - 1)
    span = np.maximum(times[j] - times[i], 1e-9)
    u = np.where(j > i, np.clip((t - times[i]) / span, 0.0, 1.0), 1.0)
    w = _minjerk(u)
    for k, key in enumerate(tl.keys):
        at = j == k
        if key.ease == LINEAR:
            w[at] = u[at]
        elif key.ease == FALL:
            w[at] = u[at] ** key.power
    return q[i] + w[:, None] * (q[j] - q[i]), i, j, u, w


# Idle sway amplitudes (degrees) of the angles that sway.
_SWAY = {"yaw": 3.0, "pitch": 1.5, "roll": 1.5, "spine_flex": 2.0, "spine_side": 1.5,
         "spine_twist": 3.0, "neck_flex": 5.0, "neck_yaw": 10.0, "sh_flex_l": 4.0,
         "sh_flex_r": 4.0, "sh_abd_l": 3.0, "sh_abd_r": 3.0, "elbow_l": 5.0, "elbow_r": 5.0,
         "hip_flex_l": 1.5, "hip_flex_r": 1.5, "knee_l": 2.0, "knee_r": 2.0}  # fmt: skip


def _sway(rng: np.random.Generator, t: np.ndarray) -> np.ndarray:
    """(N, len(PARAMS)) smooth random wandering of the angles, 0.05-0.5 Hz."""
    out = np.zeros((len(t), len(PARAMS)))
    for name, amp in _SWAY.items():
        f = rng.uniform(0.05, 0.5, 3)
        phase = rng.uniform(0, 2 * np.pi, 3)
        out[:, P[name]] = amp / 1.7 * np.sin(2 * np.pi * f * t[:, None] + phase).sum(axis=1)
    return out


def _gait(q: np.ndarray, t: np.ndarray, tl: Timeline, body: Body) -> np.ndarray:
    """`q` with the walking (or crawling) cycle on top where the body moves with `gait` on: legs
    and arms swing in opposition at a cadence that grows with speed."""
    fine = np.arange(0.0, max(t[-1], tl.t) + 0.1, 0.02)
    pos = _keyed(tl, fine)[0][:, [P["fwd"], P["left"]]]
    speed = np.r_[0.0, np.linalg.norm(np.diff(pos, axis=0), axis=1) / 0.02]
    cadence = 0.9 * np.sqrt(speed / 1.2) * np.sqrt(1.75 / body.height_m)  # strides per second
    phi = np.interp(t, fine, np.cumsum(2 * np.pi * cadence * 0.02))
    amp = q[:, P["gait"]] * np.clip(np.interp(t, fine, speed) / 0.4, 0.0, 1.0)
    s = np.sin(phi)
    out = q.copy()
    for side, sign in (("l", 1.0), ("r", -1.0)):
        out[:, P[f"hip_flex_{side}"]] += amp * 22 * sign * s
        out[:, P[f"knee_{side}"]] += amp * (8 + 40 * np.maximum(0.0, np.sin(phi + sign * 0.8)) ** 2
                                            * (sign * s > -0.2))  # fmt: skip
        out[:, P[f"sh_flex_{side}"]] -= amp * 18 * sign * s
        out[:, P[f"elbow_{side}"]] += amp * 12
    out[:, P["pitch"]] += amp * 3
    out[:, P["spine_twist"]] += amp * 6 * s
    return out


def _render(
    tl: Timeline, body: Body, t: np.ndarray, heading: float, rng: np.random.Generator
) -> np.ndarray:
    """(N, 18, 3) world points of the timeline at times `t` (keypoints and the head's centre)."""
    q, i, j, u, _ = _keyed(tl, t)
    q = _gait(q, t, tl, body)
    q = q + _sway(rng, t) * q[:, P["sway"], None]
    pts = points(body, q)
    # The pelvis rests on the floor or the seat, though never above where the segment's two key
    # poses rest it (a limb swinging through the floor for a moment rather than the body pushed
    # up on it); in a descent it falls from where it rested to where it will rest, accelerating,
    # and the floor (not the chair it left) stops it; after an impact it bounces.
    keys = np.stack([k.pose for k in tl.keys])
    key_z = ground_z(body, points(body, keys), keys[:, P["seat"]])
    ceiling = np.maximum(key_z[i], key_z[j]) + 0.1
    z = np.minimum(ground_z(body, pts, q[:, P["seat"]]), ceiling)
    power = np.array([k.power for k in tl.keys])[j]
    free = np.array([k.ease == FALL for k in tl.keys])[j] & (j > i)
    dropped = key_z[i] - (key_z[i] - key_z[j]) * u**power
    floor = np.minimum(ground_z(body, pts), ceiling)
    z = np.where(free, np.maximum(dropped, floor), z)
    bounce = np.array([k.bounce for k in tl.keys])[j] * (j > i)
    z = z + bounce * np.sin(np.pi * np.minimum(2 * u, 1.0))
    root = np.stack([q[:, P["fwd"]], q[:, P["left"]], z], axis=1)
    world = pts + root[:, None, :]
    a = np.radians(heading)
    rot = np.array([[np.cos(a), -np.sin(a), 0.0], [np.sin(a), np.cos(a), 0.0], [0.0, 0.0, 1.0]])
    return world @ rot.T


def _geometry(joints: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pelvis height, nose height and the trunk's tilt from vertical (degrees) per tick."""
    pelvis = joints[:, [11, 12]].mean(axis=1)
    neck = joints[:, [5, 6]].mean(axis=1)
    axis = neck - pelvis
    tilt = np.degrees(np.arctan2(np.linalg.norm(axis[:, :2], axis=1), axis[:, 2]))
    return pelvis[:, 2], joints[:, 0, 2], tilt


def _phases(
    joints: np.ndarray, body: Body, t: np.ndarray, descent: tuple[float, float] | None
) -> np.ndarray:
    """A phase per tick: a fall's by its descent (UP before, FALLING in it, DOWN after until the
    body is upright again), daily life's by the geometry (LOW when low, else UP)."""
    stand_pts = points(body, pose(sway=0.0))
    stand_z = ground_z(body, stand_pts)[0]
    stand_pelvis, stand_nose = stand_z, stand_z + stand_pts[0, 0, 2]
    pelvis, nose, tilt = _geometry(joints)
    if descent is None:
        kneeling = joints[:, [13, 14], 2].min(axis=1) < 0.12 * body.height_m
        low = (pelvis < 0.5 * stand_pelvis) | (nose < 0.55 * stand_nose) | (tilt > 55) | kneeling
        return np.where(_bridged(low, round(_BRIDGE_S * len(t) / max(t[-1], 1e-9))), LOW, UP
                        ).astype(np.int8)  # fmt: skip
    start, end = descent
    phase = np.full(len(t), UP, np.int8)
    phase[(t >= start) & (t < end)] = FALLING
    after = t >= end
    phase[after] = DOWN
    upright = (pelvis > 0.75 * stand_pelvis) & (nose > 0.75 * stand_nose) & (tilt < 35)
    up_again = np.flatnonzero(after & upright)
    if len(up_again):
        phase[up_again[0] :] = UP
    return phase


_BRIDGE_S = 1.0  # a moment of "upright" inside a deliberate way down (kneeling up) stays LOW


def _bridged(low: np.ndarray, ticks: int) -> np.ndarray:
    """`low` with runs of False shorter than `ticks` between two True runs set True."""
    out = low.copy()
    idx = np.flatnonzero(low)
    for a, b in itertools.pairwise(idx):
        if 1 < b - a <= ticks:
            out[a:b] = True
    return out


def _facing(joints: np.ndarray, t: np.ndarray, rest_t: float | None) -> float:
    """Where the long axis points (pelvis to head) when lying at `rest_t`, else the heading."""
    k = len(t) - 1 if rest_t is None else int(np.argmin(np.abs(t - rest_t)))
    _, _, tilt = _geometry(joints[k : k + 1])
    if tilt[0] > 45:
        d = joints[k, HEAD, :2] - joints[k, [11, 12]].mean(axis=0)[:2]
    else:
        left = joints[k, 11, :2] - joints[k, 12, :2]
        d = np.array([left[1], -left[0]])
    return float(np.degrees(np.arctan2(d[1], d[0])) % 360)
