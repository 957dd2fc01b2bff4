"""`edge-hf replay --explain`: why a camera did or did not alarm, second by second.

Each camera's detector keeps a `Recording` while the file plays (`attach`): every window's gates
(`decisions.Gates`), every pose tick's people with what the rules read from them
(`edge_hf.core.posefall.Seen`) and every decision (`decisions.Decision`: the lines the daemon
writes to its debug log and counts per reason in /metrics). `report` prints one row per second
of the signals that fed the decision, each decision under the second it was taken in, and
ends with one line: the alarm and what raised it, or "no alarm:" and every reason there was
(a clip with no decision at all says what stayed under its threshold). `--timeline-png` draws
the same recording (`edge_hf.daemon.timeline`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from edge_hf.core.posefall import STAGES, PoseVerdict, Seen
from edge_hf.core.zones import Zones
from edge_hf.daemon.config import DecisionRule
from edge_hf.daemon.decisions import ALARM, REASONS, Decision, Gates
from edge_hf.daemon.events import FallDetector
from edge_hf.daemon.pipeline import Pipeline
from edge_hf.daemon.scores import CONFIRM_LEVEL

STATES = ("watching", "cooldown", "candidate", "alarm")  # the more advanced, the later
# The refusals of the classifier's own path (the rest are the pose rules' and the context's).
CNN_REASONS = ("not_up_before", "unconfirmed", "no_pose_down", "cnn_off", "cooldown")
COLUMNS = (
    "   s  P(fall) P(down) level state     cnn  | ppl torso aspect  hips head pose stage       "
    "zone       others | up   confirm"
)


@dataclass
class Recording:
    """What one camera's detector saw and decided during a replay (`FallDetector.record`)."""

    camera: str
    threshold: float
    origin: float  # detector time of the file's 0 s
    about: str  # the camera's decision settings, one line
    mode: DecisionRule  # person.decision ("cnn" without the person stage)
    zones: Zones
    pose_on: bool
    windows: list[Gates] = field(default_factory=list)
    ticks: list[tuple[float, PoseVerdict]] = field(default_factory=list)
    decisions: list[Decision] = field(default_factory=list)

    def window(self, gates: Gates) -> None:
        self.windows.append(gates)

    def pose(self, t: float, verdict: PoseVerdict) -> None:
        self.ticks.append((t, verdict))

    def decision(self, decision: Decision) -> None:
        self.decisions.append(decision)

    def s(self, t: float) -> float:
        """Seconds into the file of detector time `t`."""
        return t - self.origin

    def zone_of(self, person: Seen) -> str | None:
        """The zone `person` lies in (its body point), if any."""
        return next((z.name for z in self.zones.zones if z.contains(person.at)), None)


def attach(pipeline: Pipeline, origin: float) -> list[Recording]:
    """A `Recording` on each camera's detector of `pipeline` (before the replay)."""
    out = []
    for cam in pipeline.cameras:
        det = cam.detector
        rec = Recording(cam.cfg.name, det.threshold, origin, _about(det), det.decision,
                        det.seen.zones, det.seen.when_others is not None)  # fmt: skip
        det.record, det.origin = rec, origin
        out.append(rec)
    return out


def _about(det: FallDetector) -> str:
    c = det.cfg
    smooth = f"{c.k} of the last {c.n} windows" if c.smoothing == "k_of_n" else f"median of {c.n}"
    on = "P(down)" if c.confirm_on == "down" else "P(falling or down)"
    confirm = f"{c.confirm_s:g} s (mean {on} >= {CONFIRM_LEVEL})" if c.confirm_s else "off"
    up = f"{c.up_before_s:g} s" if c.up_before_s else "off"
    line = (f"threshold {det.threshold:.2f} ({smooth}), confirm_s {confirm}, up_before_s {up}, "
            f"cooldown_s {c.cooldown_s:g}")  # fmt: skip
    if det.seen.when_others is None:
        return line + "; person stage off (the classifier decides alone)"
    zones = ", ".join(f"{z.name} ({z.kind})" for z in det.seen.zones.zones) or "none"
    lost = f"{det.seen.lost_s:g} s" if det.seen.lost_s and c.confirm_s else "off"
    return (f"{line}; person stage: decision {det.decision}, lost_s {lost}, when_others_present "
            f"{det.seen.when_others}, zones: {zones}")  # fmt: skip


# ------------------------------------------------------------------ the people of a tick


def main_person(seen: Iterable[Seen]) -> Seen | None:
    """The person a row speaks of: the one furthest into the rules (fallen before descent
    before slow ... before upright), the pose model's surest among equals."""
    return max(seen, key=lambda s: (_rank(s.stage), s.score or 0.0), default=None)


def _rank(stage: str) -> int:
    return STAGES.index(stage) if stage in STAGES else -1


def others_upright(seen: Sequence[Seen], main: Seen | None) -> int:
    return sum(1 for s in seen if s.upright and (main is None or s.track != main.track))


# ------------------------------------------------------------------ the report


def _f(x: float | None, fmt: str = "{:.2f}", width: int = 4) -> str:
    return (fmt.format(x) if x is not None and math.isfinite(x) else "-").rjust(width)


