"""Key poses and the timeline a generated motion is scripted on (`edge_hf.training.skeleton`).

A script starts a `Timeline` in some pose and moves it on: `go` to a key pose (smooth, minimum
jerk), `walk`, `fall` (the uncontrolled descent: accelerating, the pelvis under gravity), `settle`
(the bounce after an impact), `hold`. Key poses are given relative to the body's heading at that
moment; each is varied a little (limbs, timing) so that no two takes are alike. The after-fall
behaviours (lying still, moving on the floor, failing to get up, getting up) are here too: every
fall script ends with one of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from edge_hf.training.body import ANGLES, Body, P, pose

MINJERK, LINEAR, FALL = "minjerk", "linear", "fall"


@dataclass(frozen=True)
class Key:
    """A key pose at `t` seconds and how the motion arrives at it from the key before: `ease`,
    the profile's exponent `power` for a fall, `bounce` metres of pelvis rebound on arrival."""

    t: float
    pose: np.ndarray
    ease: str = MINJERK
    power: float = 2.0
    bounce: float = 0.0


class Timeline:
    """The key poses of one take, built forward in time, and where its fall's descent lies."""

    def __init__(self, body: Body, rng: np.random.Generator, start: np.ndarray) -> None:
        self.body, self.rng = body, rng
        self.keys = [Key(0.0, start.copy())]
        self.descent: tuple[float, float] | None = None
        self.rest_t: float | None = None  # when the body comes to rest lying (its facing then)

    @property
    def t(self) -> float:
        return self.keys[-1].t

    @property
    def now(self) -> np.ndarray:
        return self.keys[-1].pose

    def _target(
        self, target: np.ndarray, move: tuple[float, float], turn: float, vary: float
    ) -> np.ndarray:
        """`target` (relative to the current heading) placed: yaw turned by `turn`, the pelvis
        moved by `move` (forward, left) along the heading halfway through the turn."""
        new = target.copy()
        yaw = self.now[P["yaw"]]
        new[P["yaw"]] = yaw + turn + target[P["yaw"]]
        a = np.radians(yaw + turn / 2)
        f, left = move
        new[P["fwd"]] = self.now[P["fwd"]] + f * np.cos(a) - left * np.sin(a)
        new[P["left"]] = self.now[P["left"]] + f * np.sin(a) + left * np.cos(a)
        if vary > 0:  # limb variation: no two takes of a key pose alike
            spread = np.full(P["fwd"], 5.0 * vary)
            spread[:3] = 2.0 * vary  # the body's orientation: less
            new[ANGLES] += self.rng.normal(0.0, spread)
        return new

    def go(
        self,
        dur: float,
        target: np.ndarray,
        move: tuple[float, float] = (0.0, 0.0),
        turn: float = 0.0,
        vary: float = 1.0,
        ease: str = MINJERK,
        paced: bool = True,
    ) -> Timeline:
        """Move to `target` in `dur` seconds (stretched by the body's tempo when `paced`)."""
        dur *= self.body.tempo if paced else 1.0
        self.keys.append(Key(self.t + dur, self._target(target, move, turn, vary), ease))
        return self

    def hold(self, dur: float, sway: float | None = None) -> Timeline:
        """Stay in the current pose for `dur` seconds (idle sway scaled to `sway`)."""
        held = self.now.copy()
        if sway is not None:
            held[P["sway"]] = sway
        self.keys.append(Key(self.t + dur, held, MINJERK))
        return self

    def walk(self, dur: float, speed: float, turn: float = 0.0) -> Timeline:
        """Walk `dur` seconds at `speed` m/s along the heading, turning by `turn` on the way."""
        steps = max(1, int(np.ceil(abs(turn) / 30)))  # an arc, not one chord
        for _ in range(steps):
            target = self.now.copy()
            target[P["yaw"]] = 0.0
            target[P["gait"]], target[P["sway"]] = 1.0, 1.0
            self.go(dur / steps, target, (speed * dur / steps, 0.0), turn / steps, 0.0,
                    LINEAR, paced=False)  # fmt: skip
        return self

    def stop(self) -> Timeline:
        """Come to a stand from walking (the last half step)."""
        target = self.now.copy()
        target[P["yaw"]], target[P["gait"]] = 0.0, 0.0
        return self.go(0.5, target, (0.15, 0.0), vary=0.0)

    def fall(
        self,
        dur: float,
        target: np.ndarray,
        move: tuple[float, float] = (0.0, 0.0),
        turn: float = 0.0,
    ) -> Timeline:
        """Part of the fall's descent: to `target` in `dur` s, accelerating, under gravity."""
        start = self.t
        power = float(self.rng.uniform(1.6, 2.6))
        new = self._target(target, move, turn, 1.0)
        new[P["gait"]] = 0.0
        self.keys.append(Key(start + dur, new, FALL, power))
        self.descent = (self.descent[0] if self.descent else start, self.t)
        return self

    def settle(self, target: np.ndarray) -> Timeline:
        """The bounce after the impact and the body settling into its rest pose `target`."""
        dur = float(self.rng.uniform(0.25, 0.6))
        new = self._target(target, (0.0, 0.0), 0.0, 0.7)
        new[P["sway"]] = 0.2
        bounce = float(self.rng.uniform(0.01, 0.05))
        self.keys.append(Key(self.t + dur, new, MINJERK, bounce=bounce))
        self.rest_t = self.t
        return self


