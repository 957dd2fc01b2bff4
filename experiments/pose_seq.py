"""#41: the pose-sequence model, trained on generated motion seen from every camera plus real
MoveNet tracks, measured against the pose rules and the learned head.

    python -m experiments.pose_seq --out benchmarks/results/pose_seq --seeds 0 1 2   # make pose-seq
    python -m experiments.pose_seq --final models/pose-seq.onnx --design conv1d

Generated motion (`edge_hf.training.skeleton`, `edge_hf.training.posegen`): each motion is one
person's 10 s (a fall of some style, or daily life), seen by one random camera with MoveNet's
errors, at the person stage's 5 Hz. Three generated sets, each from its own random stream:

- train: cameras outside the held-out views, motion styles outside the held-out styles;
- held-out views: cameras looking along the lying body (azimuth within AZIMUTH_BAND of 0 or 180
  degrees from the body's axis; pitch under CEILING_PITCH) and from the ceiling (pitch at least
  CEILING_PITCH), motion styles seen in training;
- held-out styles: `HELD_OUT_STYLES`, cameras anywhere outside the held-out views;
- seen: the training distribution, for reference.

Each held-out motion runs through the pose rules as the daemon runs them (`PoseFallRules`): a fall
is caught when a fall is confirmed from 1 s before its descent on, a daily-life motion raises an
event when any fall is confirmed. Rows: the hand rules; the rules vetoed by the shipped head
(`models/pose-head.json`); the rules and head joined by the sequence model (`person.sequence_mode:
join`); the sequence model deciding alone (`decide`).

Real footage (cached MoveNet poses of `make real-bench`'s clips): per leave-one-out fold (and the
reverse fold), a sequence model trained on the generated train set plus the real windows of the
fold's training clips and vtest.avi's first 40 s, replayed with that fold's head by
`pose_head.evaluate` (falls /16, activity clips /27, vtest events/h, negatives).

Writes `<out>/pose_seq.json` and `<out>/pose_seq.md`; fold models under `<out>/work`.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import math
import pickle
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from edge_hf.core.pose import POSE_MODEL, POSE_RATE_HZ, Box, Person, iou
from edge_hf.core.posefall import PoseFallRules
from edge_hf.core.posehead import PoseHead, file_sha256
from edge_hf.core.poseseq import PoseSequenceModel, SeqContract
from edge_hf.core.posewindow import WindowSpec
from edge_hf.training import posegen, skeleton
from edge_hf.training.poseseq import DESIGNS, FitSettings, WindowSet, export, fit, motion_windows
from edge_hf.training.poseseq import real_windows as clip_windows
from experiments.pose_head import NEGATIVES, evaluate
from experiments.realbench import ASSIST, FOLDS, GMDCSA, REVERSE, VTEST, Item, load_items
from experiments.realbench.items import VTEST_CALIBRATION_S
from experiments.realbench.posehead import (
    Poses,
    fallen_from,
    fold_head,
    fold_training,
    poses_of,
    view_keys,
)

log = logging.getLogger("pose_seq")

SPEC = WindowSpec(POSE_RATE_HZ, 20)
DURATION_S = 10.0
AZIMUTH_BAND = 20.0
CEILING_PITCH = 70.0
HEAD = Path("models/pose-head.json")
HEAD_THRESHOLD = 0.1  # the shipped head's veto threshold (make pose-head)
SETS = ("seen", "along the body", "from the ceiling", "held-out styles")
EARLY_S = 1.0


def along_body(cam: posegen.Camera) -> bool:
    a = cam.azimuth_deg % 180.0
    return min(a, 180.0 - a) <= AZIMUTH_BAND


def held_out_view(cam: posegen.Camera) -> bool:
    return cam.pitch_deg >= CEILING_PITCH or along_body(cam)


HELD_OUT_STYLES = ("twisting", "knees_first", "exercise", "kneel_crawl")  # 2 fall, 2 daily


@dataclass
class Sample:
    """One generated motion as the person stage would see it."""

    fall: bool
    kind: str
    style: str
    descent: tuple[float, float] | None
    phase: np.ndarray
    people: list[list[Person]]
    truth: list[Box | None]
    azimuth: float
    pitch: float


def generate(which: str, n: int, seed: int) -> list[Sample]:
    """`n` motions of set `which` (half falls), from random stream `seed`."""
    rng = np.random.default_rng(seed)
    out_styles = HELD_OUT_STYLES
    falls = tuple(k for k in skeleton.FALLS)
    daily = tuple(k for k in skeleton.DAILY)
    samples = []
    for i in range(n):
        kinds = falls if i % 2 == 0 else daily
        styles: tuple[str, ...]
        if which == "held-out styles":
            styles = out_styles
        else:
            styles = tuple(s for s in skeleton.STYLES if s not in out_styles)
        if which in ("train", "seen", "held-out styles"):
            cam_kw: dict[str, Any] = {"exclude": held_out_view}
        elif which == "along the body":
            cam_kw = {"exclude": lambda c: not along_body(c) or c.pitch_deg >= CEILING_PITCH}
        elif which == "from the ceiling":
            cam_kw = {"exclude": lambda c: c.pitch_deg < CEILING_PITCH}
        elif which == "all":
            cam_kw, styles = {}, skeleton.STYLES
        else:
            raise ValueError(which)
        m = _motion(rng, kinds, styles)
        cam = posegen.random_camera(rng, **cam_kw)
        people = posegen.observe(m, cam, posegen.random_errors(rng), rng)
        samples.append(Sample(m.fall, m.name, m.style, m.descent, m.phase, people,
                              posegen.skeleton_boxes(m, cam), cam.azimuth_deg,
                              cam.pitch_deg))  # fmt: skip
    return samples


def _motion(rng: np.random.Generator, kinds: tuple[str, ...], styles: tuple[str, ...]) -> Any:
    """A random motion of one of `kinds` in one of `styles` (kinds with no such style skipped)."""
    for _ in range(100):
        try:
            return skeleton.random_motion(rng, POSE_RATE_HZ, DURATION_S, kinds=kinds, styles=styles)
        except ValueError:
            continue
    raise RuntimeError(f"no motion of kinds {kinds} in styles {styles}")


def every_fold(model: PoseSequenceModel) -> Callable[[str], PoseSequenceModel]:
    """The same sequence model for every fold (one trained on generated motion only)."""
    return lambda fold: model


def cached(path: Path, make: Callable[[], Any]) -> Any:
    if path.exists():
        with path.open("rb") as fh:
            return pickle.load(fh)
    value = make()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as fh:
        pickle.dump(value, fh)
    return value


def sample_windows(samples: list[Sample], group0: int = 0) -> WindowSet:
    return WindowSet.concat([
        motion_windows(s.people, s.truth, s.phase, s.descent, SPEC, group0 + k)
        for k, s in enumerate(samples)
    ])  # fmt: skip


# --- real clips --------------------------------------------------------------------------------


def real_set(items: list[Item], poses: dict[tuple[str, int], Poses], vtest: Poses) -> WindowSet:
    """Labelled windows of `items`' clip views and of vtest.avi's first 40 s."""
    parts = [clip_windows(vtest, "pedestrians", None, None, SPEC, -1, VTEST_CALIBRATION_S)]
    for key, it in view_keys(items):
        parts.append(clip_windows(poses[key], it.label, it.start_s, fallen_from(it), SPEC, -2))
    return WindowSet.concat(parts)


def contract(design: str, trained_on: str) -> SeqContract:
    return SeqContract(SPEC.rate_hz, SPEC.ticks, POSE_MODEL.name, file_sha256(POSE_MODEL),
                       threshold=0.5, design=design, trained_on=trained_on)  # fmt: skip


# --- scoring generated motion ------------------------------------------------------------------


def caught(s: Sample, rules: PoseFallRules) -> bool:
    """A fall confirmed (from 1 s before the descent on, for a fall)."""
    t0 = (s.descent[0] - EARLY_S) if s.descent else -math.inf
    for i, people in enumerate(s.people):
        t = i / POSE_RATE_HZ
        if rules.update(t, people).new_fall and t >= t0:
            return True
    return False


def visible(s: Sample, ticks: int = 5) -> bool:
    """Whether the pose model finds the fallen person on at least `ticks` ticks after the
    descent: a fall any pose-based detector could see."""
    end = s.descent[1] if s.descent else math.inf
    found = sum(
        (box := s.truth[i]) is not None and any(iou(p.box, box) > 0.3 for p in people)
        for i, people in enumerate(s.people) if i / POSE_RATE_HZ >= end
    )  # fmt: skip
    return found >= ticks


def score_generated(samples: list[Sample], make: Callable[[], PoseFallRules]) -> dict[str, float]:
    falls = [s for s in samples if s.fall]
    daily = [s for s in samples if not s.fall]
    hits = [caught(s, make()) for s in falls]
    seen = [visible(s) for s in falls]
    false = sum(caught(s, make()) for s in daily)
    both = sum(h and v for h, v in zip(hits, seen, strict=True))
    return {"falls": len(falls), "falls_hit": sum(hits), "daily": len(daily), "daily_hit": false,
            "visible": sum(seen), "visible_hit": both}  # fmt: skip


THRESHOLDS = (0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.95)
MAX_ADDED = 0.02  # the threshold: the lowest adding at most this share of daily-life events


def choose_threshold(val: list[Sample], head: PoseHead, seq: PoseSequenceModel) -> float:
    """The lowest P(falling) threshold at which the sequence model joined to the rules and head
    adds events on at most MAX_ADDED of the validation set's daily-life motions over the rules
    and head alone (generated like the training set from another random stream: never the
    held-out sets)."""
    daily = [s for s in val if not s.fall]
    base = score_generated(daily, lambda: PoseFallRules(head=head))["daily_hit"]
    for thr in THRESHOLDS:
        seq.contract = replace(seq.contract, threshold=thr)
        r = score_generated(daily, lambda: PoseFallRules(head=head, seq=seq))
        if r["daily_hit"] - base <= MAX_ADDED * len(daily):
            return thr
    return THRESHOLDS[-1]


def detectors(
    head: PoseHead, seq: PoseSequenceModel | None
) -> dict[str, Callable[[], PoseFallRules]]:
    rows: dict[str, Callable[[], PoseFallRules]] = {
        "hand rules": PoseFallRules,
        "rules + head (veto 0.1)": lambda: PoseFallRules(head=head),
    }
    if seq is not None:
        rows["rules + head + sequence (join)"] = lambda: PoseFallRules(head=head, seq=seq)
        rows["sequence alone (decide)"] = lambda: PoseFallRules(seq=seq, seq_mode="decide")
    return rows


def every_other(w: WindowSet) -> WindowSet:
    """Every second window (neighbouring ticks' windows are nearly the same): half the cost."""
    return WindowSet(w.x[::2], w.y[::2], w.mask[::2], w.group[::2])


def train_model(data: WindowSet, design: str, seed: int, val: list[Sample], head: PoseHead,
                path: Path, what: str) -> PoseSequenceModel:  # fmt: skip
    """A `design` model trained on `data`, its threshold chosen on `val`, exported to `path`
    (kept: a second run reads it)."""
    if not path.exists():
        net = fit(data, design, SPEC.ticks, FitSettings(seed=seed, epochs=EPOCHS))
        export(net, contract(design, what), path)
        seq = PoseSequenceModel(path)
        export(net, replace(seq.contract, threshold=choose_threshold(val, head, seq)), path)
    return PoseSequenceModel(path)


EPOCHS = 8


def main() -> None:
    p = argparse.ArgumentParser(
        prog="python -m experiments.pose_seq", description=__doc__.split("\n")[0]
    )
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/pose_seq"))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--designs", nargs="+", choices=DESIGNS, default=list(DESIGNS))
    p.add_argument("--train-motions", type=int, default=2000)
    p.add_argument("--heatmap-motions", type=int, default=2000)
    p.add_argument("--test-motions", type=int, default=200, help="per held-out set")
    p.add_argument("--stage", choices=("heldout", "real"), default="heldout",
                   help="heldout: generated held-out views, styles; real: real folds")  # fmt: skip
    p.add_argument("--final", type=Path, help="train one model on everything, write it here")
    p.add_argument("--design", choices=DESIGNS, default="conv1d", help="--final's design")
    a = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    torch.set_num_threads(1)  # small models: threads only fight over the 2 cores

    work = a.out / "work"
    head = PoseHead.load(HEAD)
    path = a.out / "pose_seq.json"
    results: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    results["spec"] = [SPEC.rate_hz, SPEC.ticks]
    if a.final or a.stage == "real":
        every = cached(work / "all.pkl", lambda: generate("all", a.train_motions, 100))
        val_all = cached(work / "val_all.pkl", lambda: generate("all", a.test_motions, 31))
        synth_all = every_other(sample_windows(every))
    if a.final:
        items, poses, vtest = real_poses()
        data = WindowSet.concat([synth_all, real_set(items, poses, vtest)])
        what = (f"{a.train_motions} generated motions (every view and style) + MoveNet tracks of "
                "GMDCSA24, ASSIST-IoT and vtest.avi's first 40 s")  # fmt: skip
        a.final.unlink(missing_ok=True)
        seq = train_model(data, a.design, 0, val_all, head, a.final, what)
        print(f"wrote {a.final} (threshold {seq.contract.threshold:g})")
        return
    if a.stage == "real":
        part = {"real": real_folds(a, synth_all, val_all, head, work)}
    else:
        part = {"generated": held_out(a, head, work, results), "thresholds": results["thresholds"]}
    # read again: another stage may have written its part meanwhile
    results = json.loads(path.read_text()) if path.exists() else {"spec": results["spec"]}
    results.update(part)
    a.out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=1))
    (a.out / "pose_seq.md").write_text(markdown(results))
    print(markdown(results))


