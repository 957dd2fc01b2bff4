"""What a camera's person stage saw lately, as its fall decision reads it (`FallDetector`).

Fed every pose tick's verdict in time order, it answers the questions the decision asks: did the
pose rules see someone down in the last POSE_DOWN_S (the `both`/`combined` gate); did the stage
lose everyone at a classifier's descent, or right after the pose rules saw someone go down
(`person.lost_s`: a person who falls out of its sight);
and, for a fall about to start, who it is about, where they lie (zones), who else is upright in
view (`person.when_others_present`). "Still on the floor" (escalation) reads the newest tick.
People are in 0-1 of the camera's view (`Seen`).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from edge_hf.core.posefall import PoseVerdict, Seen
from edge_hf.core.zones import Zones

POSE_DOWN_S = 3.0  # decisions `both`, `combined`: the pose rules saw someone down this recently
OTHERS_S = 1.0  # others present: the most upright people at a pose tick this long before a start
LOST_NEAR_S = 1.0  # person.lost_s: the pose stage last found someone this close to the descent
LOST_UP_S = 2.0  # person.lost_s: the person was seen up over this before the descent
LOST_EDGE = 0.02  # person.lost_s: upright this near the view's side when last found: walked out
LOST_TICKS = 3  # person.lost_s: at least this many pose ticks found nobody (one miss is no loss)
# fell_out: nobody found for at least this long (and lost_s) after a person seen in a descent:
# someone crouching behind furniture a moment (picking something up) is found again sooner.
FELL_OUT_S = 3.0

Who = tuple[int, tuple[float, float, float, float]]  # (track id, box)


@dataclass(frozen=True)
class Context:
    """What the people seen last say about a fall about to start (`PeopleSeen.context`): who
    it is about, the others upright in view, the zone they lie in, the flag it carries, and why
    it raises nothing (`refusal`, counted under `counter`: in_zone, others_present)."""

    person: Who | None = None
    others: int | None = None
    zone: str | None = None
    flag: str | None = None
    refusal: str | None = None
    counter: str = ""


class PeopleSeen:
    """One camera's pose ticks, as far back as the decision looks."""

    def __init__(self, zones: Zones | None, when_others: str | None, lost_s: float) -> None:
        # The camera's zones, and person.when_others_present (None: the person stage is off).
        self.zones, self.when_others, self.lost_s = zones or Zones(), when_others, lost_s
        self.fed = False  # a pose verdict came (the person stage is on)
        self._ticks: deque[tuple[float, list[Seen]]] = deque()  # the last POSE_DOWN_S of ticks
        self.down_at = float("-inf")  # the newest tick that saw someone down
        self.person: Who | None = None  # the one seen down or fallen last
        # (t, whether anyone was down or fallen) of the newest pose tick: "still on the floor"
        self.lying: tuple[float, bool] = (float("-inf"), False)
        # lost_s: when the stage last found someone, and who (the best-scoring); the last tick
        # that found someone upright.
        self.found: tuple[float, Seen] | None = None
        self._found_with: list[Seen] = []  # everyone that tick found (the others, when lost)
        # lost_s: the person that tick found down after a sudden descent (`fell_out`), if any
        self._found_falling: Seen | None = None
        self._empty = 0  # pose ticks in a row that found nobody
        self._upright_at = float("-inf")
        self._newest = float("-inf")  # the newest tick fed (found someone or not)

    def feed(self, t: float, verdict: PoseVerdict, raises: bool) -> list[Seen]:
        """Take one pose tick at detector time `t` (`raises`: the decision lets a pose fall
        raise an event, so a new fall names its person). Its people, with a fallen person the
        pose model no longer finds kept where the rules last had them."""
        self.fed = True
        self._newest = max(self._newest, t)
        seen = list(verdict.seen)
        if verdict.person is not None and (verdict.down or verdict.fall):
            track, (x0, y0, x1, y1) = verdict.person
            if all(s.track != track for s in seen):
                centre = ((x0 + x1) / 2, (y0 + y1) / 2)
                seen.append(Seen(track, (x0, y0, x1, y1), centre, down=True))
        self._ticks.append((t, seen))
        while self._ticks and self._ticks[0][0] < t - POSE_DOWN_S:
            self._ticks.popleft()
        if t >= self.lying[0]:
            self.lying = (t, verdict.down or verdict.fall)
        if verdict.down or verdict.fall:
            self.person = verdict.person or self.person
        if verdict.down:
            self.down_at = max(self.down_at, t)
        self._empty = 0 if verdict.seen else self._empty + 1
        if self.lost_s and verdict.seen:
            self.found = (t, max(verdict.seen, key=lambda s: s.score or 0.0))
            self._found_with = list(verdict.seen)
            falling = [s for s in verdict.seen if s.stage == "descent"]
            self._found_falling = max(falling, key=lambda s: s.score or 0.0, default=None)
            if any(s.upright for s in verdict.seen):
                self._upright_at = t
        if verdict.new_fall and raises:
            self.person = verdict.person
        return seen

    def newest(self) -> tuple[float, list[Seen]] | None:
        """The newest pose tick kept (time, people), if any."""
        return self._ticks[-1] if self._ticks else None

    def down_lately(self, t: float) -> bool:
        """Whether the pose rules saw someone down in the POSE_DOWN_S up to `t`."""
        return t - self.down_at <= POSE_DOWN_S

    def still_lying(self, t: float) -> bool | None:
        """Whether the newest pose tick, at most POSE_DOWN_S old, saw someone down or fallen;
        None when it found nobody at all (a person lying out of its sight: it cannot tell)."""
        seen, lying = self.lying
        if not lying and self._empty and t - seen <= POSE_DOWN_S:
            return None
        return lying and t - seen <= POSE_DOWN_S

    def seen_up_before(self, t: float, gap_s: float) -> bool:
        """lost_s: whether the stage found someone upright in the LOST_UP_S before a descent at
        `t` (ending `gap_s` before it) or since."""
        return self._upright_at >= t - LOST_UP_S - gap_s

    def lost_at(self, started: float, t: float) -> bool:
        """Whether the stage lost everyone at a descent seen at `started` (`lost_s`): it last
        found someone from LOST_NEAR_S before the descent on and nobody on the ticks of the
        lost_s since, at least LOST_TICKS of them (ticks that ran: a stage that fell behind or
        stopped loses nobody, one missed tick is no loss), and that person was not upright at
        the left or right edge of the view (LOST_EDGE: walked out of it). `t`: the detector time
        asked about (the ticks fed are up to it)."""
        if not self._gone(t) or self.found is None:
            return False
        last, who = self.found
        if not _inside(who) and who.upright:
            return False  # upright at the side of the view: walked out of it
        return last >= started - LOST_NEAR_S

    def fell_out(self, t: float) -> Seen | None:
        """The person the pose rules last found down after a sudden descent (`Seen.stage`
        `descent`: down within max_descent_s of standing, not yet for their confirm_s) when the
        stage lost everyone right after (`lost_s`, as `lost_at` counts it) and has found nobody
        for FELL_OUT_S since: they fell out of its sight before the rules could confirm the fall
        (behind furniture, below the view, too small lying far away); not at the left, right or
        bottom edge of the view (LOST_EDGE: gone out of it). None: nobody did."""
        who = self._found_falling
        if who is None or not self._gone(t) or not _inside(who, bottom=True):
            return None
        assert self.found is not None  # (_gone)
        return who if min(t, self._newest) - self.found[0] >= FELL_OUT_S else None

    def _gone(self, t: float) -> bool:
        """lost_s: the stage found nobody for lost_s up to `t` since it last found someone, on
        at least LOST_TICKS ticks that ran."""
        if not self.lost_s or self.found is None:
            return False
        return min(t, self._newest) - self.found[0] >= self.lost_s and self._empty >= LOST_TICKS

    def context(self, t: float, lost: bool = False, ok: bool = True) -> Context:
        """The person a fall starting at `t` is about (the one the pose stage saw down lately;
        `lost`: the one it found last, `lost_at`), the others upright in view, the zone they
        lie in, and whether zones or `when_others_present` refuse it. Without the person stage,
        or while it fails (`ok` False), nothing is known and nothing refused (an alarm with less
        evidence)."""
        person = self.person if self.down_lately(t) else None
        gone = self.lost_who() if lost else None
        if person is None and gone is not None:
            person = (gone.track, gone.box)  # lost: who, where last found
        if self.when_others is None or not ok:
            return Context(person)
        latest: dict[int, Seen] = {}  # each person's last state (oldest ticks first)
        for at, seen in self._ticks:
            if t - at <= POSE_DOWN_S:
                latest.update((s.track, s) for s in seen)
        # Who may have fallen: the people seen down; if nobody was, everyone seen (what the
        # classifier alone may have reacted to).
        who = [s for s in latest.values() if s.down] or list(latest.values())
        if gone is not None:  # (found last, maybe more than POSE_DOWN_S ago)
            who = [s for s in who if s.track != gone.track] + [gone]
            near = self._ignore_within_reach(gone)
            if near:
                why = f"the person was lost beside {near}, where they may lie (lost_s)"
                return Context(refusal=why, counter="in_zone")
        zone = None
        if self.zones and who:
            counting = [s for s in who if self.zones.refusal(s.at) is None]
            if not counting:
                why = f"the person lay inside {self.zones.refusal(who[0].at)}"
                return Context(refusal=why, counter="in_zone")
            mine = next((s for s in counting if person and s.track == person[0]), counting[0])
            person = (mine.track, mine.box) if mine.down else person
            zone = self.zones.named(mine.at)
        faller = person[0] if person is not None else None
        others = self.others(t, faller)
        if gone is not None:  # the others when the person was last found
            others = sum(s.upright and not s.down and s.track != faller for s in self._found_with)
        if others and self.when_others == "suppress":
            who_else = "person" if others == 1 else "people"
            why = f"{others} other {who_else} upright in view (when_others_present: suppress)"
            return Context(refusal=why, counter="others_present")
        flag = "others_present" if others and self.when_others == "flag" else None
        return Context(person, others, zone, flag)

    def lost_who(self) -> Seen | None:
        """lost_s: who the stage lost, as it last found them: the person down after a sudden
        descent at that tick (`fell_out`), else the best-scoring one; None: nobody found yet."""
        if self.found is None:
            return None
        return self._found_falling or self.found[1]

    def _ignore_within_reach(self, who: Seen) -> str | None:
        """lost_s: the `ignore` zone (name) a person last found at `who` could lie in out of
        the pose stage's sight: within their own height of where they were found, in the lower
        half of their box or beside it (a bed they lay down on in the dark). None: none."""
        x0, y0, x1, y1 = who.box
        h = y1 - y0
        xs = [x0 - h + (x1 - x0 + 2 * h) * i / 8 for i in range(9)]
        ys = [y0 + h / 2 + (h / 2) * j / 4 for j in range(5)]
        for z in self.zones.zones:
            if z.kind == "ignore" and any(z.contains((x, y)) for x in xs for y in ys):
                return f"zone {z.name}"
        return None

    def others(self, t: float, faller: int | None) -> int | None:
        """The most people upright at one pose tick of the last OTHERS_S, the fallen person
        aside (not known: one of them is taken to be them); None without a tick to tell."""
        most = None
        for at, seen in self._ticks:
            if t - OTHERS_S - 1e-6 <= at <= t + 1e-6:
                up = [s for s in seen if s.upright and not s.down and s.track != faller]
                most = max(most or 0, len(up) if faller is not None else len(up) - 1)
        return most


def _inside(who: Seen, bottom: bool = False) -> bool:
    """lost_s: whether `who`'s box keeps off the left and right edges of the view (LOST_EDGE),
    and its bottom edge too (`bottom`)."""
    sides = who.box[0] > LOST_EDGE and who.box[2] < 1.0 - LOST_EDGE
    return sides and (not bottom or who.box[3] < 1.0 - LOST_EDGE)