def _side(rng: np.random.Generator) -> float:
    return 1.0 if rng.random() < 0.5 else -1.0


# Key poses, each a small family: rng picks the variant. `side` +1 is the body's left.
def stand() -> np.ndarray:
    return pose()


def sit_chair(seat: float) -> np.ndarray:
    return pose(hip_flex=88, knee=85, spine_flex=-3, sh_flex=30, elbow=55, seat=seat)


def sit_floor(rng: np.random.Generator, cross: bool = True) -> np.ndarray:
    """Sitting on the floor: legs out, knees up or (if `cross`) cross-legged. From cross-legged
    the shins would swing through the floor on the way to lying or up: a take that moves on
    sits otherwise."""
    u = rng.random() * (1.0 if cross else 0.6)
    if u < 0.35:  # legs out, leaning on the hands behind
        return pose(hip_flex=85, knee=15, spine_flex=10, sh_flex=-30, sh_abd=15, elbow=5)
    if u > 0.6:  # cross-legged: thighs out, shins folded back under them
        return pose(hip_flex=90, hip_abd=45, knee=160, spine_flex=15, sh_flex=35, elbow=60)
    return knees_up()


def sit_slumped(rng: np.random.Generator) -> np.ndarray:
    """On the floor, leaning back (against a wall, a bed) and folded forward over the hips."""
    back = rng.uniform(0, 25)
    return pose(pitch=-back, hip_flex=85 + back, knee=rng.uniform(0, 25),
                spine_flex=rng.uniform(25, 50), neck_flex=rng.uniform(20, 50),
                sh_abd=25, elbow=10, spine_side=rng.uniform(-15, 15))  # fmt: skip


def squat() -> np.ndarray:
    return pose(hip_flex=120, knee=140, spine_flex=30, sh_flex=50, elbow=40, neck_flex=10)


def kneel_up() -> np.ndarray:
    return pose(hip_flex=5, knee=95, spine_flex=5, sh_flex=20, elbow=30)


def kneel_sit() -> np.ndarray:
    return pose(hip_flex=35, knee=155, spine_flex=15, sh_flex=30, elbow=50)


def half_kneel(side: float) -> np.ndarray:
    a, b = ("l", "r") if side > 0 else ("r", "l")
    return pose(**{f"hip_flex_{a}": 95, f"knee_{a}": 95, f"hip_flex_{b}": -5, f"knee_{b}": 95},
                spine_flex=40, neck_flex=25, sh_flex=70, elbow=40)  # fmt: skip


def bend() -> np.ndarray:
    return pose(pitch=40, hip_flex=40, knee=12, spine_flex=40, sh_flex=80, elbow=5, neck_flex=-10)


def all_fours() -> np.ndarray:
    return pose(pitch=72, hip_flex=72, knee=90, sh_flex=72, elbow=5, neck_flex=-40)


def plank() -> np.ndarray:
    return pose(pitch=66, sh_flex=66, elbow=0, knee=0, hip_flex=0, neck_flex=-10)


def pushup_down() -> np.ndarray:
    return pose(pitch=80, sh_flex=30, sh_abd=20, elbow=90, knee=0, hip_flex=0, neck_flex=-15)


# Lying on the back or front, arms and legs stay in the floor's plane (abduction) or fold away
# from it; a limb swung into the floor would lift the body off it.
def lie_back(rng: np.random.Generator) -> np.ndarray:
    hip = rng.uniform(0, 45)  # knees up at most so far that the feet stay on the floor
    return pose(pitch=-90, sh_abd=rng.uniform(5, 80), elbow=rng.uniform(5, 60), hip_flex=hip,
                knee=rng.uniform(0, 2 * hip + 3), neck_yaw=rng.uniform(-40, 40),
                hip_abd=rng.uniform(0, 15))  # fmt: skip


def lie_front(rng: np.random.Generator) -> np.ndarray:
    return pose(pitch=90, neck_yaw=80 * _side(rng), sh_abd=rng.uniform(10, 120),
                sh_flex=rng.uniform(-10, 5), elbow=rng.uniform(0, 20), knee=rng.uniform(0, 40),
                hip_flex=rng.uniform(-10, 0), hip_abd=rng.uniform(0, 15))  # fmt: skip