def held_out(
    a: argparse.Namespace, head: PoseHead, work: Path, results: dict[str, Any]
) -> dict[str, Any]:
    """Event figures per held-out generated set: the rules, the head, each design and seed."""
    t0 = time.monotonic()
    train = cached(work / "train.pkl", lambda: generate("train", a.train_motions, 1))
    tests = {name: cached(work / f"test_{k}.pkl", partial(generate, name, a.test_motions, 10 + k))
             for k, name in enumerate(SETS)}  # fmt: skip
    val = cached(work / "val.pkl", lambda: generate("seen", a.test_motions, 30))
    synth = every_other(sample_windows(train))
    # the heatmap design costs ~4 times more to train: --heatmap-motions of the motions
    small = every_other(sample_windows(train[: a.heatmap_motions]))
    log.info("generated: %d train windows from %d motions (%.0f s)", len(synth), len(train),
             time.monotonic() - t0)  # fmt: skip
    out: dict[str, Any] = {}
    for name, make in detectors(head, None).items():
        out[name] = {s: score_generated(tests[s], make) for s in SETS}
    thresholds = results.setdefault("thresholds", {})
    for design in a.designs:
        for seed in a.seeds:
            data = synth if design == "conv1d" else small
            path = work / f"{design}_s{seed}_heldout.onnx"
            seq = train_model(data, design, seed, val, head, path,
                              "generated, held-out views and styles left out")  # fmt: skip
            thresholds[f"{design} s{seed} held-out"] = seq.contract.threshold
            for name, make in list(detectors(head, seq).items())[2:]:
                key = f"{name}, {design}"
                out.setdefault(key, {})[str(seed)] = {
                    s: score_generated(tests[s], make) for s in SETS
                }
                log.info("%s seed %d: %s", key, seed, json.dumps(out[key][str(seed)]))
    return out


