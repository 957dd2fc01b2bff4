"""A kinematic human body for generated motion: proportions, pose parameters, forward kinematics.

A pose is one vector of `PARAMS`: the pelvis's orientation (yaw, pitch, roll), joint angles of
the spine, neck and each limb (degrees), the pelvis's place on the floor (`fwd`, `left`, metres
in the motion's own heading frame), the height of what the pelvis rests on (`seat`), how much the
walking cycle and the idle sway show (`gait`, `sway`). `points` turns poses into the 17 COCO
keypoints (plus the head's centre) around the pelvis, `ground_z` finds the pelvis height at which
the body rests on the floor or its seat. Segment lengths are fractions of the body's height
(Winter's anthropometric table for adults, a larger head and shorter legs for small children), so
bones keep their length whatever the angles.

Frames: world x, y on the floor, z up. The body's own frame: x forward, y to its left, z up.
Pitch leans the body forward (+90: lying face down), roll to its right (+90: lying on its right
side), a limb's flexion swings it forward (arms, thighs) or, for knees, backward.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PARAMS = (
    "yaw", "pitch", "roll", "spine_flex", "spine_side", "spine_twist", "neck_flex", "neck_yaw",
    "sh_flex_l", "sh_flex_r", "sh_abd_l", "sh_abd_r", "elbow_l", "elbow_r",
    "hip_flex_l", "hip_flex_r", "hip_abd_l", "hip_abd_r", "knee_l", "knee_r",
    "fwd", "left", "seat", "gait", "sway",
)  # fmt: skip
P = {name: i for i, name in enumerate(PARAMS)}
ANGLES = slice(0, P["fwd"])
_BOTH = ("sh_flex", "sh_abd", "elbow", "hip_flex", "hip_abd", "knee")
_DEFAULT = {"sh_abd": 8.0, "elbow": 12.0, "knee": 3.0, "hip_flex": 2.0, "sway": 1.0}

HEAD = 17  # index of the head's centre after the 17 keypoints in `points`' output
# How far each point's centre sits above what it rests on, as a fraction of height (the flesh
# around it): nose, eyes, ears, shoulders, elbows, wrists, hips, knees, ankles, head centre.
_RADIUS = np.array(
    [0.012, 0.015, 0.015, 0.02, 0.02, 0.035, 0.035, 0.03, 0.03, 0.02, 0.02,
     0.06, 0.06, 0.035, 0.035, 0.039, 0.039, 0.06]
)  # fmt: skip
# Points a seat or bed carries (the trunk and head); limbs rest on the floor.
_ON_SEAT = np.zeros(18, bool)
_ON_SEAT[[0, 1, 2, 3, 4, 5, 6, 11, 12, HEAD]] = True


def pose(**angles: float) -> np.ndarray:
    """A pose vector: the standing defaults with `angles` set; a name without `_l`/`_r` among
    sh_flex, sh_abd, elbow, hip_flex, hip_abd, knee sets both sides."""
    v = np.zeros(len(PARAMS))
    for name, value in {**_DEFAULT, **angles}.items():
        if name in _BOTH:
            v[P[name + "_l"]] = v[P[name + "_r"]] = value
        else:
            v[P[name]] = value
    for name, value in angles.items():  # a side named explicitly wins over both
        if name.endswith(("_l", "_r")):
            v[P[name]] = value
    return v


@dataclass(frozen=True)
class Body:
    """One person's size and proportions (metres) and how they move: `stoop_deg` bends an
    elderly spine forward, `tempo` stretches deliberate movements (1 = an adult's pace)."""

    height_m: float
    trunk: float  # hip joints' midpoint to shoulders' midpoint
    neck: float  # shoulders' midpoint to the head's centre
    head_r: float
    shoulder_w: float
    hip_w: float
    upper_arm: float
    forearm: float
    thigh: float
    shank: float
    ankle_h: float
    stoop_deg: float = 0.0
    tempo: float = 1.0
    kind: str = "adult"

    @classmethod
    def of(
        cls,
        height_m: float,
        rng: np.random.Generator | None = None,
        stoop_deg: float = 0.0,
        tempo: float = 1.0,
        kind: str = "adult",
    ) -> Body:
        """A body of `height_m` from anthropometric ratios (adult to a small child's by height),
        each varied by a few per cent with `rng`."""
        c = float(np.clip((1.45 - height_m) / 0.45, 0.0, 1.0))  # 0 adult ... 1 a 1-m child

        def ratio(adult: float, child: float) -> float:
            r = adult + c * (child - adult)
            return r * (1.0 if rng is None else float(np.clip(rng.normal(1, 0.03), 0.92, 1.08)))

        hip, knee = ratio(0.52, 0.45), ratio(0.285, 0.24)
        ankle = 0.039
        shoulder = ratio(0.818, 0.76)
        return cls(
            height_m=height_m,
            trunk=(shoulder - hip) * height_m,
            neck=ratio(0.117, 0.14) * height_m,
            head_r=ratio(0.06, 0.085) * height_m,
            shoulder_w=ratio(0.245, 0.26) * height_m,
            hip_w=ratio(0.15, 0.16) * height_m,
            upper_arm=ratio(0.186, 0.17) * height_m,
            forearm=ratio(0.146, 0.13) * height_m,
            thigh=max(hip - knee, 0.15) * height_m,
            shank=(knee - ankle) * height_m,
            ankle_h=ankle * height_m,
            stoop_deg=stoop_deg,
            tempo=tempo,
            kind=kind,
        )


def random_body(rng: np.random.Generator) -> Body:
    """A random person: a child (15 %), an elderly, stooped and slower adult (25 %) or an adult."""
    u = rng.random()
    if u < 0.15:
        return Body.of(rng.uniform(1.0, 1.45), rng, tempo=rng.uniform(0.8, 1.1), kind="child")
    if u < 0.40:
        return Body.of(rng.uniform(1.5, 1.8), rng, stoop_deg=rng.uniform(5, 30),
                       tempo=rng.uniform(1.2, 1.7), kind="elderly")  # fmt: skip
    h = float(np.clip(rng.normal(1.72, 0.09), 1.5, 1.95))
    return Body.of(h, rng, tempo=rng.uniform(0.85, 1.15))


def _rot(axis: int, deg: np.ndarray) -> np.ndarray:
    """(N, 3, 3) rotations by `deg` about the x (0), y (1) or z (2) axis."""
    a = np.radians(deg)
    c, s = np.cos(a), np.sin(a)
    m = np.zeros((*a.shape, 3, 3))
    i, j = [(1, 2), (0, 2), (0, 1)][axis]
    m[..., axis, axis] = 1.0
    m[..., i, i] = c
    m[..., j, j] = c
    sign = -1.0 if axis == 1 else 1.0  # about y, z turns toward +x
    m[..., i, j] = -s * sign
    m[..., j, i] = s * sign
    return m


def _apply(r: np.ndarray, v: np.ndarray | tuple[float, float, float]) -> np.ndarray:
    """(N, 3): each rotation of `r` (N, 3, 3) applied to `v` (3,) or (N, 3)."""
    v = np.asarray(v, float)
    return np.einsum("nij,nj->ni", r, np.broadcast_to(v, (r.shape[0], 3)))


def _limb(
    frame: np.ndarray, flex: np.ndarray, abd: np.ndarray, bend: np.ndarray, side: float
) -> tuple[np.ndarray, np.ndarray]:
    """Unit directions (N, 3) of a limb's upper and lower segment hanging from `frame`: flexion
    swings it forward, abduction out to its `side` (+1 left), `bend` folds the lower segment
    (positive forward: elbows; knees pass it negative)."""
    upper = frame @ _rot(0, side * abd) @ _rot(1, -flex)
    return _apply(upper, (0, 0, -1)), _apply(upper @ _rot(1, -bend), (0, 0, -1))


def points(body: Body, poses: np.ndarray) -> np.ndarray:
    """(N, 18, 3): the 17 COCO keypoints and the head's centre of each pose (N, len(PARAMS)),
    relative to the pelvis (the hip joints' midpoint), turned by the pose's yaw."""
    q = np.atleast_2d(poses)
    n = q.shape[0]

    def a(name: str) -> np.ndarray:
        return q[:, P[name]]

    root = _rot(2, a("yaw")) @ _rot(1, a("pitch")) @ _rot(0, a("roll"))
    flex = a("spine_flex") + body.stoop_deg
    half = _rot(2, a("spine_twist") / 2) @ _rot(1, flex / 2) @ _rot(0, a("spine_side") / 2)
    mid_frame = root @ half
    chest = mid_frame @ half
    out = np.zeros((n, 18, 3))
    mid = _apply(mid_frame, (0, 0, body.trunk / 2))
    neck = mid + _apply(chest, (0, 0, body.trunk / 2))
    # an elderly stoop keeps the eyes forward: the neck extends against the spine's bend
    head = chest @ _rot(2, a("neck_yaw")) @ _rot(1, a("neck_flex") - 0.6 * body.stoop_deg)
    centre = neck + _apply(head, (0, 0, body.neck))
    r = body.head_r
    out[:, HEAD] = centre
    out[:, 0] = centre + _apply(head, (1.0 * r, 0, -0.25 * r))
    for side, eye, ear in ((1.0, 1, 3), (-1.0, 2, 4)):
        out[:, eye] = centre + _apply(head, (0.85 * r, side * 0.33 * r, 0.1 * r))
        out[:, ear] = centre + _apply(head, (-0.05 * r, side * 0.73 * r, 0.0))
    for side, s in ((1.0, "l"), (-1.0, "r")):
        k = 0 if s == "l" else 1
        sh = neck + _apply(chest, (0, side * body.shoulder_w / 2, 0))
        up, low = _limb(chest, a(f"sh_flex_{s}"), a(f"sh_abd_{s}"), a(f"elbow_{s}"), side)
        out[:, 5 + k] = sh
        out[:, 7 + k] = sh + up * body.upper_arm
        out[:, 9 + k] = out[:, 7 + k] + low * body.forearm
        hip = _apply(root, (0, side * body.hip_w / 2, 0))
        up, low = _limb(root, a(f"hip_flex_{s}"), a(f"hip_abd_{s}"), -a(f"knee_{s}"), side)
        out[:, 11 + k] = hip
        out[:, 13 + k] = hip + up * body.thigh
        out[:, 15 + k] = out[:, 13 + k] + low * body.shank
    return out


def ground_z(body: Body, pts: np.ndarray, seat: np.ndarray | float = 0.0) -> np.ndarray:
    """(N,) pelvis height at which every point of `pts` (N, 18, 3, from `points`) is at least its
    flesh above what carries it: the trunk and head on a seat of height `seat`, the limbs on the
    floor. The lowest such height: the body rests, it does not float."""
    seat = np.broadcast_to(np.asarray(seat, float), pts.shape[:1])
    surface = np.where(_ON_SEAT[None, :], seat[:, None], 0.0)
    need = surface + _RADIUS[None, :] * body.height_m - pts[..., 2]
    return need.max(axis=1)