def lie_side(rng: np.random.Generator, side: float) -> np.ndarray:
    """Lying on the body's `side` (+1 left side down): the trunk bends up from the hips to the
    broader shoulders, the lower arm forward along the floor."""
    down = "l" if side > 0 else "r"
    return pose(roll=-90 * side, hip_flex=rng.uniform(10, 70), knee=rng.uniform(10, 90),
                sh_flex=rng.uniform(40, 100), elbow=rng.uniform(20, 100),
                spine_flex=rng.uniform(0, 30), neck_flex=rng.uniform(-10, 20),
                spine_side=side * rng.uniform(8, 16), **{f"sh_abd_{down}": 0.0})  # fmt: skip


def lying(rng: np.random.Generator) -> np.ndarray:
    """On the back, front or either side."""
    u = rng.random()
    if u < 0.4:
        return lie_back(rng)
    return lie_front(rng) if u < 0.65 else lie_side(rng, _side(rng))


def is_on_front(p: np.ndarray) -> bool:
    return p[P["pitch"]] > 45


def is_on_back(p: np.ndarray) -> bool:
    return p[P["pitch"]] < -45 and abs(p[P["roll"]]) < 45


_UPPER = slice(P["spine_flex"], P["hip_flex_l"])  # trunk, head and arms


def fidget(rng: np.random.Generator, p: np.ndarray, by: float, legs: bool = True) -> np.ndarray:
    """`p` (relative: no yaw) with its head, trunk and arms (and legs, unless not `legs`: a
    kneeling or squatting body stays on its knees and feet) moved by up to `by` degrees."""
    new = p.copy()
    new[P["yaw"]] = 0.0
    part = slice(3, P["fwd"]) if legs else _UPPER
    new[part] += rng.uniform(-by, by, part.stop - part.start)
    if legs:
        new[P["roll"]] += rng.uniform(-by, by) / 3
    return new


def after_fall(tl: Timeline, rest: np.ndarray, end: float) -> None:
    """What follows a fall until `end`: lying still, moving on the floor, trying and failing
    to get up, or getting up again."""
    rng = tl.rng
    u = rng.random()
    if u < 0.35:
        tl.hold(end - tl.t + 0.5, sway=0.15)
    elif u < 0.6:
        while tl.t < end:
            shift = (float(rng.uniform(-0.15, 0.15)), float(rng.uniform(-0.15, 0.15)))
            tl.go(rng.uniform(0.8, 2.0), fidget(rng, rest, 35), move=shift)
            tl.hold(rng.uniform(0.3, 2.0), sway=0.4)
    elif u < 0.8:
        while tl.t < end:
            tl.hold(rng.uniform(0.5, 2.0), sway=0.3)
            half_up = (
                all_fours() if is_on_front(rest) or rng.random() < 0.3 else sit_floor(rng, False)
            )
            if not is_on_front(rest) and not is_on_back(rest):  # up on one elbow
                half_up = pose(roll=tl.now[P["roll"]] / 2, pitch=-20, hip_flex=70, knee=60,
                               sh_flex=30, sh_abd=40, elbow=10)  # fmt: skip
            tl.go(rng.uniform(1.0, 2.0), half_up, vary=1.5)
            tl.hold(rng.uniform(0.3, 1.5), sway=0.8)
            tl.go(rng.uniform(0.6, 1.2), fidget(rng, rest, 15), paced=False)
    else:
        get_up(tl, rest)
        tl.hold(max(end - tl.t, 0.0) + 0.5)


def is_sitting(p: np.ndarray) -> bool:
    return abs(p[P["pitch"]]) <= 45 and abs(p[P["roll"]]) <= 45


def knees_up() -> np.ndarray:
    return pose(hip_flex=135, knee=95, spine_flex=30, sh_flex=40, elbow=40)


def get_up(tl: Timeline, rest: np.ndarray) -> None:
    """From the floor to standing: sitting, feet in and up over a squat; lying, rolled onto the
    side, onto all fours, one knee, up. (Key poses chosen so that no limb swings through the
    floor on the way.)"""
    rng = tl.rng
    if is_sitting(rest):
        tl.go(rng.uniform(0.8, 1.4), knees_up())
        tl.go(rng.uniform(0.8, 1.4), squat(), move=(0.2, 0.0))
        tl.go(rng.uniform(0.8, 1.4), stand())
        return
    if is_on_back(rest):
        tl.go(rng.uniform(0.8, 1.3), lie_side(rng, _side(rng)))
    tl.go(rng.uniform(1.0, 1.6), all_fours(), turn=rng.uniform(-40, 40))
    tl.go(rng.uniform(0.8, 1.3), half_kneel(_side(rng)), move=(0.25, 0.0))
    tl.go(rng.uniform(0.9, 1.5), stand(), move=(0.1, 0.0))