def real_poses() -> tuple[list[Item], dict[tuple[str, int], Poses], Poses]:
    from tqdm import tqdm

    items = load_items(GMDCSA, ASSIST)
    cache = Path("benchmarks/results/real/cache")
    poses = {key: poses_of(it.path, it.crop, cache)
             for key, it in tqdm(view_keys(items), desc="poses", unit="view")}  # fmt: skip
    return items, poses, poses_of(VTEST.resolve(), "", cache)


def real_folds(a: argparse.Namespace, synth: WindowSet, val: list[Sample], head: PoseHead,
               work: Path) -> dict[str, Any]:  # fmt: skip
    """The real leave-one-out folds on cached poses: each fold's head alone, and with a sequence
    model trained on generated motion only (every real clip unseen: one model per seed serves
    every fold) or on generated motion plus the fold's training clips (seed 0)."""
    items, poses, vtest = real_poses()
    cache = Path("benchmarks/results/real/cache")
    with (NEGATIVES / "manifest.csv").open(newline="") as fh:
        negatives = {r["path"]: poses_of((NEGATIVES / r["path"]).resolve(), "", cache)
                     for r in csv.DictReader(fh)}  # fmt: skip
    out: dict[str, Any] = {}

    def head_of(fold: str, seed: int) -> PoseHead:
        return PoseHead.load(fold_head(items, fold, seed, Path("benchmarks/results/real"),
                                       HEAD_THRESHOLD, "veto"))  # fmt: skip

    def run(key: str, seed: int, seq_of: Callable[[str], PoseSequenceModel | None]) -> None:
        def rules_for(fold: str) -> Callable[[], PoseFallRules]:
            h, s = head_of(fold, seed), seq_of(fold)
            return lambda: PoseFallRules(head=h, seq=s)

        out.setdefault(key, {})[str(seed)] = evaluate(items, poses, vtest, negatives, rules_for)
        log.info("real %s seed %d: %s", key, seed, json.dumps(out[key][str(seed)]["all"]))

    for seed in a.seeds:
        run("rules + head (veto 0.1)", seed, lambda fold: None)
        seq = train_model(synth, "conv1d", seed, val, head, work / f"conv1d_s{seed}_generated.onnx",
                          "generated motion only (every view and style)")  # fmt: skip
        run(
            "rules + head + sequence (join), conv1d on generated motion only",
            seed,
            every_fold(seq),
        )
    models: dict[str, PoseSequenceModel] = {}
    for fold in (*FOLDS, REVERSE):
        real = real_set(fold_training(items, fold), poses, vtest)
        models[fold] = train_model(WindowSet.concat([synth, real]), "conv1d", 0, val, head,
                                   work / f"conv1d_s0_{fold}.onnx",
                                   f"generated + real fold {fold}")  # fmt: skip
    run("rules + head + sequence (join), conv1d on generated + real", 0, models.__getitem__)
    return out


