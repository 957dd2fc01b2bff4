"""Per-camera fall decisions: smoothed scores -> `start` / `end` events with stable ids.

A window's fall probability is smoothed (k of the last n above threshold, or the median of the
last n). Smoothed above threshold starts an event; `end_after` consecutive windows below the
threshold, or `max_event_s`, end it; a cooldown keeps one fall from raising a second event.

With a model that also says "down" (classes adl / falling / down) and `confirm_s` > 0, a descent
only makes a candidate: the event starts once the mean P(falling or down) over the last
`confirm_s` seconds reaches CONFIRM_LEVEL (a fall is a descent followed by a person who stays
down; walking, jumping and bending never stay down; `confirm_on: down` counts P(down) alone),
and ends when the person is up again (`got_up`). With `up_before_s` as well, a descent makes a
candidate only if the person was up before it (a fall starts from standing or sitting; a scene
that reads "down" all along says nothing about a fall).
Latched (`detection.latch`, the default), an event does not end by itself when the scores drop
(a person lying still scores low): it ends when acknowledged (`acknowledge`, from MQTT
`<camera>/ack`) or after `clear_after_s` (`timeout`).
With the person stage on (`person.model`), the pose rules' verdict comes with each window and
`decision` says who raises an event: `either` (a confirmed pose fall starts one too), `pose` (only
a pose fall does), `both` (the classifier's, only while the pose rules saw someone down in the
last POSE_DOWN_S), `combined` (a pose fall, or the classifier's while the pose rules saw someone
down: `pose` and `both` together), `cnn` (the pose verdict is ignored). Under `both`/`combined`,
`lost_s`: a confirmed descent at which the person stage lost everyone raises it too (`_lost`,
its own candidate beside the gate's; `PeopleSeen.lost_at`); and where a pose fall raises one, a
person the pose rules saw go down whom the stage lost right after is a pose fall
(`_fell_out_of_sight`, `PeopleSeen.fell_out`).
With the person stage, every start is judged against the people it saw last
(`edge_hf.daemon.seen.PeopleSeen`): a
camera's zones (`edge_hf.core.zones`) refuse a fall whose person lies inside an `ignore` zone, or
outside the `floor` zones; the others upright in view are counted (`others_present`), and
`person.when_others_present` flags or suppresses the fall they saw.
Every decision about a possible fall (an alarm, or a refusal and its reason: `decisions.REASONS`)
goes to the debug log and a count per reason (`DetectorCounts.refused`); `record`, when set
(`edge-hf replay --explain`), keeps them with every window's gates and every pose tick.
"Still on the floor" (`escalate_after_s`): an open fall whose person is still down that long
after its start sends one `escalation` (same event_id, `down_s`); none once its person got up.
Events are `FallEvent` objects (`edge_hf.daemon.payload`), serialised once (`as_dict`/`to_json`)
by whichever sink sends them.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from edge_hf.core.posefall import PoseVerdict
from edge_hf.core.zones import Zones
from edge_hf.daemon.config import DecisionRule, DetectionConfig
from edge_hf.daemon.decisions import ALARM, Decision, DecisionRecord, Gates, PoseNotes
from edge_hf.daemon.lograte import LogRate
from edge_hf.daemon.payload import Evidence, FallEvent, ModelInfo
from edge_hf.daemon.scores import (
    CONFIRM_LEVEL,
    UP_BEFORE_GAP_S,
    Candidate,
    ScoreHistory,
)
from edge_hf.daemon.seen import FELL_OUT_S, LOST_UP_S, POSE_DOWN_S, Context, PeopleSeen

log = logging.getLogger(__name__)
_NAMESPACE = uuid.UUID("6f2f6c1e-9a7e-4c55-9d8e-2f0d3f0c4e11")


@dataclass
class _Open:
    """The event in progress on a camera."""

    event_id: str
    started: float  # detector time (monotonic live): what timers measure from
    started_at: float  # Unix time of the start: what the events say
    peak_score: float
    below: int = 0  # consecutive windows under the threshold
    person: tuple[int, tuple[float, float, float, float]] | None = None
    escalated: bool = False  # its `escalation` went out (once per fall)
    got_up: bool = False  # its person was seen up again: never escalated


@dataclass
class DetectorCounts:
    start: int = 0
    end: int = 0
    unconfirmed: int = 0  # descents after which the person did not stay down
    not_up_before: int = 0  # descents refused because the person was not up before them
    in_zone: int = 0  # falls refused: the person lay in an `ignore` zone / outside `floor` zones
    others_present: int = 0  # falls refused: others upright in view (when_others_present)
    escalation: int = 0  # falls still down after escalate_after_s
    by_reason: dict[str, int] = field(default_factory=dict)
    refused: dict[str, int] = field(default_factory=dict)  # decisions.REASONS key -> count


CONFIRM_GRACE_S = 3.0  # a candidate not confirmed this long after confirm_s is dropped
# decisions in which a pose fall starts an event
POSE_RAISES: tuple[DecisionRule, ...] = ("either", "pose", "combined")


class FallDetector:
    """Turns one camera's stream of fall scores into start/end events."""

    def __init__(
        self,
        camera: str,
        device_id: str,
        cfg: DetectionConfig,
        threshold: float,
        model: ModelInfo,
        decision: DecisionRule = "cnn",
        wall: Callable[[float], float] | None = None,
        zones: Zones | None = None,
        when_others: str | None = None,
        lost_s: float = 0.0,
    ) -> None:
        self.camera, self.device_id, self.cfg = camera, device_id, cfg
        self.decision = decision  # PersonConfig.decision when the person stage is on
        # What the person stage saw lately: zones, person.when_others_present (None: the stage
        # is off) and person.lost_s (a person who falls out of its sight lets the `both` /
        # `combined` gate pass the classifier's descent, as someone seen down would).
        self.seen = PeopleSeen(zones, when_others, lost_s)
        self._said = ""  # the refusal last logged (once per episode)
        # Detector time -> Unix time. Every timer (cooldown, confirm_s, clear_after_s) runs on
        # the time `update` is fed (the monotonic clock live, media time in replay); only the
        # timestamps an event carries are wall clock, so an NTP step never stretches a timer.
        self.wall = wall or (lambda t: t)
        self._pose_fall_at: float | None = None  # a pose fall fed, raised with the next window
        # False while this camera's person stage is failing (`degraded`): the classifier then
        # decides alone, as with decision `cnn`, rather than not at all.
        self.pose_ok = True
        # False while the camera's picture is black or frozen (`blind`): a pose stage that finds
        # nobody in it has lost nobody (lost_s).
        self.picture_ok = True
        self.threshold, self.model = threshold, model
        self.keeps_pictures = cfg.snapshot  # the start's picture goes with it (SnapshotSink)
        self._open: _Open | None = None
        self._candidate: Candidate | None = None
        # A descent the decision's gate refused, waiting to be confirmed by lost_s alone.
        self._lost: Candidate | None = None
        # The windows' probabilities, as far back as the decision looks: P(up) over up_before_s
        # (LOST_UP_S before a person lost FELL_OUT_S ago), P(falling or down) over POSE_DOWN_S.
        up_span = max(cfg.up_before_s, LOST_UP_S + max(lost_s, FELL_OUT_S) if lost_s else 0.0)
        self.scores = ScoreHistory(cfg, up_span, not_up_s=POSE_DOWN_S)
        self._refusing = False  # this descent was refused (up_before_s): counted once
        self._cooldown_until = float("-inf")
        self.last_score = 0.0
        self.counts = DetectorCounts()
        self._rate = LogRate()  # a flood of acknowledgements is a line a minute
        # (t, fall, down) of every window fed, when a caller asks for it (`edge-hf calibrate`).
        self.trace: list[tuple[float, float, float | None]] | None = None
        # (t, where, why) of every person read as lying, when a caller asks (`edge-hf calibrate`,
        # to suggest an `ignore` zone): "pose" for each person the pose rules saw down at a tick,
        # "classifier" for those of the newest tick (the ones down, else all) under a window
        # whose P(fall) reached the threshold. Where: `Seen.at`, 0-1 of the camera's view.
        self.lying_at: list[tuple[float, tuple[float, float], str]] | None = None
        # Every window's gates, pose tick and decision, when a caller asks (`replay --explain`);
        # `origin`: the detector time decisions count their seconds from (replay: the file's 0).
        self.record: DecisionRecord | None = None
        self.origin = 0.0
        self._pose_notes = PoseNotes()
        self._gate_said = ""  # the classifier's fall refused by a gate: said once per episode
        self._pose_fall_why = ""
        # lost_s: the pose fall waiting (`_pose_fall_at`) is a person who fell out of the pose
        # stage's sight (`PeopleSeen.fell_out`): why, and the tick that last found them (once).
        self._fell_out = ""
        self._fell_out_at: float | None = None

    def _smoothed_above(self) -> bool:
        return self.scores.level() >= self.threshold

    def update(
        self,
        score: float,
        t: float,
        centre_frame: np.ndarray | None = None,
        p_down: float | None = None,
        evidence: np.ndarray | None = None,
    ) -> list[FallEvent]:
        """Feed one window's fall (and, if the model has one, down) probability at detector time
        `t`; return the events it causes (0 or 1). `centre_frame` is the window's centre frame as
        the model saw it (RGB); `evidence` the same moment at camera resolution (BGR), if kept.
        Pose verdicts up to `t` come first, through `on_pose`, in time order."""
        events = self._update(score, t, centre_frame, p_down, evidence)
        if self.record is not None:
            self.record.window(self.gates(t, score, p_down))
        return events

    def gates(self, t: float, score: float, p_down: float | None) -> Gates:
        """What the detector knows after a window of P(falling) `score`, P(down) `p_down` at `t`
        (`Gates`)."""
        waiting = self._candidate or self._lost  # (the gate's candidate, else lost_s's)
        state = ("alarm" if self._open is not None else "candidate" if waiting else
                 "cooldown" if t < self._cooldown_until else "watching")  # fmt: skip
        confirm = waiting.level() if waiting is not None else None
        up = self.scores.up_level(t) if self.cfg.up_before_s else None
        level = self.scores.level()
        return Gates(t, score, p_down, level, state, confirm, up, self._cnn_may_start(t))

    def _decide(self, t: float, reason: str, text: str) -> None:
        """One decision about a possible fall at `t`: ALARM or a refusal (`decisions.REASONS`),
        to the debug log, the count per reason and the record."""
        line = f"{'alarm' if reason == ALARM else 'no alarm'}: {text}"
        if reason != ALARM:
            self.counts.refused[reason] = self.counts.refused.get(reason, 0) + 1
        log.debug("%s: %.1f: %s", self.camera, t - self.origin, line)
        if self.record is not None:
            self.record.decision(Decision(t, reason, line))

    def _at(self, t: float) -> str:
        return f"{t - self.origin:.1f} s"

    def _update(
        self,
        score: float,
        t: float,
        centre_frame: np.ndarray | None,
        p_down: float | None,
        evidence: np.ndarray | None,
    ) -> list[FallEvent]:
        self.last_score = score
        self.scores.feed(t, score, p_down)
        if self.trace is not None:
            self.trace.append((t, score, p_down))
        newest = self.seen.newest()
        if self.lying_at is not None and score >= self.threshold and newest is not None:
            at, seen = newest
            if t - at <= 1.0:  # (a person found around this window)
                found = [one for one in seen if one.down] or seen
                self.lying_at.extend((t, one.at, "classifier") for one in found)
        if self._pose_fall_at is not None and self._open is not None:
            self._pose_fall_at = None  # (the fall in progress)
        elif self._pose_fall_at is not None and t >= self._cooldown_until:
            # (a pose-confirmed fall during the cooldown waits for its end: never thrown away)
            at, self._pose_fall_at = self._pose_fall_at, None
            fell_out, self._fell_out = self._fell_out, ""
            if fell_out:  # (refused, a lost person leaves the classifier's candidate as it is)
                ctx = self._context(t, lost=True)
                if not ctx.refusal:
                    self._candidate = None
                    return [self._start(score, t, centre_frame, self._fell_out_at, evidence,
                                        ctx=ctx, by=fell_out)]  # fmt: skip
            else:
                self._candidate = None
                log.info("%s: the pose rules confirmed a fall at %.1f", self.camera, at)
                ctx = self._context(t)
                if ctx.refusal:
                    return []
                who = f"person {self.seen.person[0]}: " if self.seen.person else ""
                by = (f"the pose rules confirmed a fall at {self._at(at)} "
                      f"({who}{self._pose_fall_why})")  # fmt: skip
                return [self._start(score, t, centre_frame, evidence=evidence, ctx=ctx, by=by)]
        ev = self._open
        if ev is None:
            if self._lost is not None:
                started = self._confirm_lost(score, t, p_down)
                if started:
                    return started
            if self._candidate is not None:
                return self._confirm(score, t, p_down)
            above = t >= self._cooldown_until and self._smoothed_above()
            up = self._up_before(t) if above and self._may_wait(p_down) else None
            if up is not None and self._lost is None and not self._cnn_may_start(t):
                frame = None if centre_frame is None else centre_frame.copy()
                self._lost = Candidate(t, score, frame, evidence, up=up)
            if above and self._cnn_may_start(t):
                if not self.cfg.confirm_s or p_down is None:
                    ctx = self._context(t)
                    if ctx.refusal:
                        return []
                    level = self.scores.level()
                    by = (f"the classifier's smoothed P(fall) {level:.2f} reached the threshold "
                          f"{self.threshold:.2f}")  # fmt: skip
                    return [self._start(score, t, centre_frame, evidence=evidence, ctx=ctx, by=by)]
                if not self._was_up(t):
                    return []
                frame = None if centre_frame is None else centre_frame.copy()
                self._candidate = Candidate(t, score, frame, evidence, up=up)
            else:
                self._refusing = False
                self._said = ""
                self._gated(t)
            return []
        ev.peak_score = max(ev.peak_score, score)
        if self._escalation_due(ev, t):
            return [self._escalate(score, t)]
        if self.cfg.latch:
            if t - ev.started >= self.cfg.clear_after_s:
                return [self._end(score, t, "timeout")]
            return []
        # A three-state model ends a fall when the person is up again (neither falling nor down).
        up = p_down is not None and 1.0 - score - p_down >= 0.5
        low = up if p_down is not None else score < self.threshold
        ev.below = ev.below + 1 if low else 0
        if ev.below >= self.cfg.end_after:
            return [self._end(score, t, "got_up" if p_down is not None else "recovered")]
        if t - ev.started >= self.cfg.max_event_s:
            return [self._end(score, t, "max_duration")]
        return []

    def _gated(self, t: float) -> None:
        """A classifier's fall (smoothed above the threshold) that `update` did not take up: the
        cooldown, or the decision (`cnn_off`, `no_pose_down`); said once per episode."""
        if not self._smoothed_above():
            self._gate_said = ""
            return
        level = self.scores.level()
        if t < self._cooldown_until:
            left = self._cooldown_until - t
            why = ("cooldown", f"the classifier's fall (smoothed P(fall) {level:.2f}) came "
                   f"{self.cfg.cooldown_s - left:.1f} s after the last fall ended "
                   f"(detection.cooldown_s {self.cfg.cooldown_s:g})")  # fmt: skip
        elif self.decision == "pose":
            why = ("cnn_off", f"the classifier's fall (smoothed P(fall) {level:.2f}): decision "
                   "pose lets only the pose rules raise one")  # fmt: skip
        else:
            why = ("no_pose_down", f"the classifier's fall (smoothed P(fall) {level:.2f}) while "
                   f"the pose rules saw nobody down in the last {POSE_DOWN_S:g} s (decision "
                   f"{self.decision})")  # fmt: skip
        if self._gate_said != why[0]:
            self._gate_said = why[0]
            self._decide(t, *why)

    def on_pose(self, t: float, verdict: PoseVerdict) -> list[FallEvent]:
        """Feed one pose tick's verdict at detector time `t` (before the windows after it):
        someone down opens the `both`/`combined` gate for POSE_DOWN_S from `t`; a confirmed pose
        fall raises an event with the next window (whose picture it carries), if `decision` lets
        a pose fall raise one; the fallen person seen up again ends the open event (`got_up`,
        with `down_s`). Every verdict is fed once: none is overwritten unseen."""
        seen = self.seen.feed(t, verdict, raises=self.decision in POSE_RAISES)
        if self.lying_at is not None:
            self.lying_at.extend((t, s.at, "pose") for s in seen if s.down)
        if self.record is not None:
            self.record.pose(t, verdict)
        if self.decision != "cnn":
            for reason, text in self._pose_notes.update(verdict):
                self._decide(t, reason, text)
        if verdict.new_fall:
            self._pose_fall_why = ", ".join(sorted(set(verdict.reasons)))
        if verdict.new_fall and self.decision not in POSE_RAISES:
            self._decide(t, "pose_off", f"the pose rules confirmed a fall ({self._pose_fall_why}): "
                         f"decision {self.decision} lets it raise nothing alone")  # fmt: skip
        if verdict.new_fall and self.decision in POSE_RAISES:
            self._pose_fall_at, self._fell_out = t, ""  # (the rules' own fall, not a lost one)
        elif self._fell_out and verdict.seen:  # (waiting for the cooldown's end)
            self._pose_fall_at, self._fell_out = None, ""
            self._decide(
                t,
                "found_again",
                "the person lost after a descent at "
                f"{self._at(self._fell_out_at or t)} was found again (person.lost_s)",
            )
        elif self._pose_fall_at is None and self.decision in POSE_RAISES:
            self._fell_out_of_sight(t)
        ev = self._open
        if ev is not None and verdict.new_fall:
            ev.got_up = False  # down again while the alarm is still on: escalates as before
        if ev is not None and verdict.got_up:
            ups = dict(verdict.got_up)
            mine = ev.person[0] if ev.person is not None else None
            if mine is None or mine in ups:  # (another person getting up ends nothing)
                ev.got_up = True  # up again: no "still on the floor" for this fall
                if self.cfg.end_when_up:
                    down_s = ups[mine] if mine is not None else max(ups.values())
                    return [self._end(self.last_score, t, "got_up", down_s)]
        return []

    def _fell_out_of_sight(self, t: float) -> None:
        """lost_s: a person the pose rules saw go down (a sudden descent) whom the working
        stage lost right after, in a picture neither black nor frozen, is a pose fall
        (`PeopleSeen.fell_out`) when the classifier read someone up before it (mean P(up) over
        LOST_UP_S, as the classifier's lost path asks: a person already lying there, re-found
        by a passer-by's track, is no fall). Once per tick that last found them, none while a
        fall is open; one waiting for a cooldown's end is dropped when someone is found again
        (`on_pose`). Stage `descent` is a sudden descent in the rules' own path; with a head in
        mode `decide` or a sequence model it is their "down", not yet confirmed."""
        who = self.seen.fell_out(t) if self.pose_ok and self.picture_ok else None
        found = self.seen.found
        if who is None or found is None or self._open is not None or found[0] == self._fell_out_at:
            return
        self._fell_out_at = found[0]  # (judged once: P(up) before it is dropped in time)
        up = self.scores.up_level(found[0], LOST_UP_S, short=True)
        if up is None or up < CONFIRM_LEVEL:
            return
        self._pose_fall_at = t
        self._fell_out = (
            f"the pose rules saw person {who.track} down after a sudden descent at "
            f"{self._at(found[0])} ({', '.join(who.why) or 'down'}) and the pose stage found "
            f"nobody for {t - found[0]:.1f} s since (person.lost_s {self.seen.lost_s:g}, at least "
            f"{FELL_OUT_S:g} s); the classifier read them up "
            f"before it (mean P(up) {up:.2f})"
        )
        log.info("%s: person %d fell out of the pose stage's sight at %.1f", self.camera,
                 who.track, found[0])  # fmt: skip

    def _escalation_due(self, ev: _Open, t: float) -> bool:
        """Whether the open fall `ev` is still on the floor `escalate_after_s` after its start
        (and has not escalated yet): the newest pose tick, at most POSE_DOWN_S old, saw someone
        down or fallen; when it found nobody (a person lying out of its sight: lost_s), or
        without a working person stage, the model's mean P(falling or down) over POSE_DOWN_S is
        at least CONFIRM_LEVEL (a model without a `down` class: never)."""
        after = self.cfg.escalate_after_s
        if not after or ev.escalated or ev.got_up or t - ev.started < after:
            return False
        lying = self.seen.still_lying(t) if self.seen.fed and self.pose_ok else None
        if lying is not None:
            return lying
        level = self.scores.not_up_level(t)
        return level is not None and level >= CONFIRM_LEVEL

    def _escalate(self, score: float, t: float) -> FallEvent:
        ev = self._open
        if ev is None:
            raise RuntimeError("no fall event is open")
        ev.escalated = True
        self.counts.escalation += 1
        down_s = t - ev.started
        log.warning("%s: still on the floor %.0f s after the fall: escalation, event %s",
                    self.camera, down_s, ev.event_id)  # fmt: skip
        return replace(self._event("escalation", score, t), down_s=down_s)

    def _cnn_may_start(self, t: float) -> bool:
        """Whether the classifier may start an event or a candidate now (`decision`; alone
        while the camera's pose stage is failing, `pose_ok` False)."""
        if not self.pose_ok:
            return True
        if self.decision == "pose":
            return False
        if self.decision in ("both", "combined"):
            return self.seen.down_lately(t)
        return True

    def _may_wait(self, p_down: float | None) -> bool:
        """With `lost_s`, a descent the gate refuses may still be confirmed by lost_s alone
        (`_confirm_lost`): a person who falls out of the pose model's sight is found upright
        until the descent and lost only after it."""
        return bool(self.seen.lost_s and self.cfg.confirm_s and p_down is not None and self.seen.fed
                    and self.decision in ("both", "combined"))  # fmt: skip

    def _up_before(self, t: float) -> float | None:
        """lost_s: the classifier's mean P(up) before a descent at `t` (`ScoreHistory.up_level`)
        when it and the pose stage (someone upright in the same time) both saw someone up, else
        None: a descent the lost path may confirm."""
        up = self.scores.up_level(t, LOST_UP_S, short=True)
        if up is None or up < CONFIRM_LEVEL or not self.seen.seen_up_before(t, UP_BEFORE_GAP_S):
            return None
        return up

    def _was_up(self, t: float) -> bool:
        """Whether the person was up before a descent seen at `t` (always, with up_before_s 0)."""
        if not self.cfg.up_before_s:
            return True
        up = self.scores.up_level(t)
        if up is None or up >= CONFIRM_LEVEL:
            return True
        if not self._refusing:
            self._refusing = True
            self.counts.not_up_before += 1
            log.info(
                "%s: descent at %.1f but nobody was up before it (mean P(up) %.2f): no alarm",
                self.camera, t, up,
            )  # fmt: skip
            self._decide(t, "not_up_before", f"nobody was up before the descent (mean P(up) "
                         f"{up:.2f} over the {self.cfg.up_before_s:g} s before it, under "
                         f"{CONFIRM_LEVEL})")  # fmt: skip
        return False

    def _what(self) -> str:
        return "P(down)" if self.cfg.confirm_on == "down" else "P(falling or down)"

    def _confirm_lost(self, score: float, t: float, p_down: float | None) -> list[FallEvent]:
        """Feed the descent the gate refused (`_lost`) one window: a `start` once the person
        stayed down confirm_s and the pose stage lost them at it (`_lost_ready`); dropped
        CONFIRM_GRACE_S after confirm_s (the gate's refusal was said at the descent: `_gated`)."""
        c = self._lost
        assert c is not None  # called only with one
        confirm_s = self.cfg.confirm_s or 0.0
        stayed = c.stayed(score, t, p_down, self.cfg)
        if t - c.started > confirm_s + CONFIRM_GRACE_S:
            self._lost = None
            return []
        if t - c.started < confirm_s or stayed < CONFIRM_LEVEL or not self._lost_ready(c, t):
            return []
        self._lost = self._candidate = None
        ctx = self._context(t, lost=True)
        if ctx.refusal:
            return []
        by = (
            f"the classifier saw a descent at {self._at(c.started)} and the person stayed down "
            f"(mean {self._what()} {stayed:.2f} over {confirm_s:g} s)" + self._lost_why(c)
        )
        return [self._start(c.peak_score, t, c.frame, started=c.started, evidence=c.evidence,
                            ctx=ctx, by=by)]  # fmt: skip

    def _lost_ready(self, c: Candidate, t: float) -> bool:
        """Whether the lost path passes candidate `c` at `t`: both saw the person up before its
        descent (`c.up`) and the working person stage lost everyone at it (`PeopleSeen.lost_at`)
        in a picture that is neither black nor frozen (`picture_ok`)."""
        ok = self.pose_ok and self.picture_ok
        return c.up is not None and ok and self.seen.lost_at(c.started, t)

    def _lost_why(self, c: Candidate) -> str:
        found = self.seen.found
        if c.up is None or found is None:
            return ""
        return (f", the classifier read them up before it (mean P(up) {c.up:.2f}), and the pose "
                f"stage found nobody from {self._at(found[0])} on (person.lost_s "
                f"{self.seen.lost_s:g})")  # fmt: skip

    def _confirm(self, score: float, t: float, p_down: float | None) -> list[FallEvent]:
        c = self._candidate
        assert c is not None  # called only with a candidate
        confirm_s = self.cfg.confirm_s or 0.0
        stayed = c.stayed(score, t, p_down, self.cfg)
        what = self._what()
        # (the gate open again, or, shut since the descent, the person lost at it: lost_s)
        gate = self._cnn_may_start(t)
        lost = not gate and self._lost_ready(c, t)
        if t - c.started >= confirm_s and stayed >= CONFIRM_LEVEL and (gate or lost):
            self._candidate = self._lost = None
            ctx = self._context(t, lost)
            if ctx.refusal:
                return []
            by = (f"the classifier saw a descent at {self._at(c.started)} and the person stayed "
                  f"down (mean {what} {stayed:.2f} over {confirm_s:g} s)")  # fmt: skip
            by += self._lost_why(c) if lost else ""
            return [self._start(c.peak_score, t, c.frame, started=c.started, evidence=c.evidence,
                                ctx=ctx, by=by)]  # fmt: skip
        if t - c.started >= confirm_s and stayed >= CONFIRM_LEVEL:
            c.gated = max(c.gated or 0.0, stayed)  # down, but the decision's gate is shut
        if t - c.started > confirm_s + CONFIRM_GRACE_S:
            self._candidate = None
            if c.gated is not None:
                log.info("%s: descent at %.1f, the person stayed down, but the pose rules saw "
                         "nobody down: no alarm", self.camera, c.started)  # fmt: skip
                self._decide(t, "no_pose_down", f"the classifier saw a descent at "
                             f"{self._at(c.started)} and the person stayed down (mean {what} "
                             f"{c.gated:.2f}) while the pose rules saw nobody down (decision "
                             f"{self.decision})")  # fmt: skip
                return []
            self.counts.unconfirmed += 1
            log.info("%s: descent at %.1f not followed by lying: no alarm", self.camera, c.started)
            self._decide(t, "unconfirmed", f"the descent at {self._at(c.started)} was not "
                         f"followed by lying (mean {what} {stayed:.2f} over {confirm_s:g} s, "
                         f"under {CONFIRM_LEVEL})")  # fmt: skip
        return []

    def acknowledge(self, t: float) -> list[FallEvent]:
        """Someone responded: end the open event (`acknowledged`); nothing if none is open."""
        if self._open is None:
            self._rate.log(log, logging.INFO, "%s: acknowledgement with no fall open: ignored",
                           self.camera)  # fmt: skip
            return []
        return [self._end(self.last_score, t, "acknowledged")]

    def close(self, t: float, keep_latched: bool = False) -> list[FallEvent]:
        """End an open event (shutdown or camera gone); `keep_latched`: a latched one stays
        open (the daemon stops; the journal keeps it for the next start to `restore`)."""
        if self._open is None or (keep_latched and self.cfg.latch):
            return []
        return [self._end(self.last_score, t, "shutdown")]

    def restore(self, event: FallEvent, t: float, now_unix: float, escalated: bool = False) -> bool:
        """Hold an earlier run's latched `start` open again at detector time `t` (Unix time
        `now_unix`): acknowledgement and clear_after_s apply as if this run had raised it, and
        escalate_after_s (`escalated`: its escalation went out already, never twice).
        False (nothing held) when unlatched, past clear_after_s, or another event is open."""
        age = now_unix - event.started_at
        if not self.cfg.latch or self._open is not None or age >= self.cfg.clear_after_s:
            return False
        self._open = _Open(event.event_id, t - max(0.0, age), event.started_at,
                           event.peak_score, person=event.person,
                           escalated=escalated)  # fmt: skip
        self._candidate = self._lost = None
        log.info("%s: fall %s still latched from the last run (%.0f s ago)", self.camera,
                 event.event_id, age)  # fmt: skip
        return True

    def _start(
        self,
        score: float,
        t: float,
        frame: np.ndarray | None,
        started: float | None = None,
        evidence: np.ndarray | None = None,
        *,
        ctx: Context,
        by: str,
    ) -> FallEvent:
        # Stable and unique: the same camera never starts two events at the same instant, and a
        # replay of the same file gives the same ids.
        started = t if started is None else started
        started_at = self.wall(started)
        event_id = str(uuid.uuid5(_NAMESPACE, f"{self.device_id}/{self.camera}/{started_at:.3f}"))
        self._open = _Open(event_id, started, started_at, score, person=ctx.person)
        self._candidate = self._lost = None  # (a fall in progress: no descent waits)
        self._said = ""
        self.counts.start += 1
        log.info("%s: fall started (score %.2f) event %s", self.camera, score, event_id)
        self._decide(t, ALARM, by)
        event = replace(self._event("start", score, t), others_present=ctx.others,
                        zone=ctx.zone, flag=ctx.flag)  # fmt: skip
        if not self.keeps_pictures:
            return event
        return replace(event, evidence=Evidence(evidence, frame))

    def _context(self, t: float, lost: bool = False) -> Context:
        """What the people seen last say about a fall starting at `t` (`PeopleSeen.context`); a
        refusal is logged and counted once while it goes on."""
        ctx = self.seen.context(t, lost, self.pose_ok)
        if ctx.refusal and self._said != ctx.refusal:
            self._said = ctx.refusal
            setattr(self.counts, ctx.counter, getattr(self.counts, ctx.counter) + 1)
            log.info("%s: fall at %.1f: no alarm: %s", self.camera, t, ctx.refusal)
            self._decide(t, ctx.counter, ctx.refusal)
        return ctx

    def _end(self, score: float, t: float, reason: str, down_s: float | None = None) -> FallEvent:
        event = replace(self._event("end", score, t, reason), down_s=down_s)
        self._open = None
        self.scores.recent.clear()
        self._cooldown_until = t + self.cfg.cooldown_s
        self.counts.end += 1
        self.counts.by_reason[reason] = self.counts.by_reason.get(reason, 0) + 1
        log.info("%s: fall ended (%s) event %s", self.camera, reason, event.event_id)
        return event

    def _event(self, kind: str, score: float, t: float, reason: str | None = None) -> FallEvent:
        ev = self._open
        if ev is None:
            raise RuntimeError("no fall event is open")
        # A start is stamped by the wall clock now; an end by the start's stamp plus the time
        # that passed (monotonic): never before its start, whatever the wall clock did since.
        at = self.wall(t) if kind == "start" else ev.started_at + max(0.0, t - ev.started)
        return FallEvent(
            ev.event_id, kind, self.camera, self.device_id, at, ev.started_at, score,
            ev.peak_score, self.model, None, reason, person=ev.person,
        )  # fmt: skip