def _row(rec: Recording, s: int, gates: list[Gates], ticks: list[PoseVerdict]) -> str:
    downs = [g.p_down for g in gates if g.p_down is not None]
    state = max((g.state for g in gates), key=STATES.index, default="-")
    ups = [g.up for g in gates if g.up is not None]
    confirms = [g.confirm for g in gates if g.confirm is not None]
    gate = "-" if rec.mode == "cnn" else "open" if any(g.cnn_may for g in gates) else "shut"
    cnn = (
        f"{_f(max((g.p_fall for g in gates), default=None), width=7)} "
        f"{_f(max(downs, default=None), width=7)} "
        f"{_f(max((g.level for g in gates), default=None), width=5)} {state:9s} {gate:4s}"
    )
    every = [p for v in ticks for p in v.seen]
    main = main_person(every)
    people = max((len(v.seen) for v in ticks), default=None)
    if main is None:
        person = f"{_f(people, '{:d}', 3)}" + " " * 53
    else:
        zone = rec.zone_of(main) or "-"
        others = max(others_upright(v.seen, main) for v in ticks)
        person = (
            f"{_f(people, '{:d}', 3)} {_f(main.torso_deg, '{:.0f}°', 5)} "
            f"{_f(main.aspect, width=6)} {_f(main.hip_drop, '{:+.2f}', 5)} "
            f"{_f(main.head_p)} {_f(main.score)} {main.stage or '-':11s} {zone[:10]:10s} "
            f"{others:6d}"
        )
    if not ticks and rec.pose_on:
        person = "  0" + " " * 53
    gates_txt = f"{_f(min(ups, default=None))} {_f(max(confirms, default=None), width=7)}"
    return f"{s:4d} {cnn} | {person} | {gates_txt}"


def report(rec: Recording) -> str:
    """The explanation of one camera: settings, a row per second with the decisions under it,
    and the verdict line last."""
    lines = [f"{rec.camera}: {rec.about}", COLUMNS]
    ends = [rec.s(g.t) for g in rec.windows] + [rec.s(t) for t, _ in rec.ticks]
    last = math.floor(max(ends, default=0.0))
    by_second: dict[int, tuple[list[Gates], list[PoseVerdict], list[Decision]]] = {
        s: ([], [], []) for s in range(last + 1)
    }
    for g in rec.windows:
        by_second[max(0, math.floor(rec.s(g.t)))][0].append(g)
    for t, v in rec.ticks:
        by_second[max(0, math.floor(rec.s(t)))][1].append(v)
    for d in rec.decisions:
        by_second[min(last, max(0, math.floor(rec.s(d.t))))][2].append(d)
    for s, (gates, ticks, decisions) in by_second.items():
        lines.append(_row(rec, s, gates, ticks))
        lines += [f"  -> {rec.s(d.t):.1f} s {d.line}" for d in decisions]
    lines.append(verdict(rec))
    return "\n".join(lines)


def verdict(rec: Recording) -> str:
    """The one line that ends an explanation: what raised the alarm, or every reason none was
    raised, the most decisive first (REASONS' order), with what stayed under its threshold when
    the classifier's path or the pose rules took no decision."""
    alarms = [d for d in rec.decisions if d.reason == ALARM]
    if alarms:
        first, more = alarms[0], f" ({len(alarms)} alarms)" if len(alarms) > 1 else ""
        what = first.line.removeprefix("alarm: ")
        return f"{rec.camera}: alarm at {rec.s(first.t):.1f} s: {what}{more}"
    said: dict[str, list[Decision]] = {}
    for d in rec.decisions:
        said.setdefault(d.reason, []).append(d)
    parts = []
    for _, ds in sorted(said.items(), key=lambda kv: list(REASONS).index(kv[0])):
        times = ", ".join(f"{rec.s(d.t):.1f}" for d in ds[:3]) + (", ..." if len(ds) > 3 else "")
        parts.append(f"{ds[-1].line.removeprefix('no alarm: ')} (at {times} s)")
    if not any(r in CNN_REASONS for r in said):
        parts.append(_classifier_quiet(rec))
    if rec.pose_on and rec.mode != "cnn" and all(r in CNN_REASONS for r in said):
        parts.append(_pose_quiet(rec))
    return f"{rec.camera}: no alarm: " + "; ".join(p for p in parts if p)


def _classifier_quiet(rec: Recording) -> str:
    """Why the classifier's path took no decision."""
    if not rec.windows:
        return "no window was classified (the file is shorter than one window)"
    if rec.windows[-1].state == "candidate":
        return ("the classifier's descent was still waiting for the person to stay down when "
                "the file ended (try --hold-end-s)")  # fmt: skip
    if rec.mode == "pose":
        return "decision pose: the classifier raises no fall"
    peak = max(rec.windows, key=lambda g: g.level)
    under = "under" if peak.level < rec.threshold else "at"
    return (f"the classifier's smoothed P(fall) peaked at {peak.level:.2f} at "
            f"{rec.s(peak.t):.1f} s, {under} the threshold {rec.threshold:.2f}")  # fmt: skip


def _pose_quiet(rec: Recording) -> str:
    """Why the pose rules took no decision."""
    if not rec.ticks:
        return "the person stage made no pose tick"
    if not any(v.seen for _, v in rec.ticks):
        return "the pose model found nobody"
    stages = {s.track: s for _, v in rec.ticks for s in v.seen}  # each person's last tick
    going = [s for s in stages.values() if s.stage == "descent"]
    if going:
        return (f"person {going[0].track} was still down after a sudden descent when the file "
                "ended, short of person.confirm_s (try --hold-end-s)")  # fmt: skip
    if not any(s.down for _, v in rec.ticks for s in v.seen):
        return "the pose rules saw nobody down"
    down = [s for _, v in rec.ticks for s in v.seen if s.down]
    return f"the pose rules saw person {down[-1].track} down ({down[-1].stage}) but no fall"


def explanation(recordings: Sequence[Recording]) -> str:
    """Every camera's `report`, one after another."""
    return "\n\n".join(report(r) for r in recordings)
