"""Replay scoring: fold models through the daemon's own pipeline and detector, events per clip,
the summed figures of a row and seed.
"""

from __future__ import annotations

import argparse
import hashlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from edge_hf.core.pose import MIN_PERSON_SCORE, Person, PoseEstimator
from edge_hf.core.posefall import PoseVerdict
from edge_hf.daemon.app import build_pipeline
from edge_hf.daemon.calibrate import quiet_point, suggested_threshold
from edge_hf.daemon.config import Config, DetectionConfig
from edge_hf.daemon.decisions import Decision, Gates
from edge_hf.daemon.events import FallDetector
from edge_hf.daemon.replay import replay_files
from edge_hf.daemon.sinks import RecordingSink
from edge_hf.training.data import parse_crop

from .items import (
    EARLY_S,
    FOLDS,
    VTEST_CALIBRATION_S,
    Item,
    camera_name,
    split_fold,
    views,
)
from .posehead import fold_head
from .training import ensure_fold_model, fold_dir, row_inputs
from .variants import VARIANTS, Variant

CALIBRATION_MARGIN = 0.05  # edge-hf calibrate's default

HOLD_END_S = 3.0  # every clip's last frame is held this long (clips end right after the fall)


def replay_scores(
    model: Path,
    cameras: list[tuple[str, Path, str]],
    state_dir: Path,
    threshold: float = 0.5,
    detection: dict[str, Any] | None = None,
    person: dict[str, Any] | None = None,
    pose_memo: dict[bytes, list[Person]] | None = None,
) -> dict[str, dict[str, Any]]:
    """Replay each (name, video, crop) through the daemon's pipeline with `detection` settings
    (default: the daemon's, confirm_s 0) and `person` (the person stage; default off); per
    camera its window scores, the
    times (s from the clip start) of its events, and (not saved) its detector, which kept what it
    was fed (`trace`). `pose_memo`: the pose model's answers by frame, kept across replays of the
    same files (the pose model is the same in every fold; only the CNN and the head differ)."""
    cams = [{"name": n, "source": str(p), "crop": parse_crop(c)} for n, p, c in cameras]
    cfg = Config.model_validate(
        {
            "device_id": "bench",
            "model": {"path": str(model), "providers": ["cpu"], "threshold": threshold},
            "cameras": cams,
            "state_dir": str(state_dir),
            "detection": {"confirm_s": 0.0, **(detection or {})},
            **({"person": person} if person else {}),
        }
    )
    threads = torch.get_num_threads()
    sink = RecordingSink()
    pipeline = build_pipeline(cfg, sink, score_history=None, live=False)
    if pipeline.person is not None and pose_memo is not None:
        pipeline.person.estimator = MemoEstimator(pipeline.person.estimator, pose_memo)
    for cam in pipeline.cameras:
        cam.detector.trace = []
        cam.detector.record = Calls()
    try:
        replay_files(pipeline, origin_unix=0.0, hold_end_s=HOLD_END_S)
    finally:
        torch.set_num_threads(threads)  # the pipeline pins torch to one thread; training wants all
    out: dict[str, dict[str, Any]] = {}
    for cam in pipeline.cameras:
        mine = [e for e in sink.events if e.camera == cam.cfg.name]
        raised = {e.event_id: e.time for e in mine if e.type == "start"}
        # (start, end, raised) of each event: the descent, the end, and when the alarm went out
        # (later than the start with confirm_s); replay closes an open one at the end of the file.
        spans = [[e.started_at, e.time, raised[e.event_id]] for e in mine if e.type == "end"]
        out[cam.cfg.name] = {
            "scores": [round(s, 4) for s in cam.scores],
            "interval_s": cam.interval_s,
            "events": spans,
            "detector": cam.detector,
        }
    return out


