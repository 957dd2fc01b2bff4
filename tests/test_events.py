"""The fall detector (edge_hf/daemon/events.py's FallDetector) on its injectable clocks."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from edge_hf.core.posefall import PoseVerdict, Seen
from edge_hf.core.zones import Zone, Zones
from edge_hf.daemon.config import DetectionConfig
from edge_hf.daemon.decisions import Decision
from edge_hf.daemon.events import FallDetector
from edge_hf.daemon.payload import FallEvent, ModelInfo
from tests.conftest import fall_detector


def _fall(d: FallDetector, t0: float, frame: np.ndarray | None = None) -> list[str]:
    """Three high windows from `t0` (0.1 s apart): the event types they cause."""
    return [e.type for i in range(3) for e in d.update(0.9, t0 + 0.1 * i, frame)]


@pytest.mark.parametrize("step_s", [3600.0, -3600.0])
def test_a_wall_clock_step_neither_deafens_a_camera_nor_reverses_an_event(step_s: float) -> None:
    offset = [1_767_225_600.0]  # wall = monotonic + offset; NTP moves the offset
    d = fall_detector(wall=lambda t: t + offset[0])
    events = [e for i in range(3) for e in d.update(0.9, 100 + 0.1 * i)]
    assert [e.type for e in events] == ["start"]
    offset[0] += step_s  # the clock steps while the fall is latched
    end = d.acknowledge(110.0)  # an ack, on the monotonic clock like every timer
    assert [e.type for e in end] == ["end"]
    start, stop = events[0].as_dict(), end[0].as_dict()
    assert stop["ended_at"] >= start["started_at"], "an end is never before its start"
    assert end[0].time - events[0].started_at == pytest.approx(110.0 - 100.1)  # started at k=2
    # The next fall, after the 10 s cooldown by the monotonic clock, raises its event.
    for i in range(20):
        d.update(0.1, 111 + 0.1 * i)
    assert _fall(d, 121.0) == ["start"]


def _detector(**kw: object) -> FallDetector:
    cfg = DetectionConfig(
        **{"k": 2, "n": 3, "end_after": 3, "cooldown_s": 5.0, "latch": False, **kw}
    )  # type: ignore[arg-type]
    return FallDetector("cam", "dev", cfg, 0.5, ModelInfo("m.onnx", 3, 100.0))


def test_detector_k_of_n_start_end_cooldown() -> None:
    d = _detector()
    scores = [0.1, 0.9, 0.2, 0.8, 0.9, 0.95, 0.3, 0.2, 0.1, 0.9, 0.9, 0.1]
    events = []
    for i, s in enumerate(scores):
        events += [(i, e) for e in d.update(s, 1000.0 + i * 0.1)]
    kinds = [(i, e.type) for i, e in events]
    assert kinds == [(3, "start"), (8, "end")], "2 of 3 starts it; 3 below end it; cooldown holds"
    start, end = events[0][1].as_dict(), events[1][1].as_dict()
    assert start["event_id"] == end["event_id"] and end["peak_score"] == 0.95
    assert start["started_at"] == "1970-01-01T00:16:40.300Z" and end["end_reason"] == "recovered"
    assert start["model"] == {"name": "m.onnx", "window": 3, "interval_ms": 100.0}


def test_detector_median_and_max_duration() -> None:
    d = _detector(smoothing="median", max_event_s=1.0)
    kinds = [e.type for i in range(30) for e in d.update(0.9, i * 0.1)]
    assert kinds == ["start", "end"]
    assert d.close(5.0) == []


def test_a_descent_raises_a_fall_only_once_the_person_stays_down() -> None:
    """confirm_s with a three-state model: falling then down alarms, falling then up does not."""
    d = _detector(confirm_s=1.0, end_after=3)
    events = []
    # Walking with one spurious "falling" pair of windows, then up again: no alarm.
    trace = [(0.1, 0.0)] * 5 + [(0.9, 0.05), (0.9, 0.05)] + [(0.05, 0.05)] * 50
    # A real fall: a descent, then down for 2 s, then the person gets up.
    trace += [(0.9, 0.1), (0.9, 0.1)] + [(0.1, 0.85)] * 20 + [(0.05, 0.05)] * 5
    for i, (fall, down) in enumerate(trace):
        events += [(i, e) for e in d.update(fall, 100.0 + i * 0.1, None, down)]
    kinds = [(i, e.type) for i, e in events]
    assert kinds == [(68, "start"), (81, "end")], kinds
    start, end = events[0][1], events[1][1]
    assert start.started_at == pytest.approx(100.0 + 58 * 0.1), "the event dates from the descent"
    assert start.time - start.started_at == pytest.approx(1.0), "raised after confirm_s"
    assert end.end_reason == "got_up" and d.counts.unconfirmed == 1


def test_up_before_s_alarms_on_a_fall_from_standing_not_where_nobody_reads_up() -> None:
    """up_before_s: the same descent and lying raise a fall after 3 s of a person up (P(adl)
    high), and nothing after 3 s of a scene that reads "down" with nobody on the floor (the
    unseen room whose mat reads as a person lying); the refusal is counted once."""
    fall = [(0.9, 0.1)] * 2 + [(0.1, 0.85)] * 20

    def run(before: list[tuple[float, float]], **kw: object) -> tuple[list[str], FallDetector]:
        d = _detector(confirm_s=1.0, **kw)
        kinds = [
            e.type for i, (f, dn) in enumerate(before + fall) for e in d.update(f, i * 0.1, None, dn)
        ]  # fmt: skip
        return kinds, d

    up, scene_reads_down = [(0.05, 0.05)] * 30, [(0.2, 0.7)] * 30
    assert run(up, up_before_s=2.0)[0] == ["start"]
    refused, d = run(scene_reads_down, up_before_s=2.0)
    assert refused == [] and d.counts.not_up_before == 1
    assert run(scene_reads_down)[0] == ["start"], "off by default: today's rule alarms"
    # A camera that just started (under a second of history) gives the descent the benefit.
    assert run(scene_reads_down[:5], up_before_s=2.0)[0] == ["start"]
    # A stumble in the last half second before the descent does not count against it.
    stumble = up[:-4] + [(0.6, 0.2)] * 4
    assert run(stumble, up_before_s=2.0)[0] == ["start"]


def test_confirm_on_down_needs_the_person_on_the_floor_not_still_falling() -> None:
    """confirm_on down: a camera that keeps reading "falling" at about 0.5 with little "down"
    (people walking in a room the model never saw) confirms under the default rule (falling or
    down >= 0.5) and not on P(down) alone; a fall whose descent takes 1.5 s confirms under
    both, on P(down) once the sliding mean has left most of the descent behind."""
    walking = [(0.05, 0.05)] * 30 + [(0.6, 0.3), (0.6, 0.3)] + [(0.4, 0.3)] * 40
    fall = [(0.05, 0.05)] * 30 + [(0.9, 0.05)] * 15 + [(0.05, 0.9)] * 40

    def starts(trace: list[tuple[float, float]], **kw: object) -> list[float]:
        d = _detector(confirm_s=2.0, **kw)
        return [e.time for i, (f, dn) in enumerate(trace) for e in d.update(f, i * 0.1, None, dn)
                if e.type == "start"]  # fmt: skip

    assert len(starts(walking)) == 1 and starts(walking, confirm_on="down") == []
    default, on_down = starts(fall), starts(fall, confirm_on="down")
    assert len(default) == 1 and len(on_down) == 1
    assert on_down[0] > default[0], "P(down) alone waits for the descent to leave the mean"


def test_without_confirmation_a_three_state_model_alarms_on_the_descent() -> None:
    d = _detector(confirm_s=0.0)
    kinds = [e.type for i in range(3) for e in d.update(0.9, i * 0.1, None, 0.05)]
    assert kinds == ["start"]


# -- the person stage's verdicts in the decision (`person.decision`, `person.lost_s`)


def _decider(decision: str, lost_s: float = 0.0) -> FallDetector:
    return FallDetector(
        "c", "d", DetectionConfig(), 0.5, ModelInfo("m", 3, 100.0), decision, lost_s=lost_s
    )  # type: ignore[arg-type]


def test_each_decision_says_who_may_raise_an_event() -> None:
    """The pose rules' fall and the classifier's score, alone and together, per decision."""

    def raised(decision: str, cnn: float, pose: PoseVerdict | None) -> bool:
        d = _decider(decision)
        if pose is not None:
            d.on_pose(0.0, pose)
        return any(e.type == "start" for i in range(3) for e in d.update(cnn, i * 0.1))

    pose_fall = PoseVerdict(down=True, fall=True, new_fall=True)
    pose_down = PoseVerdict(down=True, fall=False)
    table = {  # decision: (pose fall alone, CNN alone, CNN with someone down)
        "cnn": (False, True, True), "pose": (True, False, False), "either": (True, True, True),
        "both": (False, False, True), "combined": (True, False, True),
    }  # fmt: skip
    for decision, expected in table.items():
        got = (raised(decision, 0.1, pose_fall), raised(decision, 0.9, None),
               raised(decision, 0.9, pose_down))  # fmt: skip
        assert got == expected, decision


def test_a_pose_down_opens_the_gate_for_pose_down_s_from_its_own_time_not_every_window() -> None:
    """#42 item 5: a verdict carries its tick's time and is fed once. One pose tick that saw
    someone down at t=0 lets the classifier raise (`combined`) until POSE_DOWN_S after it, never
    later, however many windows follow (before, the last verdict was re-read at every window and
    kept the gate open while the stage produced nothing)."""
    late = _decider("combined")
    late.on_pose(0.0, PoseVerdict(down=True, fall=False, t=0.0))
    quiet = [e for i in range(40) for e in late.update(0.1, i * 0.1)]  # 4 s of daily life
    assert quiet == []
    assert not [e for i in range(40, 46) for e in late.update(0.95, i * 0.1)]
    soon = _decider("combined")
    soon.on_pose(0.0, PoseVerdict(down=True, fall=False, t=0.0))
    assert [e.type for i in range(20, 26) for e in soon.update(0.95, i * 0.1)] == ["start"]


def test_a_person_the_pose_stage_loses_at_the_descent_lets_the_classifier_raise() -> None:
    """#40 (night, half hidden): person.lost_s. The classifier sees a descent at 2.0 s and the
    person stay down (confirm_s 1); the pose stage found someone upright until `found_until` and
    nobody after (they fell out of its sight). Under `combined` with lost_s 1 that raises the
    alarm, naming the person found last; nothing without lost_s, nothing when nobody was ever
    found (an empty room), nothing when the person is found again, nothing when they were lost
    long before the descent (left the room) or only once the descent's candidate was dropped,
    nothing when they were last found at the side of the view (walked out of it), nothing when
    the classifier did not read them up before the descent or the pose stage never found them
    upright (on all fours)."""
    upright = Seen(7, (0.1, 0.2, 0.3, 0.9), (0.2, 0.9), upright=True, score=0.8)
    at_edge = Seen(7, (0.8, 0.2, 1.0, 0.9), (0.9, 0.9), upright=True, score=0.8)

    def run(lost_s: float, found_until: float, again: float = 99.0, who: Seen = upright,
            before: float = 0.0, ticks_until: float = 99.0) -> list[str]:  # fmt: skip
        det = FallDetector("c", "d", DetectionConfig(confirm_s=1.0), 0.5, ModelInfo("m", 3, 100.0),
                           "combined", lost_s=lost_s)  # fmt: skip
        events = []
        for i in range(80):
            t = i * 0.1
            if i % 2 == 0 and t <= ticks_until:  # a pose tick every 0.2 s
                found = t <= found_until or t >= again
                det.on_pose(t, PoseVerdict(down=False, fall=False, t=t, seen=[who] * found))
            fall, down = (
                (0.9, 0.05) if 2.0 <= t < 2.5 else (0.2, 0.75) if t >= 2.5 else (0.05, before)
            )
            events += det.update(fall, t, None, down)
        if events:
            assert events[0].person is not None and events[0].person[0] == 7, "the one lost"
        return [e.type for e in events]

    assert run(1.0, found_until=2.2) == ["start"]
    assert run(0.0, found_until=2.2) == []
    assert run(1.0, found_until=2.2, ticks_until=2.2) == [], "a stalled stage loses nobody"
    assert run(1.0, found_until=-1.0) == [], "nobody ever found: an empty room says nothing"
    assert run(1.0, found_until=2.2, again=3.0) == [], "found again: not lost"
    assert run(1.0, found_until=0.4) == [], "lost long before the descent: gone out"
    assert run(1.0, found_until=6.4) == [], "lost after the descent's candidate was dropped"
    assert run(1.0, found_until=2.2, who=at_edge) == [], "last found at the side: walked out"
    assert run(1.0, found_until=2.2, before=0.6) == [], "not up before it: no descent to trust"
    crouching = Seen(7, (0.1, 0.5, 0.3, 0.9), (0.2, 0.9), upright=False, score=0.8)
    assert run(1.0, found_until=2.2, who=crouching) == [], "never seen upright: no descent either"


def _lost_stream(
    found: Callable[[float], list[Seen]],
    tick_s: float = 0.2,
    seconds: float = 8.0,
    down_before: float | None = None,
    **kw: object,
) -> tuple[list[FallEvent], FallDetector]:
    """A classifier descent at 2.0 s and the person lying after it (confirm_s 1), the pose
    ticks every `tick_s` finding `found(t)`; `down_before`: a pose tick saw someone down then;
    `kw`: FallDetector's zones / when_others and DetectionConfig fields."""
    zones, when_others = kw.pop("zones", None), kw.pop("when_others", "alert")
    blind = kw.pop("blind", False)
    cfg = DetectionConfig(**{"confirm_s": 1.0, **kw})  # type: ignore[arg-type]
    det = FallDetector("c", "d", cfg, 0.5, ModelInfo("m", 3, 100.0), "combined", zones=zones,
                       when_others=when_others, lost_s=1.0)  # type: ignore[arg-type]  # fmt: skip
    det.picture_ok = not blind
    events: list[FallEvent] = []
    for i in range(round(seconds * 10)):
        t = i * 0.1
        if down_before is not None and abs(t - down_before) < 1e-6:
            down = Seen(3, (0.6, 0.7, 0.9, 0.8), (0.75, 0.75), down=True, score=0.8)
            det.on_pose(t, PoseVerdict(down=True, fall=False, t=t, seen=[down]))
        elif round(t / tick_s, 6).is_integer():
            det.on_pose(t, PoseVerdict(down=False, fall=False, t=t, seen=found(t)))
        fall, down_p = (0.9, 0.05) if 2.0 <= t < 2.5 else (0.2, 0.75) if t >= 2.5 else (0.05, 0.0)
        events += det.update(fall, t, None, down_p)
    return events, det