def _ms(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.1f}"
    return f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}"


def markdown(results: dict[str, Any]) -> str:
    lines = ["## Held-out generated views and styles (an event per motion, 5 Hz, 10 s each)", "",
             "Per set: falls caught, of them the falls the pose model could see (the person found "
             "on 5 ticks after the descent), and daily-life motions with an event.", "",
             "| detector | seeds | " + " | ".join(f"{s}: falls | {s}: seen falls | {s}: daily"
                                                   for s in SETS) + " |",
             "| --- | --- |" + " --- | --- | --- |" * len(SETS)]  # fmt: skip
    for name, runs in results.get("generated", {}).items():
        per_seed = [runs] if "seen" in runs and "falls" in runs["seen"] else list(runs.values())
        cells = []
        for s in SETS:
            r = [x[s] for x in per_seed]
            fh = [100 * x["falls_hit"] / max(x["falls"], 1) for x in r]
            vh = [100 * x["visible_hit"] / max(x["visible"], 1) for x in r]
            dh = [100 * x["daily_hit"] / max(x["daily"], 1) for x in r]
            cells += [f"{_ms(fh)} % of {r[0]['falls']}", f"{_ms(vh)} % of {r[0]['visible']}",
                      f"{_ms(dh)} % of {r[0]['daily']}"]  # fmt: skip
        n = str(len(per_seed)) if len(per_seed) > 1 else "–"
        lines.append(f"| {name} | {n} | " + " | ".join(cells) + " |")
    if results.get("real"):
        lines += ["", "## Real clips, leave-one-out (cached MoveNet poses, no CNN)", "",
                  "| detector | seeds | falls /16 | activity clips /27 | lying still /2 "
                  "| vtest events/h "
                  "| reverse falls /14 | reverse clips /9 | negatives events |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
        for name, runs in results["real"].items():
            rs = list(runs.values())

            def col(part: str, k: str, rs: list[dict[str, Any]] = rs) -> str:
                return _ms([float(r[part][k]) for r in rs])

            lines.append(f"| {name} | {len(rs)} | {col('all', 'falls_hit')} "
                         f"| {col('all', 'adl_clips_hit')} "
                         f"| {col('all', 'still_clips_hit')} | {col('all', 'vtest_per_hour')} "
                         f"| {col('reverse', 'falls_hit')} | {col('reverse', 'adl_clips_hit')} "
                         f"| {_ms([float(r['negatives_events']) for r in rs])} |")  # fmt: skip
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
