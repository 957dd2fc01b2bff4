"""The daily-life scripts: ordinary activity, and what looks like a fall but is done on purpose.

Each is `(rng, body, duration_s) -> Timeline` like the fall scripts (`motion_falls`): the
activity's key moment (lying down, sitting down, squatting...) starts at a random time, every
movement is deliberate (minimum jerk, paced by the body's tempo), and there is never a
`Timeline.fall`. Lying down on a floor, bed (a raised surface ~0.5 m) or sofa takes 2-6 s; the
quick variants (`lie_down_floor_quickly`, `sit_on_chair_quickly`) are the hard negatives.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from edge_hf.training.body import Body, P, pose
from edge_hf.training.motion_keys import (
    FALL,
    Key,
    Timeline,
    _side,
    all_fours,
    bend,
    fidget,
    get_up,
    half_kneel,
    is_on_back,
    is_on_front,
    kneel_sit,
    kneel_up,
    knees_up,
    lie_back,
    lie_front,
    lie_side,
    lying,
    plank,
    pushup_down,
    sit_chair,
    sit_floor,
    squat,
    stand,
)

Script = Callable[[np.random.Generator, Body, float], Timeline]


def _start(rng: np.random.Generator, duration_s: float, needs: float) -> float:
    """When the activity's key moment starts: leaving `needs` seconds for it where possible."""
    return float(rng.uniform(0.5, max(0.6, duration_s - needs)))


def _idle(tl: Timeline, until: float, by: float = 12.0, legs: bool = True) -> None:
    """Small movements in the current pose until `until` (gestures, looking round)."""
    rng = tl.rng
    base = tl.now.copy()
    while until - tl.t > 1.0:
        d = float(rng.uniform(0.8, min(2.5, until - tl.t)))
        if rng.random() < 0.5:
            tl.go(d, fidget(rng, base, by, legs), paced=False)
        else:
            tl.hold(d)
    if until > tl.t:
        tl.hold(until - tl.t)


def _speed(tl: Timeline, lo: float = 0.5, hi: float = 1.4) -> float:
    return float(tl.rng.uniform(lo, hi)) / tl.body.tempo


def _arrive(tl: Timeline, until: float) -> None:
    """Walk or stand until `until`, standing still at the end."""
    if tl.rng.random() < 0.5 and until > 1.5:
        tl.keys[0] = Key(0.0, pose(gait=1.0))
        tl.walk(until - 0.5, _speed(tl)).stop()
    else:
        _idle(tl, until)


def walk(rng: np.random.Generator, body: Body, d: float) -> Timeline:
    tl = Timeline(body, rng, pose(gait=1.0))
    speed = _speed(tl)
    while tl.t < d:
        turn = float(rng.uniform(-60, 60)) if rng.random() < 0.5 else 0.0
        tl.walk(float(rng.uniform(1.5, 3.0)), speed, turn)
    return tl


def stand_idle(rng: np.random.Generator, body: Body, d: float) -> Timeline:
    tl = Timeline(body, rng, stand())
    gestures = [pose(sh_flex=40, elbow=130), pose(sh_abd=40, elbow=100),
                pose(sh_flex_r=60, elbow_r=120), pose(neck_yaw=60),
                pose(spine_twist=30)]  # fmt: skip
    while tl.t < d:
        tl.go(float(rng.uniform(0.6, 1.5)), gestures[rng.integers(len(gestures))])
        tl.hold(float(rng.uniform(0.5, 2.0)))
        tl.go(float(rng.uniform(0.6, 1.5)), stand())
    return tl


def turn_around(rng: np.random.Generator, body: Body, d: float) -> Timeline:
    tl = Timeline(body, rng, stand())
    _arrive(tl, _start(rng, d, 3.0))
    target = stand()
    target[P["gait"]] = 0.5
    tl.go(float(rng.uniform(0.8, 1.8)), target, (0.2, 0.0), _side(rng) * rng.uniform(90, 180))
    _walk_or_stand(tl, d)
    return tl


def _walk_or_stand(tl: Timeline, d: float) -> None:
    """Walk off, or stand about, to the end."""
    if tl.rng.random() < 0.5:
        tl.walk(d - tl.t + 0.5, _speed(tl))
    else:
        _idle(tl, d + 0.5)