def test_what_a_lost_persons_alarm_says_and_refuses() -> None:
    """#40 person.lost_s, a review's cases: a lost person's fall escalates on the classifier's
    reading (the pose stage cannot see them lying); an `ignore` zone beside where they were last
    found refuses it (they may have lain down on that bed); the others present are counted when
    the person was last found (a carer beside them: `suppress` refuses, whatever the timing); a
    pose "down" just before the descent does not keep the lost path from raising it; at 1 Hz one
    missed tick is no loss; in a black or frozen picture (the camera `blind`) nobody is lost."""
    me = Seen(7, (0.1, 0.2, 0.3, 0.9), (0.2, 0.8), upright=True, score=0.8)
    carer = Seen(8, (0.6, 0.2, 0.8, 0.9), (0.7, 0.8), upright=True, score=0.9)

    def alone(t: float) -> list[Seen]:
        return [me] if t <= 2.2 else []

    events, _ = _lost_stream(alone, escalate_after_s=3.0, seconds=12.0)
    assert [e.type for e in events] == ["start", "escalation"]
    bed = Zone("bed", "ignore", ((0.32, 0.6), (0.6, 0.6), (0.6, 0.95), (0.32, 0.95)))
    assert _lost_stream(alone, zones=Zones((bed,)))[0] == []
    far_bed = Zone("bed", "ignore", ((0.8, 0.6), (0.99, 0.6), (0.99, 0.95), (0.8, 0.95)))
    assert [e.type for e in _lost_stream(alone, zones=Zones((far_bed,)))[0]] == ["start"]
    with_carer = lambda t: [me, carer] if t <= 2.2 else []  # noqa: E731 (both gone from view)
    assert _lost_stream(with_carer, when_others="suppress", confirm_s=2.0)[0] == []
    (start,) = _lost_stream(with_carer, when_others="flag", confirm_s=2.0)[0]
    assert start.others_present == 1 and start.flag == "others_present"
    assert [e.type for e in _lost_stream(alone, down_before=0.0)[0]] == ["start"]

    def one_miss(t: float) -> list[Seen]:  # 1 Hz: found at 2 s, missed at 3 s, found at 4 s
        return [] if abs(t - 3.0) < 1e-6 else [me]

    assert _lost_stream(one_miss, tick_s=1.0)[0] == []
    assert _lost_stream(alone, blind=True)[0] == [], "a black or frozen picture loses nobody"


