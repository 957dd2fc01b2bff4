"""The fall scripts: how someone gets to the floor, from where, and what they do there.

Each script is `(rng, body, duration_s) -> Timeline`: an activity before (standing, walking,
turning, sitting on a chair, a bed's edge or a stool) until the descent starts at a random
moment (1 s to duration - 3 s), the descent (`Timeline.fall`, 0.4-1.2 s in all, several stages
for a trip, a slip, a faint or knees first), the impact's bounce (`Timeline.settle`), then
`after_fall`. The style (`FALL_STYLES`) is the fall's family: where the body goes and how.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from edge_hf.training.body import Body, P, pose
from edge_hf.training.motion_keys import (
    Key,
    Timeline,
    _side,
    after_fall,
    fidget,
    lie_back,
    lie_front,
    lie_side,
    lying,
    sit_chair,
    sit_slumped,
    stand,
)

Script = Callable[[np.random.Generator, Body, float], Timeline]
CHAIR, BED, STOOL = (0.42, 0.5), (0.45, 0.6), (0.6, 0.75)  # seat heights (m)
FALL_STYLES = ("forward", "backward", "sideways", "twisting", "slump", "knees_first", "hands_first")


def event_time(rng: np.random.Generator, duration_s: float) -> float:
    """When the descent starts: anywhere from 1 s to 3 s before the end (shorter clips: the
    middle third)."""
    lo, hi = 1.0, duration_s - 3.0
    if hi <= lo:
        lo, hi = duration_s / 3, duration_s / 2
    return float(rng.uniform(lo, hi))


# Before the fall: each fills the timeline up to `until` exactly (the descent's start).
def _standing(tl: Timeline, until: float) -> None:
    rng = tl.rng
    while until - tl.t > 1.2:
        d = float(rng.uniform(0.8, min(2.5, until - tl.t)))
        if rng.random() < 0.5:
            tl.go(d, fidget(rng, stand(), 12), paced=False)
        else:
            tl.hold(d)
    tl.hold(until - tl.t)


def _walking(tl: Timeline, until: float) -> None:
    speed = float(tl.rng.uniform(0.5, 1.4)) / tl.body.tempo
    tl.walk(until, speed, float(tl.rng.uniform(-40, 40)))


def _turning(tl: Timeline, until: float) -> None:
    rng = tl.rng
    turn_s = float(rng.uniform(0.8, 1.6))
    speed = float(rng.uniform(0.4, 1.0)) / tl.body.tempo
    if until - turn_s > 0:
        tl.walk(until - turn_s, speed)
    target = stand()
    target[P["gait"]] = 0.5  # stepping round
    tl.go(until - tl.t, target, (0.2, 0.0), _side(rng) * rng.uniform(90, 180), paced=False)


def _seated(seat: tuple[float, float]) -> Callable[[Timeline, float], None]:
    def before(tl: Timeline, until: float) -> None:
        tl.keys[0] = Key(0.0, sit_chair(float(tl.rng.uniform(*seat))))
        while until - tl.t > 1.5:
            tl.go(float(tl.rng.uniform(0.8, 1.5)), fidget(tl.rng, tl.now, 10), paced=False)
        tl.hold(until - tl.t)

    return before


def _rising(seat: tuple[float, float]) -> Callable[[Timeline, float], None]:
    """Seated, then starting to stand up (or reaching forward) just before the fall."""

    def before(tl: Timeline, until: float) -> None:
        _seated(seat)(tl, until - 0.6)
        lean = pose(hip_flex=55, knee=60, spine_flex=35, sh_flex=40, elbow=20)
        tl.go(0.6, lean, (0.1, 0.0), paced=False)

    return before


def _sitting_down(tl: Timeline, until: float) -> None:
    """Standing, then lowering towards a chair that is not there."""
    _standing(tl, until - 0.6)
    tl.go(0.6, pose(hip_flex=40, knee=45, spine_flex=15, sh_flex=30), paced=False)


# The descents: each moves the timeline to the impact and the rest pose, returns the rest pose.
def _forward(tl: Timeline, trip: bool) -> np.ndarray:
    rng, h = tl.rng, tl.body.height_m
    if trip:  # the foot caught: a lurch forward, one knee up, arms out
        tl.fall(rng.uniform(0.15, 0.25), pose(pitch=25, sh_flex=60, elbow=20, hip_flex_l=40,
                knee_l=50), (0.3, 0.0))  # fmt: skip
    rest = lie_front(rng) if rng.random() < 0.8 else lie_side(rng, _side(rng))
    tl.fall(rng.uniform(0.45, 0.85), rest, (rng.uniform(0.3, 0.5) * h, rng.uniform(-0.1, 0.1) * h))
    return rest


def _hands_first(tl: Timeline, trip: bool) -> np.ndarray:
    rng, h = tl.rng, tl.body.height_m
    if trip:
        tl.fall(rng.uniform(0.15, 0.25), pose(pitch=25, sh_flex=70, elbow=10), (0.3, 0.0))
    hands = pose(pitch=80, sh_flex=rng.uniform(110, 150), elbow=rng.uniform(10, 40), knee=20)
    tl.fall(rng.uniform(0.35, 0.6), hands, (rng.uniform(0.25, 0.4) * h, 0.0))
    rest = lie_front(rng)  # the arms give: down onto the chest, arms ahead
    rest[[P["sh_flex_l"], P["sh_flex_r"]]] = rng.uniform(175, 190)
    rest[[P["elbow_l"], P["elbow_r"]]] = rng.uniform(0, 15)
    tl.fall(rng.uniform(0.15, 0.3), rest, (0.05 * h, 0.0))
    return rest


def _backward(tl: Timeline, slip: bool) -> np.ndarray:
    rng, h = tl.rng, tl.body.height_m
    if slip:  # the feet go forward, arms fly up
        tl.fall(rng.uniform(0.15, 0.25), pose(pitch=-20, hip_flex_l=45, knee=10, sh_abd=60,
                sh_flex=40), (0.1, 0.0))  # fmt: skip
    rest = lie_back(rng)
    if rng.random() < 0.5:  # onto the buttocks first, then the back
        tl.fall(rng.uniform(0.3, 0.5), pose(pitch=-20, hip_flex=80, knee=50, spine_flex=20,
                sh_flex=40, sh_abd=30), (-0.2 * h, 0.0))  # fmt: skip
        tl.fall(rng.uniform(0.2, 0.35), rest, (-0.1 * h, 0.0))
    else:
        tl.fall(rng.uniform(0.5, 0.85), rest, (-rng.uniform(0.3, 0.45) * h, 0.0))
    return rest


def _sideways(tl: Timeline) -> np.ndarray:
    rng, h = tl.rng, tl.body.height_m
    side = _side(rng)
    rest = lie_side(rng, side)
    if rng.random() < 0.4:  # the knees give first
        tl.fall(rng.uniform(0.2, 0.35), pose(hip_flex=30, knee=50, spine_side=-15 * side,
                sh_abd=40), (0.0, side * 0.05 * h))  # fmt: skip
    move = (rng.uniform(-0.1, 0.1) * h, side * rng.uniform(0.3, 0.45) * h)
    tl.fall(rng.uniform(0.4, 0.8), rest, move)
    return rest


def _twisting(tl: Timeline) -> np.ndarray:
    rng, h = tl.rng, tl.body.height_m
    rest = lying(rng)
    a = rng.uniform(0, 2 * np.pi)
    move = (np.cos(a) * 0.35 * h, np.sin(a) * 0.35 * h)
    tl.fall(rng.uniform(0.6, 1.1), rest, move, _side(rng) * rng.uniform(60, 180))
    return rest


def _slump(tl: Timeline) -> np.ndarray:
    """Fainting: the knees buckle, the body folds down, then tips over or stays slumped."""
    rng, h = tl.rng, tl.body.height_m
    tl.fall(rng.uniform(0.35, 0.6), pose(hip_flex=70, knee=110, spine_flex=30, neck_flex=40,
            sh_abd=15, elbow=5), (-0.05 * h, 0.0))  # fmt: skip
    u = rng.random()
    rest = sit_slumped(rng) if u < 0.35 else lie_side(rng, _side(rng)) if u < 0.7 else lie_back(rng)
    tl.fall(rng.uniform(0.3, 0.5), rest, (-0.1 * h, 0.0))
    return rest


def _knees_first(tl: Timeline) -> np.ndarray:
    rng, h = tl.rng, tl.body.height_m
    tl.fall(rng.uniform(0.3, 0.5), pose(hip_flex=10, knee=95, spine_flex=15, sh_flex=45, elbow=15),
            (0.1 * h, 0.0))  # fmt: skip
    rest = lie_front(rng) if rng.random() < 0.7 else lie_side(rng, _side(rng))
    tl.fall(rng.uniform(0.3, 0.6), rest, (0.3 * h, 0.0))
    return rest


def _slide_off(tl: Timeline) -> np.ndarray:
    """Sliding forward off a chair onto the floor."""
    rng, h = tl.rng, tl.body.height_m
    rest = sit_slumped(rng) if rng.random() < 0.6 else lie_back(rng)
    tl.fall(rng.uniform(0.5, 1.0), rest, (rng.uniform(0.2, 0.35) * h, 0.0))
    return rest


def _off_the_side(tl: Timeline) -> np.ndarray:
    """From a bed's edge (sitting) off sideways onto the floor."""
    rng, h = tl.rng, tl.body.height_m
    side = _side(rng)
    rest = lie_side(rng, side)
    tl.fall(rng.uniform(0.5, 0.9), rest, (0.15 * h, side * rng.uniform(0.3, 0.45) * h))
    return rest


