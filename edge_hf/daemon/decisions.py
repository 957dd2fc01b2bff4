"""Why a camera did or did not alarm: the reasons `FallDetector` decides by, one key each.

Every decision the detector takes about a possible fall (an alarm, or a refusal and why) is a
`Decision`: a line in the debug log, a count per reason (`DetectorCounts.refused`, Prometheus
`edge_hf_no_alarm_total{reason}`) and, in `edge-hf replay --explain`, a line of the explanation
(`edge_hf.daemon.explain`). `PoseNotes` reads the pose rules' per-person stages
(`edge_hf.core.posefall.Seen.stage`) for the refusals that happen inside the rules: a "down"
the head vetoed, a person who lay down slowly, a descent too short to confirm.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from edge_hf.core.posefall import PoseVerdict, Seen

# Each refusal's key and what it means (docs/explain.md), the most decisive first: a fall the
# context refused, then the classifier's gates, then the decision, then the pose rules' own.
REASONS = {
    "in_zone": "the person lay inside an ignore zone, or outside the floor zones",
    "others_present": "others upright in view (person.when_others_present: suppress)",
    "cooldown": "a fall within detection.cooldown_s of the last fall's end",
    "not_up_before": "a descent with nobody up before it (detection.up_before_s)",
    "unconfirmed": "a descent the person did not stay down after (confirm_s)",
    "no_pose_down": "the classifier's fall while the pose rules saw nobody down "
    "(decision both or combined)",
    "cnn_off": "the classifier's fall, with decision pose (only the pose rules raise one)",
    "pose_off": "a fall the pose rules confirmed, with decision cnn or both (it raises nothing "
    "alone)",
    "pose_short": "down after a sudden descent for less than person.confirm_s",
    "pose_slow": "down, but not within person.max_descent_s of standing (lying down slowly)",
    "pose_not_seen_up": "down without being seen upright first (no descent to judge)",
    "pose_vetoed": "the pose head vetoed the pose rules' down",
    "found_again": "a person lost right after a descent, found again before the alarm went out "
    "(person.lost_s)",
}
ALARM = "alarm"
FORGET_S = 10.0  # a person unseen this long is forgotten (tracks come and go for months)


@dataclass(frozen=True)
class Decision:
    """One decision at detector time `t`: `reason` ALARM or a key of REASONS, and its line
    ("alarm: ..." or "no alarm: ...")."""

    t: float
    reason: str
    line: str


@dataclass(frozen=True)
class Gates:
    """What the detector knew after one window (`FallDetector.gates`): the classifier's P(fall)
    and P(down), the smoothed level against the threshold, its state (watching, candidate,
    alarm, cooldown), the candidate's mean P(falling or down) so far, the mean P(up) the
    up-before gate reads (None: off, or too little history), and whether the decision lets the
    classifier raise a fall now."""

    t: float
    p_fall: float
    p_down: float | None
    level: float
    state: str
    confirm: float | None
    up: float | None
    cnn_may: bool


class DecisionRecord(Protocol):
    """What `edge-hf replay --explain` keeps of a detector (`edge_hf.daemon.explain.Recording`)."""

    def window(self, gates: Gates) -> None: ...

    def pose(self, t: float, verdict: PoseVerdict) -> None: ...

    def decision(self, decision: Decision) -> None: ...


def _signals(s: Seen) -> str:
    return ", ".join(s.why) or "down"


class PoseNotes:
    """The pose rules' own refusals, from each tick's people: a person entering a stage that
    raises no fall (vetoed, slow, not_seen_up) or leaving a descent before it was confirmed.
    Each (person, reason) is said once until that person is upright again."""

    def __init__(self) -> None:
        self._stage: dict[int, tuple[str, float]] = {}  # track -> (stage, when last seen)
        self._descent: dict[int, tuple[float, float]] = {}  # track -> (first, last) descent tick
        self._said: set[tuple[int, str]] = set()

    def update(self, verdict: PoseVerdict) -> list[tuple[str, str]]:
        """(reason, text) of each refusal this tick shows."""
        out = []
        for s in verdict.seen:
            before = self._stage.get(s.track, ("", 0.0))[0]
            self._stage[s.track] = (s.stage, verdict.t)
            if s.stage == "upright":
                self._said = {k for k in self._said if k[0] != s.track}
            if s.stage == "descent":
                first = self._descent.get(s.track, (verdict.t, verdict.t))[0]
                self._descent[s.track] = (first, verdict.t)
                continue
            if before == "descent" and s.stage != "fallen" and s.track in self._descent:
                first, last = self._descent.pop(s.track)
                text = (f"person {s.track} was down {last - first:.1f} s after a sudden "
                        f"descent, then {s.stage}: under person.confirm_s")  # fmt: skip
                out.append(("pose_short", text))
            self._descent.pop(s.track, None)
            note = self._note(s) if s.stage != before else None
            if note is not None and (s.track, note[0]) not in self._said:
                self._said.add((s.track, note[0]))
                out.append(note)
        gone = [k for k, (_, at) in self._stage.items() if at < verdict.t - FORGET_S]
        for k in gone:
            del self._stage[k]
            self._descent.pop(k, None)
        self._said = {k for k in self._said if k[0] in self._stage}
        return out

    @staticmethod
    def _note(s: Seen) -> tuple[str, str] | None:
        if s.stage == "vetoed":
            p = f"; head P(down) {s.head_p:.2f}" if s.head_p is not None else ""
            return "pose_vetoed", f"the pose head vetoed person {s.track}'s down ({_signals(s)}{p})"
        if s.stage == "slow":
            return "pose_slow", (
                f"person {s.track} went down slowly ({_signals(s)}): the pose rules count a fall "
                "only within person.max_descent_s of standing"
            )
        if s.stage == "not_seen_up":
            return "pose_not_seen_up", (
                f"person {s.track} was down ({_signals(s)}) without being seen upright first: "
                "the pose rules had no descent to judge"
            )
        return None