def test_a_person_seen_going_down_and_lost_right_after_is_a_pose_fall() -> None:
    """#40 (half hidden, far), person.lost_s: the pose rules see person 7 upright, then down
    after a sudden descent at 2.0 s (stage `descent`, not yet their confirm_s), and then the stage
    finds nobody: they fell behind furniture or below the view. The classifier reads nothing of
    it (someone up throughout). Under `combined` (and `pose`) with lost_s 1 that is the pose
    rules' fall once nobody was found for FELL_OUT_S (3 s), starting at the descent, naming
    person 7, once; nothing without lost_s, nor under `both` (the classifier's decision), nor
    when the person is found again (crouching behind a sofa for 1.4 s), nor at the left, right
    or bottom edge of the view (gone out of it), nor when the classifier did not read anyone up
    before it (a person already lying there, re-found by a passer-by's track), nor in a black or
    frozen picture, nor from a stage that stopped or that fails (`degraded`)."""
    up = Seen(7, (0.4, 0.2, 0.6, 0.9), (0.5, 0.9), upright=True, score=0.8, stage="upright")
    going = Seen(7, (0.3, 0.6, 0.7, 0.9), (0.5, 0.9), down=True, score=0.6, stage="descent",
                 why=("aspect",))  # fmt: skip

    def run(decision: str = "combined", lost_s: float = 1.0, who: Seen = going,
            again: float = 99.0, p_up: float = 0.9, blind: bool = False,
            ticks_until: float = 99.0, pose_ok: bool = True) -> list[FallEvent]:  # fmt: skip
        det = FallDetector("c", "d", DetectionConfig(confirm_s=2.0), 0.5,
                           ModelInfo("m", 3, 100.0), decision, lost_s=lost_s)  # type: ignore[arg-type]  # fmt: skip
        det.picture_ok, det.pose_ok = not blind, pose_ok
        events: list[FallEvent] = []
        for i in range(100):
            t = round(i * 0.1, 1)
            if i % 2 == 0 and t <= ticks_until:  # a pose tick every 0.2 s
                seen = [up] if t < 2.0 else [who] if t == 2.0 else [up] if t >= again else []
                down = any(s.down for s in seen)
                det.on_pose(t, PoseVerdict(down=down, fall=False, t=t, seen=seen))
            events += det.update((1.0 - p_up) / 2, t, None, (1.0 - p_up) / 2)
        return events

    (start,) = run()
    assert start.type == "start" and start.person is not None and start.person[0] == 7
    assert start.started_at == 2.0, "the fall starts at the descent"
    assert 5.0 <= start.time <= 5.5, "raised FELL_OUT_S after the tick that last found them"
    assert [e.type for e in run("pose")] == ["start"]
    assert run(lost_s=0.0) == [], "without lost_s: the rules never held them down confirm_s"
    assert run("both") == [], "both: the classifier decides"
    assert run(again=2.6) == [], "found again (upright): not lost"
    assert run(again=3.4) == [], "crouched behind furniture for 1.4 s: found again"
    at_edge = Seen(7, (0.7, 0.6, 1.0, 0.9), (0.85, 0.9), down=True, score=0.6, stage="descent")
    assert run(who=at_edge) == [], "at the side of the view: gone out of it"
    below = Seen(7, (0.3, 0.7, 0.7, 1.0), (0.5, 1.0), down=True, score=0.6, stage="descent")
    assert run(who=below) == [], "at the bottom of the view: walked out under the camera"
    assert run(pose_ok=False) == [], "a failing person stage loses nobody"
    assert run(p_up=0.3) == [], "the classifier read nobody up before it"
    assert run(blind=True) == [], "a black or frozen picture loses nobody"
    assert run(ticks_until=2.2) == [], "a stalled stage loses nobody"
    bending = Seen(7, (0.3, 0.6, 0.7, 0.9), (0.5, 0.9), score=0.6, stage="vetoed")
    assert run(who=bending) == [], "the head vetoed the descent: no fall to lose"