class Calls:
    """Every window and pose tick one camera's detector was fed, in the order it was fed them
    (a `DecisionRecord`): enough to feed a fresh detector the same stream at other decision
    settings without running any model again (`redecide`)."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, float, float | None] | tuple[float, PoseVerdict]] = []

    def window(self, gates: Gates) -> None:
        self.calls.append((gates.t, gates.p_fall, gates.p_down))

    def pose(self, t: float, verdict: PoseVerdict) -> None:
        self.calls.append((t, verdict))

    def decision(self, decision: Decision) -> None:
        pass


def redecide(
    calls: dict[str, list[Any]],
    detector: Callable[[str], FallDetector],
) -> dict[str, tuple[list[list[float]], FallDetector]]:
    """Per camera, the event spans (start, end, raised) a fresh detector (`detector(camera)`)
    raises when fed the recorded stream `calls` again (`Calls.calls`: windows (t, P(falling),
    P(down)) and pose ticks (t, verdict) in their order; a detector's `trace`: windows alone),
    and that detector."""
    out: dict[str, tuple[list[list[float]], FallDetector]] = {}
    for name, stream in calls.items():
        det = detector(name)
        events = []
        for c in stream:
            if len(c) == 2:
                events += det.on_pose(c[0], c[1])
            else:
                events += det.update(c[1], c[0], None, c[2])
        if stream:
            events += det.close(stream[-1][0])
        raised = {e.event_id: e.time for e in events if e.type == "start"}
        spans = [[e.started_at, e.time, raised[e.event_id]] for e in events if e.type == "end"]
        out[name] = (spans, det)
    return out


class MemoEstimator(PoseEstimator):
    """A PoseEstimator that answers a frame it has seen before from `memo` (keyed by the frame's
    bytes' digest): replay feeds the same pose frames to every fold and seed."""

    def __init__(self, inner: PoseEstimator, memo: dict[bytes, list[Person]]) -> None:
        # (not PoseEstimator.__init__: no second session; `inner` answers what is new)
        self.inner, self.memo = inner, memo
        self.path, self.side = inner.path, inner.side

    def people_batch(
        self, frames_rgb: Sequence[np.ndarray], min_score: float = MIN_PERSON_SCORE
    ) -> list[list[Person]]:
        if min_score != MIN_PERSON_SCORE:
            return self.inner.people_batch(frames_rgb, min_score)
        keys = [hashlib.blake2b(f.tobytes(), digest_size=16).digest() for f in frames_rgb]
        todo = [i for i, k in enumerate(keys) if k not in self.memo]
        if todo:
            for i, found in zip(
                todo, self.inner.people_batch([frames_rgb[i] for i in todo]), strict=True
            ):
                self.memo[keys[i]] = found
        return [self.memo[k] for k in keys]


def redetect(
    replayed: dict[str, dict[str, Any]],
    threshold: float,
    detection: dict[str, Any],
    thresholds: dict[str, float] | None = None,
) -> dict[str, dict[str, Any]]:
    """`replay_scores`' result at other detection settings, without running the model again:
    each camera's recorded (t, P(falling), P(down)) fed to a fresh FallDetector set up as the
    daemon would set it up (the scores do not depend on the settings; the events do);
    `thresholds`: per-camera `cameras[].threshold`."""
    cfg = DetectionConfig.model_validate({"confirm_s": 0.0, **detection})

    def detector(name: str) -> FallDetector:
        det = FallDetector(name, "bench", cfg, (thresholds or {}).get(name, threshold),
                           replayed[name]["detector"].model)  # fmt: skip
        det.trace = []
        return det

    again = redecide({n: r["detector"].trace for n, r in replayed.items()}, detector)
    return {n: {**r, "events": again[n][0], "detector": again[n][1]} for n, r in replayed.items()}


def score_fold(items: list[Item], replayed: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Per clip (views merged): label, detected (fall) / false events, highest window score, and
    each view's raw event spans (so that the metric can be recomputed from runs.json)."""
    clips: dict[str, dict[str, Any]] = {}
    views: dict[str, int] = {}
    for it in items:
        views[it.clip_id] = views.get(it.clip_id, 0) + 1
        r = replayed[camera_name(it, views[it.clip_id])]
        c = clips.setdefault(
            it.clip_id, {"clip": it.clip_id, "fold": it.fold, "label": it.label, "max_score": 0.0,
                         "onset_s": (it.start_s or 0.0) - EARLY_S if it.label == "fall" else None,
                         "views": []}
        )  # fmt: skip
        c["max_score"] = max([c["max_score"], *r["scores"]])
        c["views"].append(r["events"])
        score_clip(c)
    return list(clips.values())


def score_clip(c: dict[str, Any]) -> None:
    """detected / false_events / early_events of one clip from its views' event spans."""
    onset = c["onset_s"]
    if onset is None:
        c["detected"] = False
        c["false_events"] = max(len(v) for v in c["views"])
        c["early_events"] = 0
        return
    hits = [span for v in c["views"] for span in v if span[1] >= onset]
    c["detected"] = bool(hits)
    c["early_events"] = max(sum(span[1] < onset for span in v) for v in c["views"])
    c["false_events"] = 0
    # Seconds from the labelled fall start to the alarm (0 if an alarm was already on).
    c["delay_s"] = max(0.0, min(span[-1] for span in hits) - (onset + EARLY_S)) if hits else None


def auc(pos: list[float], neg: list[float]) -> float:
    """Probability that a random fall clip outscores a random daily-activity clip (ties: half)."""
    if not pos or not neg:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def summarise(clips: list[dict[str, Any]], vtest_events: int, vtest_hours: float) -> dict[str, Any]:
    falls = [c for c in clips if c["label"] == "fall"]
    adl = [c for c in clips if c["label"] == "adl"]
    still = [c for c in clips if c["label"] == "lying_still"]
    delays = [c["delay_s"] for c in falls if c.get("delay_s") is not None]
    return {
        "falls_detected": sum(c["detected"] for c in falls),
        "falls": len(falls),
        "adl_clips_with_event": sum(c["false_events"] > 0 for c in adl),
        "adl_clips": len(adl),
        "still_clips_with_event": sum(c["false_events"] > 0 for c in still),
        "still_clips": len(still),
        "vtest_events": vtest_events,
        "vtest_false_per_hour": vtest_events / vtest_hours,
        "auc": auc([c["max_score"] for c in falls], [c["max_score"] for c in adl]),
        "delay_s_median": float(np.median(delays)) if delays else None,
        "clips": clips,
    }


def site_thresholds(
    items: list[Item], replayed: dict[str, dict[str, Any]], floor: float
) -> dict[str, float]:
    """Per held-out camera, the threshold `edge-hf calibrate` sets from the same room's *other*
    recordings of normal activity seen by the same view: its daily-activity clips and each fall
    clip up to EARLY_S before the fall (a fall clip is calibrated on the others' pre-fall parts,
    never its own). Lying-still clips are not used (is a person on the floor normal there?).
    vtest.avi is its own site: calibrated on its first VTEST_CALIBRATION_S."""
    quiet: dict[int, list[tuple[str, float | None]]] = {}
    lowest = floor - CALIBRATION_MARGIN
    for it, view, name in views(items):
        if it.label == "lying_still":
            continue
        det = replayed[name]["detector"]
        trace = det.trace
        if it.label == "fall":
            trace = [x for x in trace if x[0] < (it.start_s or 0.0) - EARLY_S]
        quiet.setdefault(view, []).append((it.clip_id, quiet_point(trace, det, lowest)))

    def threshold(points: list[float | None]) -> float:
        return suggested_threshold(points, floor, CALIBRATION_MARGIN)

    out = {
        name: threshold([q for clip, q in quiet.get(view, []) if clip != it.clip_id])
        for it, view, name in views(items)
    }
    det = replayed["vtest"]["detector"]
    first = [x for x in det.trace if x[0] < VTEST_CALIBRATION_S]
    out["vtest"] = threshold([quiet_point(first, det, lowest)])
    return out


# Each fold model replayed in this process: (path, mtime) -> its replay_scores result, so that a
# row that differs only in detection settings re-runs the detector, not the model (a few MB per
# fold model: scores, not frames).
_SCORES: dict[tuple[str, int], dict[str, dict[str, Any]]] = {}


def _check_redetect(
    replayed: dict[str, dict[str, Any]], threshold: float, detection: dict[str, Any]
) -> None:
    """The detector re-run on the recorded scores must give the replay's own events."""
    again = redetect(replayed, threshold, detection)
    for name, r in replayed.items():
        if again[name]["events"] != r["events"]:
            raise RuntimeError(f"{name}: redetect {again[name]['events']} != replay {r['events']}")


def run_fold_model(
    model: Path,
    fold_items: list[Item],
    vtest: Path,
    state_dir: Path,
    threshold: float = 0.5,
    detection: dict[str, Any] | None = None,
    calibrated: bool = False,
    vtest_trained: bool = False,
    person: dict[str, Any] | None = None,
) -> tuple[list[dict[str, Any]], int, float]:
    """Replay a fold model on its held-out clips and vtest.avi: (clips, vtest events, vtest
    hours). `calibrated`: replayed once to calibrate each camera (`site_thresholds`), then again
    with those thresholds; vtest counts only alarms raised after its calibration part (also
    when the model trained on that part, `vtest_trained`)."""
    cams = [(name, it.path, it.crop) for it, _, name in views(fold_items)]
    cams.append(("vtest", vtest, ""))
    key = (str(model), model.stat().st_mtime_ns)
    if person:  # the pose verdicts are not in the scores: always a full replay
        replayed = replay_scores(model, cams, state_dir, threshold, detection, person)
    elif key in _SCORES:  # the same model at other settings: its scores again, new events
        replayed = redetect(_SCORES[key], threshold, detection or {})
    else:
        replayed = replay_scores(model, cams, state_dir, threshold, detection)
        _check_redetect(replayed, threshold, detection or {})
        _SCORES[key] = replayed
    skip_s = VTEST_CALIBRATION_S if calibrated or vtest_trained else 0.0
    if calibrated:
        thresholds = site_thresholds(fold_items, replayed, threshold)
        replayed = redetect(replayed, threshold, detection or {}, thresholds)
    v = replayed["vtest"]
    hours = (len(v["scores"]) * v["interval_s"] - skip_s) / 3600
    clips = score_fold(fold_items, replayed)
    if calibrated:
        by_clip: dict[str, list[float]] = {}
        for it, _, name in views(fold_items):
            by_clip.setdefault(it.clip_id, []).append(round(thresholds[name], 4))
        for c in clips:
            c["thresholds"] = by_clip[c["clip"]]
    return clips, sum(span[2] >= skip_s for span in v["events"]), hours


def run_variant_seed(
    name: str, variant: Variant, seed: int, items: list[Item], a: argparse.Namespace,
    folds: tuple[str, ...] = FOLDS,
) -> dict[str, Any]:  # fmt: skip
    """Train and export the fold models of one variant and seed, then replay them."""
    for fold in folds:
        ensure_fold_model(name, variant, seed, fold, items, a)
    return replay_variant_seed(name, seed, items, a, folds)


def replay_variant_seed(
    name: str, seed: int, items: list[Item], a: argparse.Namespace,
    folds: tuple[str, ...] = FOLDS,
) -> dict[str, Any]:  # fmt: skip
    """Replay each fold's exported model on its held-out clips (and vtest); the summed result."""
    all_clips: list[dict[str, Any]] = []
    vtest_events, vtest_hours = 0, 0.0
    v = VARIANTS[name]
    items, vtest = row_inputs(v, items, a)
    for fold in folds:
        rundir = fold_dir(Path(a.out), name, seed, fold)
        test, _ = split_fold(items, fold, Path(a.out))
        head = (
            fold_head(items, fold, seed, Path(a.out), v.pose_head, v.pose_head_mode)
            if v.pose_head
            else None
        )
        clips, ev, hours = run_fold_model(
            rundir / "model.onnx", test, vtest, rundir / "state", v.threshold,
            v.detection(), v.calibrated, v.vtest_negatives, v.person_config(head),
        )  # fmt: skip
        all_clips += clips
        vtest_events, vtest_hours = vtest_events + ev, vtest_hours + hours
    return summarise(all_clips, vtest_events, vtest_hours)


def run_shipped(model: Path, items: list[Item], a: argparse.Namespace) -> dict[str, Any]:
    """The model shipped before this benchmark, replayed on every fold as it is."""
    all_clips: list[dict[str, Any]] = []
    vtest_events, vtest_hours = 0, 0.0
    for i, fold in enumerate(FOLDS):
        test = [it for it in items if it.fold == fold]
        state = Path(a.out) / "work" / "shipped"
        clips, ev, hours = run_fold_model(model, test, Path(a.vtest), state)
        all_clips += clips
        if i == 0:  # one model: vtest once
            vtest_events, vtest_hours = ev, hours
    return summarise(all_clips, vtest_events, vtest_hours)
