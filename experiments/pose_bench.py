"""The person/pose stage on real footage: how often it finds the person, and pose rules as a peer.

    python -m experiments.pose_bench --out benchmarks/results/pose

1. Runs MoveNet MultiPose (`edge_hf.core.pose`) every `--interval-ms` of each clip's time on every
   clip and view of GMDCSA24 and ASSIST-IoT, on vtest.avi and on ../shared/data/negatives, and
   caches what it found (`<out>/cache/*.json`, reused when present).
2. Share of ticks where it finds a person, by dataset/view and by phase of a fall clip (standing
   before it, the descent, lying after it) and over daily-activity clips; the share of lying ticks
   whose geometry reads "down" by each signal (torso, aspect, hips) against daily activities; the
   cost per frame.
3. The peer row: pose + rules, no CNN (`edge_hf.core.posefall`), scored exactly as
   `experiments/real_benchmark.py` scores a model (falls detected, daily-activity clips with an
   event, events per hour on vtest.avi), plus the negatives. It trains on nothing, so every clip
   is held out.

Writes `<out>/pose.json` and `<out>/pose.md`.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from edge_hf.core.pose import POSE_SIDE, Person, PoseEstimator, features
from edge_hf.core.posefall import PoseFallRules, PoseRuleSettings, down_reasons, is_upright
from edge_hf.core.video import cut, sample_file
from edge_hf.training.data import parse_crop
from experiments import realbench as rb

log = logging.getLogger("pose_bench")
NEGATIVES = Path("../shared/data/negatives")


def camera_list(a: argparse.Namespace) -> list[tuple[str, rb.Item]]:
    """(camera name, item) of every clip view, vtest.avi and the negatives."""
    items = rb.load_items(Path(a.gmdcsa), Path(a.assist))
    cams = [(name, it) for it, _, name in rb.views(items)]
    cams.append(("V_vtest", rb.Item("V", "vtest", Path(a.vtest).resolve(), "adl", None,
                                    None, None, "")))  # fmt: skip
    with (Path(a.negatives) / "manifest.csv").open(newline="") as fh:
        for r in csv.DictReader(fh):
            p = (Path(a.negatives) / r["path"]).resolve()
            cams.append((f"N_{p.stem}", rb.Item("N", p.stem, p, "adl", None, None, None, "")))
    return cams


def run_pose(est: PoseEstimator, it: rb.Item, interval_s: float) -> dict[str, Any]:
    """People found at every tick of one clip view (frames nearest k * interval_s)."""
    crop = parse_crop(it.crop)
    ticks, cost = [], []
    for t, frame in sample_file(it.path, interval_s, it.fps or None):
        rgb = cv2.cvtColor(cut(frame, crop), cv2.COLOR_BGR2RGB)
        t0 = time.perf_counter()
        people = est.people(rgb)
        cost.append(time.perf_counter() - t0)
        ticks.append({"t": t, "people": [_person_json(p) for p in people]})
    return {"ticks": ticks, "pose_ms": 1000 * float(np.mean(cost)) if cost else None,
            "frame_hw": list(rgb.shape[:2]) if ticks else None}  # fmt: skip


def _person_json(p: Person) -> dict[str, Any]:
    return {"box": [round(v, 1) for v in p.box], "score": round(p.score, 3),
            "kp": np.round(p.keypoints, 2).tolist()}  # fmt: skip


def _person(d: dict[str, Any]) -> Person:
    return Person(tuple(d["box"]), d["score"], np.asarray(d["kp"], np.float32))


def phase(it: rb.Item, t: float) -> str | None:
    """standing / falling / lying for a fall clip (GMDCSA24's segment end includes the lying:
    the descent is its first 1.5 s, as the benchmark labels it), adl otherwise."""
    if it.label != "fall":
        return "adl" if it.label == "adl" else "still"
    start = it.start_s or 0.0
    end = it.end_s if it.end_s is not None else start + rb.GMDCSA_DESCENT_S
    descent = end - start if it.fold == "A" else min(rb.GMDCSA_DESCENT_S, (end - start) / 2)
    if t < start - 0.3:
        return "standing"
    if start <= t <= start + descent:
        return "falling"
    if t >= start + descent + 0.2:
        return "lying"
    return None


def group(name: str, it: rb.Item) -> str:
    if it.fold == "A":
        return f"ASSIST-IoT {'main' if name.endswith('_v1') else 'side'}"
    return {"V": "vtest.avi", "N": "negatives"}.get(it.fold, "GMDCSA24")


def coverage(cams: list[tuple[str, rb.Item]], cache: dict[str, Any]) -> dict[str, Any]:
    """Share of ticks with a person, and of each "down" signal, per group and phase."""
    s = PoseRuleSettings()
    acc: dict[str, dict[str, list[float]]] = {}
    for name, it in cams:
        ref_hip, ref_h = None, None
        for tick in cache[name]["ticks"]:
            ph = phase(it, tick["t"])
            people = [_person(d) for d in tick["people"]]
            if people:
                f = features(people[0])
                if is_upright(f, people[0], s):
                    ref_hip, ref_h = f.hip_y, people[0].height
            if ph is None:
                continue
            row = acc.setdefault(f"{group(name, it)} | {ph}", {})
            why = down_reasons(features(people[0]), ref_hip, ref_h, s) if people else []
            for key, v in [("found", bool(people)), ("torso", "torso" in why),
                           ("aspect", "aspect" in why), ("hips", "hips" in why),
                           ("down", bool(why))]:  # fmt: skip
                row.setdefault(key, []).append(float(v))
    shares = {}
    for k, r in sorted(acc.items()):
        shares[k] = {m: round(100 * float(np.mean(v)), 1) for m, v in r.items()}
        shares[k]["ticks"] = len(r["found"])
    return shares


def rules_replay(
    ticks: list[dict[str, Any]], settings: PoseRuleSettings, interval_s: float
) -> list[list[float]]:
    """Event spans [start, end, raised] of the pose rules over one clip view, its last tick held
    `rb.HOLD_END_S` more (as the benchmark holds each clip's last frame)."""
    rules = PoseFallRules(settings)
    if ticks:
        last = ticks[-1]
        extra = int(rb.HOLD_END_S / interval_s)
        ticks = ticks + [{**last, "t": last["t"] + (k + 1) * interval_s} for k in range(extra)]
    spans: list[list[float]] = []
    open_: list[float] | None = None
    for tick in ticks:
        v = rules.update(tick["t"], [_person(d) for d in tick["people"]])
        if v.fall and open_ is None:
            start = min((tr.down_since for tr in rules.tracks if tr.fallen and tr.down_since
                         is not None), default=tick["t"])  # fmt: skip
            open_ = [start, tick["t"], tick["t"]]
        elif not v.fall and open_ is not None:
            open_[1] = tick["t"]
            spans.append(open_)
            open_ = None
    if open_ is not None:
        open_[1] = ticks[-1]["t"]
        spans.append(open_)
    return spans


def score_rules(
    cams: list[tuple[str, rb.Item]], cache: dict[str, Any], s: PoseRuleSettings, interval_s: float
) -> dict[str, Any]:
    items = [it for _, it in cams if it.fold not in ("V", "N")]
    replayed: dict[str, dict[str, Any]] = {
        name: {"scores": [0.0], "events": rules_replay(cache[name]["ticks"], s, interval_s)}
        for name, _ in cams
    }
    clips = rb.score_fold(items, replayed)
    vt = cache["V_vtest"]["ticks"]
    vtest_hours = (vt[-1]["t"] + rb.HOLD_END_S) / 3600
    result = rb.summarise(clips, len(replayed["V_vtest"]["events"]), vtest_hours)
    result.pop("auc")
    neg = {n: len(replayed[n]["events"]) for n, it in cams if it.fold == "N"}
    neg_hours = sum(cache[n]["ticks"][-1]["t"] + rb.HOLD_END_S for n in neg) / 3600
    result["negatives_events"] = neg
    result["negatives_false_per_hour"] = sum(neg.values()) / neg_hours
    result["missed"] = [c["clip"] for c in clips if c["label"] == "fall" and not c["detected"]]
    result["false"] = [c["clip"] for c in clips if c["label"] != "fall" and c["false_events"]]
    return result


BY_VIEW_ROWS = [
    "lite0 T=3 ImageNet falling+down 160px, 3-seed ensemble, confirm 2 s",
    "lite0 T=3 ImageNet falling+down 160px, confirm 2 s",
    "pose + rules alone (MoveNet MultiPose, no CNN)",
    "lite0 T=3 ImageNet falling+down 160px + pose rules or pose-confirmed CNN (combined), "
    "confirm 2 s",
]
SWEEP = {"lying_deg": (50.0, 70.0), "lying_aspect": (1.1, 1.6), "drop_frac": (0.25, 0.5),
         "max_descent_s": (1.5, 3.0), "confirm_s": (0.5, 2.0)}  # fmt: skip


def sensitivity(
    cams: list[tuple[str, rb.Item]], cache: dict[str, Any], interval_s: float
) -> list[dict[str, Any]]:
    """The peer row with one setting moved at a time (a robustness check, not a tuning: the
    defaults were fixed before any clip was scored)."""
    rows = []
    for key, values in SWEEP.items():
        for value in values:
            r = score_rules(cams, cache, replace(PoseRuleSettings(), **{key: value}), interval_s)
            rows.append({"setting": f"{key} = {value:g}", "falls": r["falls_detected"],
                         "adl": r["adl_clips_with_event"], "vtest": r["vtest_events"],
                         "negatives": sum(r["negatives_events"].values())})  # fmt: skip
    return rows


def markdown(res: dict[str, Any]) -> str:
    lines = ["# The person/pose stage on real footage (experiments/pose_bench.py)", "",
             f"MoveNet MultiPose Lightning, long side {res['side']} px, a tick every "
             f"{res['interval_ms']:g} ms; CPU cost per frame {res['pose_ms']:.1f} ms "
             f"(mean over {res['frames']} frames, ONNX Runtime, this machine's 2 cores).", "",
             "## Where it finds the person, and what the geometry says (% of ticks)", "",
             "| footage | phase | ticks | person found | down (any) | torso ≥ 60° | box wide "
             "| hips dropped |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for k, r in res["coverage"].items():
        lines.append(f"| {k} | {r['ticks']} | {r['found']} | {r['down']} | {r['torso']} | "
                     f"{r['aspect']} | {r['hips']} |")  # fmt: skip
    r = res["rules"]
    lines += ["", "## Peer row: pose + rules, no CNN (every clip held out)", "",
              f"Settings: `{json.dumps(res['settings'])}`", "",
              "| falls detected | daily-activity clips with an event | lying-still clips | "
              "false events/h vtest.avi | negatives (events/h) |",
              "| --- | --- | --- | --- | --- |",
              f"| {r['falls_detected']} / {r['falls']} | {r['adl_clips_with_event']} / "
              f"{r['adl_clips']} | {r['still_clips_with_event']} / {r['still_clips']} | "
              f"{r['vtest_false_per_hour']:.0f} | {sum(r['negatives_events'].values())} "
              f"({r['negatives_false_per_hour']:.0f}/h) |", "",
              f"Missed: {', '.join(r['missed']) or 'none'}. "
              f"False: {', '.join(r['false']) or 'none'}.", "",
              "One setting moved at a time (robustness, not tuning):", "",
              "| setting | falls /16 | activity clips /27 | vtest events | negatives events |",
              "| --- | --- | --- | --- | --- |"]  # fmt: skip
    for row in res["sensitivity"]:
        lines.append(f"| {row['setting']} | {row['falls']} | {row['adl']} | {row['vtest']} | "
                     f"{row['negatives']} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(
        prog="python -m experiments.pose_bench", description=__doc__.splitlines()[0]
    )
    p.add_argument("--out", default="benchmarks/results/pose")
    p.add_argument("--gmdcsa", default=str(rb.GMDCSA))
    p.add_argument("--assist", default=str(rb.ASSIST))
    p.add_argument("--vtest", default=str(rb.VTEST))
    p.add_argument("--negatives", default=str(NEGATIVES))
    p.add_argument("--interval-ms", type=float, default=200.0)
    p.add_argument("--side", type=int, default=POSE_SIDE)
    p.add_argument("--runs", default="benchmarks/results/real/runs.json",
                   help="make real-bench's results, for falls by view and size")  # fmt: skip
    a = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    out = Path(a.out)
    (out / "cache").mkdir(parents=True, exist_ok=True)
    est = PoseEstimator(side=a.side, threads=2)
    cams = camera_list(a)
    cache: dict[str, Any] = {}
    for k, (name, it) in enumerate(cams):
        f = out / "cache" / f"{name}_{a.side}_{a.interval_ms:g}.json"
        if not f.exists():
            f.write_text(json.dumps(run_pose(est, it, a.interval_ms / 1000)))
        cache[name] = json.loads(f.read_text())
        log.info("[%d/%d] %s: %d ticks", k + 1, len(cams), name, len(cache[name]["ticks"]))
    frames = [len(c["ticks"]) for c in cache.values()]
    pose_ms = float(np.average([c["pose_ms"] for c in cache.values()], weights=frames))
    settings = PoseRuleSettings()
    res = {"side": a.side, "interval_ms": a.interval_ms, "pose_ms": pose_ms, "frames": sum(frames),
           "coverage": coverage(cams, cache), "settings": asdict(settings),
           "rules": score_rules(cams, cache, settings, a.interval_ms / 1000),
           "sensitivity": sensitivity(cams, cache, a.interval_ms / 1000)}  # fmt: skip
    md = markdown(res)
    runs_file = Path(a.runs)
    if runs_file.is_file():  # falls detected by view and size of the person, per benchmark row
        views = fall_views(cams, cache)
        res["fall_views"] = views
        md += ("\n## Falls detected by view and by the person's size in the frame\n\n"
               "From the pose cache: `lying across` = the lying person's box wider than tall (a "
               "side view), `along` = a camera looking along the body; size = the standing "
               "person's box height / frame height. Rows from " f"`{runs_file}`.\n\n"
               + recall_by_view(runs_file, views, BY_VIEW_ROWS))  # fmt: skip
    (out / "pose.json").write_text(json.dumps(res, indent=1))
    (out / "pose.md").write_text(md)
    print(md)


def fall_views(cams: list[tuple[str, rb.Item]], cache: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Per fall clip (its first view): how the camera sees the person lying -- `across` (the
    lying box wider than tall: a side view), `along` (a camera looking along the body) or
    `unseen` (nobody found lying) -- and how tall the standing person is in the frame."""
    out: dict[str, dict[str, Any]] = {}
    for name, it in cams:
        if it.label != "fall" or it.clip_id in out:
            continue
        c = cache[name]
        frame_h = (c.get("frame_hw") or [1, 1])[0]
        lying, standing = [], []
        for tick in c["ticks"]:
            people = [_person(d) for d in tick["people"]]
            if not people:
                continue
            ph = phase(it, tick["t"])
            if ph == "lying":
                lying.append(people[0].width / max(people[0].height, 1e-6))
            elif ph == "standing":
                standing.append(people[0].height / frame_h)
        view = "unseen" if not lying else ("across" if np.median(lying) >= 1.0 else "along")
        height = float(np.median(standing)) if standing else None
        out[it.clip_id] = {"view": view, "height": height}
    return out


def recall_by_view(runs_file: Path, views: dict[str, dict[str, Any]], rows: list[str]) -> str:
    """Falls detected per row, split by view and by the person's height in the frame (mean over
    the row's seeds), as a Markdown table."""
    runs = json.loads(runs_file.read_text())

    def group(clip: str) -> list[str]:
        v = views[clip]
        h = v["height"]
        size = "person < 40 % of the frame" if h is not None and h < 0.4 else "person >= 40 %"
        return [f"lying {v['view']}", size if h is not None else "never seen standing"]

    groups = sorted({g for c in views for g in group(c)})
    lines = ["| row | seeds | " + " | ".join(groups) + " |", "|" + " --- |" * (len(groups) + 2)]
    for row in rows:
        seeds = [r for r in runs.values() if r.get("variant") == row]
        if not seeds:
            continue
        cells = []
        for g in groups:
            clips = [c for c in views if g in group(c)]
            hits = [sum(1 for c in r["clips"] if c["clip"] in clips and c["detected"])
                    for r in seeds]  # fmt: skip
            cells.append(f"{np.mean(hits):.1f} / {len(clips)}")
        lines.append(f"| {row} | {len(seeds)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