def test_a_lost_persons_fall_waiting_for_the_cooldown_is_dropped_once_they_are_found() -> None:
    """#40 person.lost_s, a review's cases: a fall the pose path found (a person lost right after
    a descent) during the cooldown of an acknowledged fall waits for its end, unless someone is
    found again meanwhile (`found_again`: it says so); a fall the rules themselves confirm
    meanwhile is raised as theirs, not as the lost person's."""
    up = Seen(7, (0.4, 0.2, 0.6, 0.9), (0.5, 0.9), upright=True, score=0.8, stage="upright")
    going = Seen(7, (0.3, 0.6, 0.5, 0.9), (0.4, 0.9), down=True, score=0.6, stage="descent")

    def run(again: float = 99.0, rules_fall: float = 99.0) -> tuple[list[FallEvent], list[str]]:
        det = FallDetector("c", "d", DetectionConfig(confirm_s=2.0), 0.5,
                           ModelInfo("m", 3, 100.0), "combined", lost_s=1.0)  # fmt: skip
        det.record = _Record()
        events: list[FallEvent] = []
        for i in range(200):
            t = round(i * 0.1, 1)
            if (
                t == 0.0 or t == rules_fall
            ):  # a fall raised, then acknowledged: the cooldown runs until 10.5 s
                det.on_pose(t, PoseVerdict(down=True, fall=True, new_fall=True, t=t, seen=[up]))
            elif i % 2 == 0:
                seen = [up] if t < 2.0 else [going] if t == 2.0 else [up] if t >= again else []
                det.on_pose(t, PoseVerdict(down=seen == [going], fall=False, t=t, seen=seen))
            if t == 0.5:
                events += det.acknowledge(t)
            events += det.update(0.05, t, None, 0.05)
        starts = [e for e in events if e.type == "start"]
        return starts, [
            d.line for d in det.record.decisions if d.reason in ("alarm", "found_again")
        ]

    starts, lines = run()
    assert [e.time for e in starts] == [0.0, 10.5], "waits for the cooldown's end"
    assert "found nobody" in lines[-1]
    starts, lines = run(again=6.0)
    assert [e.time for e in starts] == [0.0], "found again meanwhile: dropped"
    assert "was found again" in lines[-1]
    starts, lines = run(rules_fall=7.0)
    assert [e.time for e in starts] == [0.0, 10.5]
    assert "the pose rules confirmed a fall at 7.0 s" in lines[-1], "the rules' own fall"


class _Record:
    """A DecisionRecord that keeps the decisions."""

    def __init__(self) -> None:
        self.decisions: list[Decision] = []

    def window(self, gates: object) -> None:
        pass

    def pose(self, t: float, verdict: PoseVerdict) -> None:
        pass

    def decision(self, decision: Decision) -> None:
        self.decisions.append(decision)