def _fall(
    before: Callable[[Timeline, float], None], descent: Callable[[Timeline], np.ndarray]
) -> Script:
    def script(rng: np.random.Generator, body: Body, duration_s: float) -> Timeline:
        start = pose(gait=1.0) if before in (_walking, _turning) else stand()
        tl = Timeline(body, rng, start)
        before(tl, event_time(rng, duration_s))
        rest = descent(tl)
        tl.settle(rest)
        after_fall(tl, rest, duration_s)
        return tl

    return script


# kind: (style, script)
FALL_KINDS: dict[str, tuple[str, Script]] = {
    "fall_forward_from_standing": ("forward", _fall(_standing, lambda tl: _forward(tl, False))),
    "fall_forward_trip_walking": ("forward", _fall(_walking, lambda tl: _forward(tl, True))),
    "fall_forward_from_chair": ("forward", _fall(_rising(CHAIR), lambda tl: _forward(tl, False))),
    "fall_hands_first_from_walking": (
        "hands_first",
        _fall(_walking, lambda tl: _hands_first(tl, True)),
    ),
    "fall_hands_first_from_stool": (
        "hands_first",
        _fall(_rising(STOOL), lambda tl: _hands_first(tl, False)),
    ),
    "fall_backward_from_standing": ("backward", _fall(_standing, lambda tl: _backward(tl, False))),
    "fall_backward_slip_walking": ("backward", _fall(_walking, lambda tl: _backward(tl, True))),
    "fall_backward_missing_chair": (
        "backward",
        _fall(_sitting_down, lambda tl: _backward(tl, False)),
    ),
    "fall_sideways_from_standing": ("sideways", _fall(_standing, _sideways)),
    "fall_sideways_from_turning": ("sideways", _fall(_turning, _sideways)),
    "fall_sideways_from_bed_edge": ("sideways", _fall(_seated(BED), _off_the_side)),
    "fall_twisting_from_turning": ("twisting", _fall(_turning, _twisting)),
    "fall_twisting_from_walking": ("twisting", _fall(_walking, _twisting)),
    "fall_slump_faint_standing": ("slump", _fall(_standing, _slump)),
    "fall_slump_from_chair": ("slump", _fall(_seated(CHAIR), _slide_off)),
    "fall_knees_first_from_standing": ("knees_first", _fall(_standing, _knees_first)),
    "fall_knees_first_from_walking": ("knees_first", _fall(_walking, _knees_first)),
}
