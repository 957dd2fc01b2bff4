"""The learned pose head's fold files (#30 item 3): per fold and seed, a head fitted on the
tracked people of every clip the fold trains on (and vtest.avi's first 40 s), never on its held-out
clips. Used by experiments/pose_head.py (the head on its own) and by the rows that replay it beside
a fold's CNN (`Variant.pose_head`).

Labels: a fall clip's rows from the end of its descent (GMDCSA24: half the labelled segment, 1.5 s
at most; ASSIST-IoT: its labelled end) to the clip's end are "fallen"; its rows from 0.3 s before
the start to there are left out (the descent); the rest, and every row of a daily-activity or
lying-still clip, are not.
"""

from __future__ import annotations

from functools import cache
from hashlib import sha1
from pathlib import Path

import numpy as np

from edge_hf.core.clippeople import clip_people
from edge_hf.core.pose import POSE_MODEL, POSE_RATE_HZ, POSE_SIDE, Person, PoseEstimator
from edge_hf.core.posefall import PoseFallRules, PoseRuleSettings
from edge_hf.core.posehead import HeadContract, fit
from edge_hf.core.secondlook import LookSettings, look_key
from edge_hf.training.data import parse_crop

from .items import GMDCSA_DESCENT_S, REVERSE, VTEST, VTEST_CALIBRATION_S, Item, views

DESCENT_LEAD_S = 0.3

Poses = list[tuple[float, tuple[int, int], list[Person]]]


def view_keys(items: list[Item]) -> list[tuple[tuple[str, int], Item]]:
    """((clip, view number), item) of each clip view (`items.views`' numbering)."""
    return [((it.clip_id, view), it) for it, view, _ in views(items)]


def poses_of(path: Path, crop: str, cache_dir: Path, look: LookSettings | None = None) -> Poses:
    """MoveNet's people at POSE_RATE_HZ over one clip view (through a second look with `look`),
    cached in `cache_dir`."""
    return clip_people(path, parse_crop(crop), _estimator(), POSE_RATE_HZ, cache_dir, look)


@cache
def _estimator() -> PoseEstimator:
    return PoseEstimator(POSE_MODEL)


def feature_rows(poses: Poses, settings: PoseRuleSettings | None = None) -> np.ndarray:
    """(t, features...) of every tracked person at every tick of one clip view."""
    record: list[tuple[float, np.ndarray]] = []
    rules = PoseFallRules(settings, record=record)
    for t, _, found in poses:
        rules.update(t, found)
    return np.array([[t, *x] for t, x in record]) if record else np.zeros((0, 11))


def fallen_from(it: Item) -> float | None:
    """When a fall clip's person is down after the descent (None: not a fall clip)."""
    if it.label != "fall":
        return None
    start = it.start_s or 0.0
    end = it.end_s if it.end_s is not None else start + GMDCSA_DESCENT_S
    return end if it.fold == "A" else start + min(GMDCSA_DESCENT_S, (end - start) / 2)


def labelled(it: Item, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A view's feature rows and labels, the descent left out."""
    t = rows[:, 0]
    down = fallen_from(it)
    if down is None:
        return rows[:, 1:], np.zeros(len(rows))
    keep = (t < (it.start_s or 0.0) - DESCENT_LEAD_S) | (t >= down)
    return rows[keep, 1:], (t[keep] >= down).astype(np.float64)


def training_rows(
    train: list[Item], cache_dir: Path, look: LookSettings | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Labelled rows of the `train` clip views and of vtest.avi's first 40 s."""
    v = feature_rows(poses_of(VTEST.resolve(), "", cache_dir, look))
    first = v[v[:, 0] < VTEST_CALIBRATION_S, 1:]
    xs, ys = [first], [np.zeros(len(first))]
    for it in train:
        x, y = labelled(it, feature_rows(poses_of(it.path, it.crop, cache_dir, look)))
        xs.append(x)
        ys.append(y)
    return np.concatenate(xs), np.concatenate(ys)


ALL = "all"  # not a fold: every clip (the shipped head)


def fold_training(items: list[Item], fold: str) -> list[Item]:
    """The clips a fold's head is fitted on: every other fold, ASSIST-IoT for the reverse, every
    clip for ALL."""
    if fold == ALL:
        return list(items)
    if fold == REVERSE:
        return [it for it in items if it.fold == "A"]
    return [it for it in items if it.fold != fold]


def fold_head(
    items: list[Item],
    fold: str,
    seed: int,
    out: Path,
    threshold: float,
    mode: str = "decide",
    path: Path | None = None,
    look: LookSettings | None = None,
) -> Path:
    """The head file of `fold` and `seed` in `mode` at `threshold` (on poses through a second
    look with `look`), at `path` or under `<out>/work/pose_head` (fitted once; the weights do not
    depend on mode or threshold)."""
    # (the look's settings in the name: a head fitted on other squares' poses is another head)
    digest = "" if look is None else sha1(look_key(look).encode()).hexdigest()[:8]
    looked = "" if look is None else f"_look{digest}"
    tag = ("" if mode == "decide" else f"_{mode}") + looked
    path = path or out / "work" / "pose_head" / f"s{seed}_{fold}_t{threshold:g}{tag}.json"
    if not path.exists():
        x, y = training_rows(fold_training(items, fold), out / "cache", look)
        head = fit(x, y, seed)
        head.threshold, head.mode = threshold, mode
        # What its rows came from (poses_of, feature_rows): the daemon holds its config to it.
        head.contract = HeadContract.of(
            POSE_MODEL, POSE_RATE_HZ, POSE_SIDE, PoseRuleSettings(), look
        )
        head.trained_on = (
            "GMDCSA24 (all 4 subjects), ASSIST-IoT (both views), vtest.avi 0-40 s; "
            f"{len(y)} tracked-person rows, {int(y.sum())} fallen; seed {seed}"
            if fold == ALL
            else f"real-bench fold {fold} (its held-out clips never seen), seed {seed}"
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        head.save(path)
    return path
