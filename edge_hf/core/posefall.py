"""Falls from poses alone: people tracked across ticks, "down" read from their geometry.

The way most open fall detectors work (a pose model and rules, no fall classifier), kept as the
peer the hyperframe model must beat and as the "down" evidence the detector can use beside it.
Per person (tracked by box overlap from one tick to the next):

- **upright**: torso within `upright_deg` of vertical and the box taller than wide;
- **down**: torso at least `lying_deg` from vertical or the box `lying_aspect` times wider than
  tall (a side view of a lying person), or the hips at least `drop_frac` of the person's own
  upright height below where they were when last upright (a camera looking along the body sees a
  foreshortened torso at any angle; the hips still come down);
- tracks: a person is matched to the track whose box overlaps most (IoU), else to the one whose
  feet (box bottom centre) moved least, at most `max_feet_move` heights;
- a **fall** is down reached within `max_descent_s` of last being upright (lying down slowly is
  not a fall) and held for `confirm_s`; it ends when the person is upright again.

Which views each signal covers: torso angle and box aspect need a side view; the hips' drop works
in any view where the person was seen upright first, and is the only one that works along the body.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from edge_hf.core.pose import MIN_KEYPOINT_SCORE, Box, Person, PoseFeatures, features
from edge_hf.core.posehead import FEATURES, PoseHead
from edge_hf.core.poseseq import PoseSequenceModel
from edge_hf.core.posetrack import Track, Tracker
from edge_hf.core.posewindow import WindowSpec, window_array
from edge_hf.core.zones import body_point

# A person's place in the rules at a tick (`Seen.stage`): upright; between (neither upright nor
# down: sitting, bending); vetoed (down by geometry, not by the head); not_seen_up (down, never
# seen upright before: no descent to judge); slow (down, but not within max_descent_s of last
# standing); descent (down after a sudden descent, for less than confirm_s); fallen.
STAGES = ("upright", "between", "vetoed", "not_seen_up", "slow", "descent", "fallen")
HISTORY_S = 1.0  # the head's "over the last second" features
GOT_UP_S = 2.0  # a fallen person is up again once upright this long, as tall as before the fall
UP_HEIGHT = 0.8  # ... at least this share of their height before the fall (sitting up is not up)
UP_P = 0.5  # the sequence model sees a person up at this P(up)
SEQ_MODES = ("join", "decide")


@dataclass(frozen=True)
class PoseRuleSettings:
    """Thresholds of the pose rules (see the module docstring)."""

    upright_deg: float = 35.0
    lying_deg: float = 60.0
    lying_aspect: float = 1.3
    drop_frac: float = 0.35
    max_descent_s: float = 2.0
    confirm_s: float = 1.0
    forget_s: float = 2.0  # a track unseen this long is dropped
    min_iou: float = 0.2
    max_feet_move: float = 0.6  # no overlap: the same person if the feet moved less (heights)


@dataclass
class Seen:
    """One tracked person at a tick, for zones and "others present": track id, box, where they
    lie (`edge_hf.core.zones.body_point`), and whether the rules read them upright or down; in
    pixels of the pose frame (the person stage makes them 0-1 of the camera's view)."""

    track: int
    box: tuple[float, float, float, float]
    at: tuple[float, float]
    upright: bool = False
    down: bool = False
    # What the rules read from them at this tick (`edge-hf replay --explain`): the pose model's
    # score, torso angle, box aspect, hips' drop in their own upright heights, the head's P(down),
    # the "down" signals of their geometry (before a head's veto) and where they stand in the
    # rules (STAGES).
    score: float | None = None
    torso_deg: float | None = None
    aspect: float | None = None
    hip_drop: float | None = None
    head_p: float | None = None
    why: tuple[str, ...] = ()
    stage: str = ""
    seq_p: tuple[float, float, float] | None = None  # the sequence model's falling, down, up

    def scaled(self, w: float, h: float) -> Seen:
        """The same person with x divided by `w` and y by `h`."""
        x0, y0, x1, y1 = self.box
        return replace(
            self, box=(x0 / w, y0 / h, x1 / w, y1 / h), at=(self.at[0] / w, self.at[1] / h)
        )


@dataclass
class PoseVerdict:
    """One tick's reading: is anyone down (and how), has a fall been confirmed."""

    down: bool
    fall: bool  # someone is fallen (confirmed and not up again)
    reasons: list[str] = field(default_factory=list)
    new_fall: bool = False  # a fall was confirmed at this tick (once per fall)
    t: float = 0.0  # the pose tick's sample time (the camera's clock: monotonic live, media time)
    # Who: (track id, box) of the person the fall is about (the one confirmed at this tick, else
    # someone fallen, else someone down); box x0, y0, x1, y1 in pixels of the pose frame.
    person: tuple[int, tuple[float, float, float, float]] | None = None
    # (track id, seconds down) of each fallen person seen upright again at this tick
    got_up: list[tuple[int, float]] = field(default_factory=list)
    seen: list[Seen] = field(default_factory=list)  # every tracked person found at this tick


def _hip_drop(tr: Track, f: PoseFeatures) -> float | None:
    """How far the hips are below where they were when the track was last upright, in its
    upright heights (None: not known)."""
    if f.hip_y is None or tr.upright_hip_y is None or not tr.upright_height:
        return None
    return (f.hip_y - tr.upright_hip_y) / tr.upright_height


def is_upright(f: PoseFeatures, person: Person, s: PoseRuleSettings) -> bool:
    return person.height > person.width and (f.torso_deg is None or f.torso_deg < s.upright_deg)


def down_reasons(
    f: PoseFeatures, upright_hip_y: float | None, upright_height: float | None, s: PoseRuleSettings
) -> list[str]:
    """Which "down" signals one person's geometry shows (empty: not down)."""
    why = []
    if f.torso_deg is not None and f.torso_deg >= s.lying_deg:
        why.append("torso")
    if f.aspect >= s.lying_aspect:
        why.append("aspect")
    if (
        f.hip_y is not None
        and upright_hip_y is not None
        and upright_height
        and f.hip_y - upright_hip_y >= s.drop_frac * upright_height
    ):
        why.append("hips")
    return why


def head_features(tr: Track, f: PoseFeatures, person: Person, t: float) -> np.ndarray:
    """One tracked person's row of `edge_hf.core.posehead.FEATURES` at tick `t`, against the
    track's state before this tick (its upright reference and the last second's history)."""
    h0 = tr.upright_height
    known = f.hip_y is not None and tr.upright_hip_y is not None and bool(h0)
    hip_drop = (f.hip_y - tr.upright_hip_y) / h0 if known else 0.0  # type: ignore[operator]
    old = tr.history[0] if tr.history else None
    drop_1s = 0.0
    if old is not None and old[1] is not None and f.hip_y is not None:
        drop_1s = (f.hip_y - old[1]) / (h0 or person.height or 1.0)
    since = 1.0 if tr.upright_t is None else min((t - tr.upright_t) / 10.0, 1.0)
    row = (
        0.0 if f.torso_deg is None else f.torso_deg / 90.0,
        float(f.torso_deg is not None),
        min(f.aspect, 3.0),
        float(np.clip(hip_drop, -2.0, 2.0)),
        float(known),
        min(person.height / h0, 2.0) if h0 else 1.0,
        since,
        float(np.clip(drop_1s, -2.0, 2.0)),
        float(np.clip(f.aspect - old[2], -3.0, 3.0)) if old is not None else 0.0,
        float(np.mean(person.keypoints[:, 2] >= MIN_KEYPOINT_SCORE)),
    )
    if len(row) != len(FEATURES):
        raise RuntimeError(f"head_features: {len(row)} values for {len(FEATURES)} FEATURES")
    return np.asarray(row, np.float64)


def _up_again(tr: Track, p: Person, t: float, verdict: PoseVerdict) -> None:
    """A tracked person upright at `t`: after a confirmed fall the wait for `GOT_UP_S` upright
    and as tall as before starts (a person sitting up on the floor is upright but short), and
    once it is over the verdict says they got up (and after how long down)."""
    if tr.fallen and tr.fell_at is not None and tr.getting_up is None:
        tr.getting_up = (t, tr.fell_at, tr.stand_height)
    if tr.getting_up is None:
        return
    since, fell_at, before = tr.getting_up
    if before is not None and p.height < UP_HEIGHT * before:
        tr.getting_up = (t, fell_at, before)  # not standing yet: the wait starts again
    elif t - since >= GOT_UP_S - 1e-6:
        verdict.got_up.append((tr.id, since - fell_at))  # down until they stood up
        tr.getting_up = None


class PoseFallRules:
    """Per camera: feed `update(t, people)` each pose tick; a `PoseVerdict` comes back.

    With a `head` (`edge_hf.core.posehead`) in mode `veto`, a person the rules read as down counts
    only while the head's probability is at least its threshold; in mode `decide`, "down after a
    fall" is the head's probability at or above its threshold instead of the thresholds and the
    sudden-descent rule (tracking and `confirm_s` the same). `record`, when a list, gets
    (t, features) of every tracked person each tick (the head's training rows).

    With a sequence model (`edge_hf.core.poseseq`) each tracked person's window of poses is
    judged every tick: in mode `join` its P(falling) held for `confirm_s` also confirms a fall
    the rules did not, and such a fall ends when the model sees the person up again (not when
    the geometry reads upright: from a camera the person fell towards, a lying body looks
    upright); in mode `decide` it alone says fallen and up. `windows`, when a list, gets
    (t, track id, box, window) of every person found each tick (the sequence model's inputs)."""

    def __init__(
        self,
        settings: PoseRuleSettings | None = None,
        head: PoseHead | None = None,
        record: list[tuple[float, np.ndarray]] | None = None,
        seq: PoseSequenceModel | None = None,
        seq_mode: str = "join",
        windows: list[tuple[float, int, Box, np.ndarray]] | None = None,
        window: WindowSpec | None = None,
    ) -> None:
        if seq_mode not in SEQ_MODES:
            raise ValueError(f"seq_mode {seq_mode!r}: one of {SEQ_MODES}")
        self.s = settings or PoseRuleSettings()
        self.head, self.record = head, record
        self.seq, self.seq_mode, self.windows = seq, seq_mode, windows
        spec = seq.spec if seq is not None else window or WindowSpec()
        self.window_ticks = spec.ticks
        self.tracker = Tracker(self.s.forget_s, self.s.min_iou, self.s.max_feet_move)

    @property
    def tracks(self) -> list[Track]:
        """The people tracked now (`edge_hf.core.posetrack`)."""
        return self.tracker.tracks

    def _standing_tall(self, tr: Track, p: Person) -> bool:
        """Whether `p` stands upright at (nearly) the height `tr` had before its fall."""
        before = tr.stand_height or tr.upright_height
        return is_upright(features(p), p, self.s) and (
            before is None or p.height >= UP_HEIGHT * before
        )

    def update(self, t: float, people: list[Person]) -> PoseVerdict:
        verdict = PoseVerdict(False, False, t=t)
        pairs = self.tracker.match(people, t, self._standing_tall)
        probs = self._sequence(t, pairs)
        for k, (tr, p) in enumerate(pairs):
            f = features(p)
            verdict.seen.append(Seen(tr.id, p.box, body_point(p), score=p.score,
                                     torso_deg=f.torso_deg, aspect=f.aspect,
                                     hip_drop=_hip_drop(tr, f)))  # fmt: skip
            q = None if probs is None else probs[k]
            if q is not None:
                verdict.seen[-1].seq_p = (float(q[0]), float(q[1]), float(q[2]))
            x = None
            if self.head is not None or self.record is not None:
                x = head_features(tr, f, p, t)
                tr.history.append((t, f.hip_y, f.aspect))
                while tr.history and t - tr.history[0][0] > HISTORY_S + 1e-6:
                    tr.history.popleft()
                if self.record is not None:
                    self.record.append((t, x))
            if self.seq is not None and self.seq_mode == "decide" and q is not None:
                self._seq_decide(tr, p, f, q, t, verdict)
            elif self.head is not None and self.head.mode == "decide" and x is not None:
                self._head_update(tr, p, f, x, t, verdict)
            else:
                self._rules_update(tr, p, f, x, q, t, verdict)
            if q is not None and self.seq_mode == "join":
                self._seq_join(tr, q, t, verdict)
        # A fallen person the model stops finding (lying people are found less often) stays fallen
        # until forgotten or seen upright again.
        fallen = [tr for tr in self.tracks if tr.fallen]
        verdict.fall = verdict.fall or bool(fallen)
        if verdict.person is None and fallen:
            verdict.person = (fallen[0].id, fallen[0].box)
        return verdict

    def _sequence(self, t: float, pairs: list[tuple[Track, Person]]) -> np.ndarray | None:
        """Each track's pose at this tick kept (None where not found); the windows of the people
        found now recorded (`windows`) and, with a sequence model, its (falling, down, up) each."""
        if self.seq is None and self.windows is None:
            return None
        self.tracker.keep_poses(pairs, self.window_ticks)
        if not pairs:
            return None
        w = np.stack([window_array(tr.poses, self.window_ticks) for tr, _ in pairs])
        if self.windows is not None:
            self.windows.extend((t, tr.id, p.box, w[k]) for k, (tr, p) in enumerate(pairs))
        return None if self.seq is None else self.seq.probs(w)

    def _still_down(self, tr: Track, q: np.ndarray | None) -> bool:
        """A fall the sequence model confirmed stays while it does not see the person up: from
        a camera they fell towards, a lying body looks short and upright to the geometry."""
        return tr.fallen and tr.by_seq and q is not None and q[2] < UP_P

    def _rules_update(
        self,
        tr: Track,
        p: Person,
        f: PoseFeatures,
        x: np.ndarray | None,
        q: np.ndarray | None,
        t: float,
        verdict: PoseVerdict,
    ) -> None:
        """`update` for one tracked person by the rules' geometry (and a head's veto)."""
        s, seen = self.s, verdict.seen[-1]
        if self.head is not None and x is not None:  # mode veto
            seen.head_p = float(self.head.prob(x))
        if is_upright(f, p, s) and not self._still_down(tr, q):
            seen.upright, seen.stage = True, "upright"
            _up_again(tr, p, t, verdict)
            tr.upright_t, tr.upright_hip_y, tr.upright_height = t, f.hip_y, p.height
            tr.down_since, tr.fallen, tr.by_seq = None, False, False
            return
        tr.getting_up = None
        why = down_reasons(f, tr.upright_hip_y, tr.upright_height, s)
        seen.why, seen.stage = tuple(why), "vetoed" if why else "between"
        if why and self.head is not None and seen.head_p is not None:  # mode veto
            why = why if seen.head_p >= self.head.threshold else []
        if not why:
            tr.down_since = None
            return
        verdict.down = seen.down = True
        verdict.reasons += why
        verdict.person = verdict.person or (tr.id, tr.box)
        if tr.down_since is None:
            sudden = tr.upright_t is not None and t - tr.upright_t <= s.max_descent_s
            if not sudden:
                slow = "slow" if tr.upright_t is not None else "not_seen_up"
                seen.stage = "fallen" if tr.fallen else slow
                return
            tr.down_since = t
        if t - tr.down_since >= s.confirm_s and not tr.fallen:
            tr.fallen = verdict.new_fall = True
            tr.fell_at, tr.stand_height = tr.down_since, tr.upright_height
            verdict.person = (tr.id, tr.box)
        seen.stage = "fallen" if tr.fallen else "descent"
        verdict.fall = verdict.fall or tr.fallen

    def _seq_fall(self, tr: Track, q: np.ndarray, t: float, verdict: PoseVerdict) -> None:
        """The sequence model's P(falling) at or above its threshold for `confirm_s` confirms a
        fall of this track (once)."""
        seq = self.seq
        if seq is None:
            raise RuntimeError("_seq_fall without a sequence model")
        if q[0] < seq.contract.threshold:
            tr.seq_since = None
            return
        if tr.seq_since is None:
            tr.seq_since = t
        seen = verdict.seen[-1]
        verdict.down = seen.down = True
        if "sequence" not in verdict.reasons:
            verdict.reasons.append("sequence")
        verdict.person = verdict.person or (tr.id, tr.box)
        if t - tr.seq_since >= self.s.confirm_s - 1e-6 and not tr.fallen:
            tr.fallen = tr.by_seq = verdict.new_fall = True
            tr.fell_at, tr.stand_height = tr.seq_since, tr.upright_height
            verdict.person = (tr.id, tr.box)
        if tr.fallen:
            seen.stage = "fallen"
            verdict.fall = True
        elif seen.stage in ("", "upright", "between", "vetoed", "slow", "not_seen_up"):
            seen.stage = "descent"

    def _seq_join(self, tr: Track, q: np.ndarray, t: float, verdict: PoseVerdict) -> None:
        """Mode join: a fall the rules missed can be confirmed by the sequence model."""
        if tr.fallen and not tr.by_seq:
            return
        self._seq_fall(tr, q, t, verdict)

    def _seq_decide(
        self, tr: Track, p: Person, f: PoseFeatures, q: np.ndarray, t: float, v: PoseVerdict
    ) -> None:
        """Mode decide: the sequence model alone says fallen (P(falling)) and up again (P(up));
        tracking, `confirm_s` and the wait before "got up" stay."""
        seen = v.seen[-1]
        upright = seen.upright = bool(q[2] >= UP_P) and is_upright(f, p, self.s)
        if upright:
            seen.stage = "upright"
            _up_again(tr, p, t, v)
            tr.upright_t, tr.upright_hip_y, tr.upright_height = t, f.hip_y, p.height
            tr.fallen, tr.by_seq, tr.seq_since = False, False, None
            return
        tr.getting_up = None
        seen.stage = "between"
        self._seq_fall(tr, q, t, v)

    def _head_update(
        self, tr: Track, p: Person, f: PoseFeatures, x: np.ndarray, t: float, v: PoseVerdict
    ) -> None:
        """`update` for one tracked person when the head decides "down after a fall"."""
        head = self.head
        if head is None:
            raise RuntimeError("_head_update without a head")
        seen = v.seen[-1]
        upright = seen.upright = is_upright(f, p, self.s)
        if upright:
            tr.upright_t, tr.upright_hip_y, tr.upright_height = t, f.hip_y, p.height
        seen.head_p = float(head.prob(x))
        if seen.head_p < head.threshold:
            seen.stage = "upright" if upright else "between"
            if upright:
                _up_again(tr, p, t, v)
            else:
                tr.getting_up = None
            tr.down_since = None
            if upright:
                tr.fallen = False
            return
        v.down = v.seen[-1].down = True
        v.reasons.append("head")
        v.person = v.person or (tr.id, tr.box)
        if tr.down_since is None:
            tr.down_since = t
        if t - tr.down_since >= self.s.confirm_s and not tr.fallen:
            tr.fallen = v.new_fall = True
            tr.fell_at, tr.stand_height = tr.down_since, tr.upright_height
            v.person = (tr.id, tr.box)
        seen.stage = "fallen" if tr.fallen else "descent"
        v.fall = v.fall or tr.fallen