def sit_on_chair(rng: np.random.Generator, body: Body, d: float, quick: bool = False) -> Timeline:
    tl = Timeline(body, rng, stand())
    _arrive(tl, _start(rng, d, 4.0))
    tl.go(float(rng.uniform(0.6, 1.0)), stand(), turn=_side(rng) * rng.uniform(120, 180))
    seat = sit_chair(float(rng.uniform(0.4, 0.5)))
    if quick:  # dropping onto the seat: as fast as a fall, but onto a chair
        tl.go(float(rng.uniform(0.5, 0.9)), seat, (-0.1, 0.0), ease=FALL, paced=False)
    else:
        tl.go(float(rng.uniform(1.2, 2.5)), seat, (-0.1, 0.0))
    _idle(tl, d - 2.5 if rng.random() < 0.3 else d + 0.5, 8.0)
    if tl.t < d:  # and up again
        tl.go(float(rng.uniform(1.0, 2.0)), stand(), (0.15, 0.0))
        _idle(tl, d + 0.5)
    return tl


def stand_up_from_chair(rng: np.random.Generator, body: Body, d: float) -> Timeline:
    tl = Timeline(body, rng, sit_chair(float(rng.uniform(0.4, 0.5))))
    _idle(tl, _start(rng, d, 3.0), 8.0)
    tl.go(float(rng.uniform(1.0, 2.0)), stand(), (0.15, 0.0))
    _walk_or_stand(tl, d)
    return tl


def lie_down_floor(rng: np.random.Generator, body: Body, d: float, quick: bool = False) -> Timeline:
    """Onto the floor by the knees and hands, or by squatting and sitting: 3-6 s slowly,
    1.2-2.2 s quickly."""
    tl = Timeline(body, rng, stand())
    _arrive(tl, _start(rng, d, 4.0 if quick else 6.0))
    k = 0.3 if quick else 1.0
    paced = not quick
    rest = lying(rng)
    # face down by the knees and hands; on the back by a squat and sitting; on the side either
    # way (no limb swings through the floor)
    if is_on_front(rest) or (not is_on_back(rest) and rng.random() < 0.5):
        tl.go(rng.uniform(1.2, 2.0) * k, kneel_up(), paced=paced)
        tl.go(rng.uniform(0.8, 1.5) * k, all_fours() if is_on_front(rest) else kneel_sit(),
              paced=paced)  # fmt: skip
    else:
        tl.go(rng.uniform(1.2, 2.0) * k, squat(), paced=paced)
        tl.go(rng.uniform(1.0, 1.8) * k, sit_floor(rng, False), (-0.1, 0.0), paced=paced)
    tl.go(rng.uniform(1.2, 2.5) * (0.5 if quick else 1.0), rest, (-0.2, 0.0), paced=paced)
    tl.rest_t = tl.t
    _idle(tl, d + 0.5, 10.0)
    return tl


def lie_down_raised(rng: np.random.Generator, body: Body, d: float, sofa: bool) -> Timeline:
    """Sit on a bed's or sofa's edge, then swing the legs up and lie along it."""
    tl = Timeline(body, rng, stand())
    h = float(rng.uniform(0.38, 0.48) if sofa else rng.uniform(0.45, 0.6))
    _arrive(tl, _start(rng, d, 6.0))
    tl.go(float(rng.uniform(0.6, 1.0)), stand(), turn=_side(rng) * rng.uniform(120, 180))
    tl.go(float(rng.uniform(1.0, 2.0)), sit_chair(h), (-0.1, 0.0))
    tl.hold(float(rng.uniform(0.3, 1.5)))
    rest = lie_back(rng) if rng.random() < 0.6 else lie_side(rng, _side(rng))
    rest[P["seat"]] = h
    if sofa:
        rest[[P["hip_flex_l"], P["hip_flex_r"]]] = rng.uniform(30, 60)
        rest[[P["knee_l"], P["knee_r"]]] = rng.uniform(60, 100)
    tl.go(float(rng.uniform(1.5, 3.0)), rest, (-0.1, 0.0), _side(rng) * 90)
    tl.rest_t = tl.t
    _idle(tl, d + 0.5, 10.0)
    return tl


def sit_on_floor(rng: np.random.Generator, body: Body, d: float) -> Timeline:
    tl = Timeline(body, rng, stand())
    _arrive(tl, _start(rng, d, 4.0))
    tl.go(float(rng.uniform(0.8, 1.5)), squat() if rng.random() < 0.5 else kneel_up())
    tl.go(float(rng.uniform(1.0, 2.0)), sit_floor(rng), (-0.1, 0.0))
    _idle(tl, d + 0.5, 12.0)
    return tl


