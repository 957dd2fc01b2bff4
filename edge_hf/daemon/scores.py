"""One camera's classifier scores as its fall decision reads them (`FallDetector`).

What the decision asks of the windows' probabilities, kept over as many seconds as it looks back:
the smoothing that makes a descent (`smoothed_level`: k of the last n above the threshold, or their
median), how long a descent's person stayed down (`Candidate.stayed`: the mean P(falling or down)
over confirm_s, or P(down) alone), whether someone was up before it (`ScoreHistory.up_level`:
up_before_s, person.lost_s) and whether a fallen person still lies there when the pose stage cannot
tell (`ScoreHistory.not_up_level`: escalation).
"""

from __future__ import annotations

import statistics
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from edge_hf.daemon.config import DetectionConfig

CONFIRM_LEVEL = 0.5  # mean P(falling or down) over confirm_s: more likely on the floor than up
UP_BEFORE_GAP_S = 0.5  # up_before_s ends this long before the descent (a stumble just before)
UP_BEFORE_MIN_S = 1.0  # less history than this (the camera just started) counts as up


def smoothed_level(recent: Sequence[float], cfg: DetectionConfig) -> float:
    """The highest threshold at which the smoothing is met over the last `cfg.n` scores in
    `recent` (oldest first): the k-th highest of them (`k_of_n`), or their median once there
    are n (`median`); 0 when too few. The one smoothing rule (detector and `calibrate`)."""
    last = list(recent)[-cfg.n :]
    if cfg.smoothing == "median":
        return float(statistics.median(last)) if len(last) == cfg.n else 0.0
    return sorted(last, reverse=True)[cfg.k - 1] if len(last) >= cfg.k else 0.0


@dataclass
class Candidate:
    """A descent seen, waiting for the person to stay down (`confirm_s`)."""

    started: float
    peak_score: float
    frame: np.ndarray | None
    evidence: np.ndarray | None = None
    gated: float | None = None  # the person stayed down (this mean) while the decision refused
    down: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=1000))
    up: float | None = None  # lost_s: the mean P(up) before the descent (`_up_before`)

    def stayed(self, score: float, t: float, p_down: float | None, cfg: DetectionConfig) -> float:
        """Feed one window (P(falling) `score`, P(down) `p_down` at `t`); the mean "not up" (or
        down, `cfg.confirm_on`) over the last confirm_s."""
        self.peak_score = max(self.peak_score, score)
        # "Not up": falling or down (1 - P(adl)); a person still sinking counts as down.
        # "down": the person on the floor alone (the sliding mean waits out the descent).
        lying = p_down or 0.0
        self.down.append((t, lying if cfg.confirm_on == "down" else score + lying))
        while self.down and self.down[0][0] < t - (cfg.confirm_s or 0.0):
            self.down.popleft()
        return self.level() or 0.0

    def level(self) -> float | None:
        """The mean kept by `stayed` so far; None before its first window."""
        return sum(d for _, d in self.down) / len(self.down) if self.down else None


class ScoreHistory:
    """The windows' probabilities one camera's detector has been fed, as far back as it looks:
    the last n P(falling) (smoothing), P(up) over `up_span` s before a descent, and P(falling or
    down) over `not_up_s`."""

    def __init__(self, cfg: DetectionConfig, up_span: float, not_up_s: float) -> None:
        self.cfg, self.up_span, self.not_up_s = cfg, up_span, not_up_s
        self.recent: deque[float] = deque(maxlen=cfg.n)  # P(falling), for the smoothing
        self._not_up: deque[tuple[float, float]] = deque()  # (t, P(falling or down))
        self._up: deque[tuple[float, float]] = deque()  # (t, P(up)) over up_span + gap

    def feed(self, t: float, score: float, p_down: float | None) -> None:
        """Keep one window's P(falling) `score` and P(down) `p_down` (None: a model without a
        `down` class keeps its P(falling) alone)."""
        self.recent.append(score)
        if p_down is None:
            return
        self._not_up.append((t, score + p_down))
        while self._not_up[0][0] < t - self.not_up_s:
            self._not_up.popleft()
        if self.up_span:
            self._up.append((t, 1.0 - score - p_down))
            while self._up[0][0] < t - self.up_span - UP_BEFORE_GAP_S - 1.0:
                self._up.popleft()

    def level(self) -> float:
        """The smoothed P(falling) now (`smoothed_level`)."""
        return smoothed_level(self.recent, self.cfg)

    def up_level(self, t: float, span: float | None = None, short: bool = False) -> float | None:
        """The mean P(up) over the `span` (default up_before_s) ending UP_BEFORE_GAP_S before a
        descent at `t`; None: too little history (up_before_s counts that as up). `short`
        (lost_s): a camera that has not run that long gives every window before `t` instead (a
        person falling in its first seconds); None only with no window at all."""
        span = self.cfg.up_before_s if span is None else span
        lo, hi = t - UP_BEFORE_GAP_S - span, t - UP_BEFORE_GAP_S
        before = [p for at, p in self._up if lo <= at <= hi]
        if short:
            before = before or [p for at, p in self._up if at < t]
        elif before and hi - self._up[0][0] < UP_BEFORE_MIN_S:  # (oldest first)
            return None
        return sum(before) / len(before) if before else None

    def not_up_level(self, t: float) -> float | None:
        """The mean P(falling or down) over the `not_up_s` up to `t`; None without a window
        of a model with a `down` class in that time."""
        recent = [p for at, p in self._not_up if at >= t - self.not_up_s]
        return sum(recent) / len(recent) if recent else None
