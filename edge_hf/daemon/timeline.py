"""`edge-hf replay --timeline-png`: every signal that fed a camera's decision, over time.

Three panels a camera, from its `edge_hf.daemon.explain.Recording` (`panels`, a pure function
the plot only draws): the classifier (P(fall), P(down), the smoothed level against the camera's
own threshold; the detector's state shaded), the person stage (people found; the main person's
torso angle, box aspect, hips' drop, the head's and the pose model's scores) and the gates (up
before, confirm, the decision's gate for the classifier, lying where zones refuse, others
upright). Every decision is a vertical line: red an alarm, grey a refusal, labelled by reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from edge_hf.core.posefall import Seen
from edge_hf.daemon.decisions import ALARM
from edge_hf.daemon.explain import Recording, main_person, others_upright

SHADES = {"candidate": "#f5d76e", "alarm": "#f08080", "cooldown": "#cccccc"}


@dataclass(frozen=True)
class Series:
    """One plotted signal: seconds into the file and values (NaN: not known then)."""

    label: str
    t: np.ndarray
    values: np.ndarray
    step: bool = False


@dataclass(frozen=True)
class Panel:
    title: str
    series: tuple[Series, ...]
    level: float | None = None  # a dashed reference line (the threshold, CONFIRM_LEVEL)


def _known(values: Sequence[float | None]) -> np.ndarray:
    return np.array([np.nan if v is None else float(v) for v in values], dtype=np.float64)


def panels(rec: Recording) -> tuple[Panel, Panel, Panel]:
    """The classifier's, the person stage's and the gates' signals of one camera."""
    t = np.array([rec.s(g.t) for g in rec.windows])
    w = rec.windows
    cnn = [Series("P(fall)", t, _known([g.p_fall for g in w]))]
    if any(g.p_down is not None for g in w):
        cnn.append(Series("P(down)", t, _known([g.p_down for g in w])))
    cnn.append(Series("smoothed P(fall)", t, _known([g.level for g in w])))
    tt = np.array([rec.s(at) for at, _ in rec.ticks])
    mains = [main_person(v.seen) for _, v in rec.ticks]

    def of_main(get: Callable[[Seen], float | None]) -> np.ndarray:
        return _known([None if m is None else get(m) for m in mains])

    person = [
        Series("people found", tt, _known([len(v.seen) for _, v in rec.ticks]), step=True),
        Series("torso angle / 90°", tt,
               of_main(lambda m: None if m.torso_deg is None else m.torso_deg / 90)),
        Series("box aspect (w/h)", tt, of_main(lambda m: m.aspect)),
        Series("hips' drop (upright heights)", tt, of_main(lambda m: m.hip_drop)),
        Series("head P(down)", tt, of_main(lambda m: m.head_p)),
        Series("pose model score", tt, of_main(lambda m: m.score)),
        Series("read down", tt, of_main(lambda m: 1.0 if m.down else 0.0), step=True),
    ]  # fmt: skip
    gates = [Series("confirm: mean P(not up)", t, _known([g.confirm for g in w]))]
    if any(g.up is not None for g in w):
        gates.append(Series("up before: mean P(up)", t, _known([g.up for g in w])))
    if rec.mode != "cnn":
        gates.append(Series(f"classifier may raise (decision {rec.mode})", t,
                            _known([float(g.cnn_may) for g in w]), step=True))  # fmt: skip
    if rec.zones:
        gates.append(Series("lying where zones refuse", tt, of_main(
            lambda m: float(rec.zones.refusal(m.at) is not None)), step=True))  # fmt: skip
    if rec.pose_on:
        others = [others_upright(v.seen, m) for (_, v), m in zip(rec.ticks, mains, strict=True)]
        gates.append(Series("others upright", tt, _known(others), step=True))
    return (
        Panel(f"{rec.camera}: classifier (shaded: candidate, alarm, cooldown)", tuple(cnn),
              rec.threshold),
        Panel("person stage: the main person (the one furthest into the pose rules)",
              tuple(person) if rec.pose_on else ()),
        Panel("gates", tuple(gates), 0.5),
    )  # fmt: skip


def signals_timeline_png(path: Path, recordings: Sequence[Recording]) -> None:
    """Draw each camera's `panels` (one above the other) to `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3 * len(recordings), 1, figsize=(13, 7.5 * len(recordings)),
                             sharex=True, squeeze=False)  # fmt: skip
    for k, rec in enumerate(recordings):
        for i, (panel, ax) in enumerate(zip(panels(rec), axes[3 * k : 3 * k + 3, 0], strict=True)):
            _draw(ax, panel)
            if i == 0:
                _shade(ax, rec)
            _decisions(ax, rec, labels=i == 0)
    axes[-1, 0].set_xlabel("time in the file (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _draw(ax: Any, panel: Panel) -> None:
    ax.set_title(panel.title, fontsize=9, loc="left")
    if not panel.series:
        ax.text(0.5, 0.5, "person stage off", transform=ax.transAxes, ha="center")
    for s in panel.series:
        if s.step:
            ax.step(s.t, s.values, where="post", label=s.label)
        else:
            ax.plot(s.t, s.values, label=s.label)
    if panel.level is not None:
        ax.axhline(panel.level, color="k", linestyle="--", linewidth=0.8,
                   label=f"{panel.level:.2f}")  # fmt: skip
    if panel.series:
        ax.set_ylim(-0.05, max(1.05, ax.get_ylim()[1]))
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)


def _shade(ax: Any, rec: Recording) -> None:
    """The detector's state after each window, shaded until the next."""
    w = rec.windows
    for g, nxt in pairwise(w):
        if g.state in SHADES:
            ax.axvspan(rec.s(g.t), rec.s(nxt.t), color=SHADES[g.state], alpha=0.4, linewidth=0)


def _decisions(ax: Any, rec: Recording, labels: bool) -> None:
    for d in rec.decisions:
        alarm = d.reason == ALARM
        ax.axvline(rec.s(d.t), color="r" if alarm else "0.4", linestyle="-" if alarm else ":")
        if labels:
            ax.annotate(d.reason, (rec.s(d.t), 0.98), xycoords=("data", "axes fraction"),
                        rotation=90, fontsize=7, va="top", ha="right")  # fmt: skip