def get_up_from_floor(rng: np.random.Generator, body: Body, d: float) -> Timeline:
    rest = sit_floor(rng, False) if rng.random() < 0.4 else lying(rng)
    tl = Timeline(body, rng, rest)
    _idle(tl, _start(rng, d, 5.0), 10.0)
    get_up(tl, rest)
    _idle(tl, d + 0.5)
    return tl


def _down_and_up(
    down: Callable[[np.random.Generator], np.ndarray], stay: tuple[float, float]
) -> Script:
    """Stand, go down to a pose, stay a while (working with the hands), stand up again."""

    def script(rng: np.random.Generator, body: Body, d: float) -> Timeline:
        tl = Timeline(body, rng, stand())
        _arrive(tl, _start(rng, d, 3.0 + stay[0]))
        tl.go(float(rng.uniform(0.7, 1.5)), down(rng))
        _idle(tl, tl.t + float(rng.uniform(*stay)), 15.0, legs=False)
        tl.go(float(rng.uniform(0.7, 1.5)), stand())
        _idle(tl, d + 0.5)
        return tl

    return script


def kneel(rng: np.random.Generator, body: Body, d: float) -> Timeline:
    tl = Timeline(body, rng, stand())
    _arrive(tl, _start(rng, d, 4.0))
    tl.go(float(rng.uniform(1.0, 1.8)), kneel_up())
    if rng.random() < 0.5:
        tl.go(float(rng.uniform(0.6, 1.2)), kneel_sit())
    work = tl.now.copy()
    work[[P["sh_flex_l"], P["sh_flex_r"]]] = 70
    tl.go(0.8, work)
    _idle(tl, d + 0.5, 15.0, legs=False)
    return tl


def crawl(rng: np.random.Generator, body: Body, d: float) -> Timeline:
    start_low = rng.random() < 0.5
    tl = Timeline(body, rng, all_fours() if start_low else stand())
    if not start_low:
        _arrive(tl, _start(rng, d, 4.0))
        tl.go(float(rng.uniform(0.8, 1.5)), kneel_up())
        tl.go(float(rng.uniform(0.6, 1.2)), all_fours())
    speed = float(rng.uniform(0.2, 0.5))
    while tl.t < d:
        tl.walk(float(rng.uniform(1.0, 3.0)), speed, float(rng.uniform(-45, 45)))
        if rng.random() < 0.4:
            tl.go(0.4, all_fours(), vary=0.5).hold(float(rng.uniform(0.5, 1.5)))
    return tl


def situps(rng: np.random.Generator, body: Body, d: float) -> Timeline:
    down = pose(pitch=-90, hip_flex=50, knee=100, sh_flex=150, elbow=130)
    up = pose(pitch=-25, spine_flex=35, hip_flex=115, knee=100, sh_flex=150, elbow=130)
    tl = Timeline(body, rng, down)
    _idle(tl, float(rng.uniform(0.5, 2.0)), 5.0)
    while tl.t < d:
        tl.go(float(rng.uniform(0.6, 1.1)), up).go(float(rng.uniform(0.6, 1.1)), down)
        if rng.random() < 0.2:
            tl.hold(float(rng.uniform(0.5, 1.5)), sway=0.3)
    return tl


def pushups(rng: np.random.Generator, body: Body, d: float) -> Timeline:
    tl = Timeline(body, rng, plank())
    _idle(tl, float(rng.uniform(0.5, 1.5)), 3.0)
    while tl.t < d:
        tl.go(float(rng.uniform(0.5, 0.9)), pushup_down()).go(float(rng.uniform(0.5, 0.9)), plank())
        if rng.random() < 0.2:
            tl.go(float(rng.uniform(0.8, 1.5)), lie_front(rng)).hold(1.0).go(1.0, plank())
    return tl


YOGA = (
    pose(pitch=30, hip_flex=35, knee=155, spine_flex=60, sh_flex=170, elbow=0),  # child's pose
    pose(pitch=135, hip_flex=90, knee=0, sh_flex=180, elbow=0, neck_flex=20),  # downward dog
    pose(pitch=45, hip_flex=-45, knee=0, sh_flex=45, elbow=40, neck_flex=-30),  # cobra
    pose(hip_flex_l=90, knee_l=90, hip_flex_r=-40, knee_r=5, sh_abd=90, elbow=0),  # warrior
    pose(pitch=-90, hip_flex=0, knee=0, sh_abd=30, sway=0.2),  # lying, resting
)


def yoga(rng: np.random.Generator, body: Body, d: float) -> Timeline:
    tl = Timeline(body, rng, stand() if rng.random() < 0.5 else YOGA[0])
    _idle(tl, float(rng.uniform(0.5, 1.5)), 4.0)
    while tl.t < d:
        tl.go(float(rng.uniform(1.5, 3.0)), YOGA[rng.integers(len(YOGA))], vary=1.5)
        tl.hold(float(rng.uniform(1.0, 3.0)), sway=0.4)
    return tl


# A child's floor play: which pose can follow which without a limb swinging through the floor.
_PLAY = {
    "sit": ("all_fours", "lie_back", "lie_side", "knees_up"),
    "knees_up": ("sit", "lie_back", "squat"),
    "squat": ("knees_up", "kneel_sit", "all_fours"),
    "all_fours": ("propped", "kneel_sit", "lie_side", "lie_front"),
    "propped": ("all_fours", "lie_side", "lie_front"),
    "lie_front": ("propped", "all_fours", "lie_side"),
    "lie_back": ("lie_side", "sit"),
    "lie_side": ("lie_back", "all_fours", "propped", "sit"),
    "kneel_sit": ("all_fours", "kneel_up"),
    "kneel_up": ("kneel_sit", "all_fours"),
}


def _play_pose(rng: np.random.Generator, name: str) -> np.ndarray:
    return {
        "sit": lambda: sit_floor(rng, False), "knees_up": knees_up, "squat": squat,
        "all_fours": all_fours, "propped": lambda: pose(pitch=70, sh_flex=70, elbow=90, knee=60,
                                                         neck_flex=-30),
        "lie_front": lambda: lie_front(rng), "lie_back": lambda: lie_back(rng),
        "lie_side": lambda: lie_side(rng, _side(rng)), "kneel_sit": kneel_sit,
        "kneel_up": kneel_up,
    }[name]()  # fmt: skip


def child_play(rng: np.random.Generator, body: Body, d: float) -> Timeline:
    """A small child on the floor: sitting, crawling, lying propped on the elbows, rolling."""
    name = str(rng.choice(list(_PLAY)))
    tl = Timeline(body, rng, _play_pose(rng, name))
    while tl.t < d:
        if name == "all_fours" and rng.random() < 0.6:
            speed, turn = float(rng.uniform(0.2, 0.4)), float(rng.uniform(-60, 60))
            tl.walk(float(rng.uniform(1.0, 2.5)), speed, turn)
        name = str(rng.choice(_PLAY[name]))
        tl.go(float(rng.uniform(0.6, 1.5)), _play_pose(rng, name), vary=1.5)
        _idle(tl, tl.t + float(rng.uniform(0.5, 2.0)), 15.0, legs=False)
    return tl


DAILY_STYLES = ("upright", "lie_down", "sit_floor", "squat_bend", "kneel_crawl", "exercise",
                "child_play")  # fmt: skip

# kind: (style, script)
DAILY_KINDS: dict[str, tuple[str, Script]] = {
    "walk": ("upright", walk),
    "stand_idle": ("upright", stand_idle),
    "turn_around": ("upright", turn_around),
    "sit_on_chair": ("upright", sit_on_chair),
    "sit_on_chair_quickly": ("upright", lambda r, b, d: sit_on_chair(r, b, d, quick=True)),
    "stand_up_from_chair": ("upright", stand_up_from_chair),
    "lie_down_floor_slowly": ("lie_down", lie_down_floor),
    "lie_down_floor_quickly": ("lie_down", lambda r, b, d: lie_down_floor(r, b, d, quick=True)),
    "lie_down_bed": ("lie_down", lambda r, b, d: lie_down_raised(r, b, d, sofa=False)),
    "lie_down_sofa": ("lie_down", lambda r, b, d: lie_down_raised(r, b, d, sofa=True)),
    "sit_on_floor": ("sit_floor", sit_on_floor),
    "get_up_from_floor": ("sit_floor", get_up_from_floor),
    "squat": ("squat_bend", _down_and_up(lambda r: squat(), (1.0, 3.0))),
    "bend_pick_up": ("squat_bend", _down_and_up(lambda r: bend(), (0.3, 1.0))),
    "tie_shoes": ("squat_bend", _down_and_up(lambda r: half_kneel(_side(r)), (2.0, 4.0))),
    "kneel": ("kneel_crawl", kneel),
    "crawl": ("kneel_crawl", crawl),
    "situps": ("exercise", situps),
    "pushups": ("exercise", pushups),
    "yoga": ("exercise", yoga),
    "child_play_floor": ("child_play", child_play),
}
CHILD_KINDS = ("child_play_floor",)
