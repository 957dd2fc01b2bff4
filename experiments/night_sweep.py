"""#40 item 3: which preprocessing of a grey (night) pose frame lets MoveNet find people most often?

    python -m experiments.night_sweep --out /tmp/night_sweep

The night condition's fall clip views and negatives (rendered by `make conditions-bench` under
`--conditions`; nothing is rendered here), read at the person stage's 5 Hz as `clip_people` reads
them: each tick's frame shrunk as `pose_frame` shrinks it, then every candidate below applied to
its grey channel and the pose model run alone (no second look). Per candidate:

- lying ticks with someone found (look_bench's measure: from the end of the descent,
  `fallen_from`, to the clip's end), overall and per clip view;
- on the night negatives (vtest.avi and ../shared/data/negatives, people walking, nobody falls)
  the people found per tick, and of them those *unmatched*: no person found on the same tick of
  the recording as it is (daylight, box IoU >= 0.3) -- the likely false people;
- ms per frame of the preprocessing alone, at the pose side and at the second look's view side.

The shrunk frames are kept under `<out>/frames` and each candidate's people under `<out>/people`
(keyed by the candidate's name, which spells its settings: rename one when changing it). The
candidate that reproduces `pose_frame` as it is now is marked (checked on each view's first tick).
Writes `<out>/night_sweep.md`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import cv2
import numpy as np

from edge_hf.core.pose import (
    POSE_MODEL,
    POSE_RATE_HZ,
    POSE_SIDE,
    PoseEstimator,
    iou,
    is_grey,
    pose_frame,
    shrunk,
)
from edge_hf.core.video import Crop, sample_file
from edge_hf.training.data import parse_crop
from experiments.realbench import load_items
from experiments.realbench.conditions import NEGATIVES, _dst, negative_items
from experiments.realbench.items import ASSIST, GMDCSA, VTEST, Item, views
from experiments.realbench.posehead import fallen_from

Grey = Callable[[np.ndarray], np.ndarray]  # (H, W) uint8 -> (H, W) uint8


def _clahe(clip: float, tiles: int) -> Grey:
    c = cv2.createCLAHE(clipLimit=clip, tileGridSize=(tiles, tiles))
    return lambda g: c.apply(g)


def _stretch(lo: float, hi: float) -> Grey:
    """Grey levels from the `lo` to the `hi` percentile spread over 0..255."""

    def f(g: np.ndarray) -> np.ndarray:
        a, b = np.percentile(g, (lo, hi))
        scale = 255.0 / max(float(b - a), 1.0)
        return cv2.convertScaleAbs(g, alpha=scale, beta=-float(a) * scale)

    return f


def _gamma(gamma: float) -> Grey:
    lut = np.clip(255.0 * (np.arange(256) / 255.0) ** gamma + 0.5, 0, 255).astype(np.uint8)
    return lambda g: cv2.LUT(g, lut)


def _then(*steps: Grey) -> Grey:
    def f(g: np.ndarray) -> np.ndarray:
        for s in steps:
            g = s(g)
        return g

    return f


MEDIAN3: Grey = lambda g: cv2.medianBlur(g, 3)  # noqa: E731
MEDIAN5: Grey = lambda g: cv2.medianBlur(g, 5)  # noqa: E731
GAUSS: Grey = lambda g: cv2.GaussianBlur(g, (5, 5), 1.0)  # noqa: E731
BILATERAL: Grey = lambda g: cv2.bilateralFilter(g, 5, 30, 5)  # noqa: E731


def _nlm(h: float, template: int = 7, search: int = 21) -> Grey:
    """Non-local means (OpenCV's defaults: a 7 px template searched for in 21 px)."""
    return lambda g: cv2.fastNlMeansDenoising(g, None, h, template, search)


CLAHE = _clahe(2.0, 4)
BASELINE = "clahe 2/4x4 (#40 item 2)"  # what pose_frame did before this sweep
CANDIDATES: dict[str, Grey] = {
    "grey as is": lambda g: g,
    BASELINE: CLAHE,
    "clahe 3/4x4": _clahe(3.0, 4),
    "clahe 4/4x4": _clahe(4.0, 4),
    "clahe 2/8x8": _clahe(2.0, 8),
    "clahe 3/8x8": _clahe(3.0, 8),
    "clahe 4/8x8": _clahe(4.0, 8),
    "equalizeHist": cv2.equalizeHist,
    "stretch 1-99": _stretch(1, 99),
    "gamma 0.8": _gamma(0.8),
    "median3 + clahe 2/4x4": _then(MEDIAN3, CLAHE),
    "median5 + clahe 2/4x4": _then(MEDIAN5, CLAHE),
    "gauss5 s1 + clahe 2/4x4": _then(GAUSS, CLAHE),
    "bilateral 5/30/5 + clahe 2/4x4": _then(BILATERAL, CLAHE),
    "nlm h5 + clahe 2/4x4": _then(_nlm(5), CLAHE),
    "nlm h10 + clahe 2/4x4": _then(_nlm(10), CLAHE),
    "nlm h3 + clahe 2/4x4": _then(_nlm(3), CLAHE),
    "nlm h7 + clahe 2/4x4": _then(_nlm(7), CLAHE),
    "nlm h5 7/11 + clahe 2/4x4": _then(_nlm(5, 7, 11), CLAHE),
    "nlm h5 5/7 + clahe 2/4x4": _then(_nlm(5, 5, 7), CLAHE),
    "nlm h5 3/7 + clahe 2/4x4": _then(_nlm(5, 3, 7), CLAHE),
    "nlm h4 5/7 + clahe 2/4x4": _then(_nlm(4, 5, 7), CLAHE),
    "nlm h6 5/7 + clahe 2/4x4": _then(_nlm(6, 5, 7), CLAHE),
    "nlm h5 5/7 (no clahe)": _nlm(5, 5, 7),
    "nlm h5 5/7 + clahe 3/4x4": _then(_nlm(5, 5, 7), _clahe(3.0, 4)),
    "nlm h5 5/7 + clahe 4/4x4": _then(_nlm(5, 5, 7), _clahe(4.0, 4)),
    "nlm h5 5/7 + stretch 1-99 + clahe 2/4x4": _then(_nlm(5, 5, 7), _stretch(1, 99), CLAHE),
    "stretch 1-99 + clahe 2/4x4": _then(_stretch(1, 99), CLAHE),
    "gamma 0.8 + clahe 2/4x4": _then(_gamma(0.8), CLAHE),
    "median3 + stretch 1-99 + clahe 2/4x4": _then(MEDIAN3, _stretch(1, 99), CLAHE),
    "median3 + clahe 3/8x8": _then(MEDIAN3, _clahe(3.0, 8)),
    "stretch 1-99 + clahe 3/8x8": _then(_stretch(1, 99), _clahe(3.0, 8)),
    "median3 + stretch 1-99 + clahe 3/8x8": _then(MEDIAN3, _stretch(1, 99), _clahe(3.0, 8)),
}


def prepared(frame: np.ndarray, grey: Grey) -> np.ndarray:
    """A shrunk BGR frame as the pose model would be given it with `grey` for grey frames."""
    if is_grey(frame):
        g = grey(np.ascontiguousarray(frame[..., 1]))
        return cv2.merge([g, g, g])
    return cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)


@dataclass
class View:
    """One clip view's ticks kept for the sweep: times and shrunk BGR frames."""

    name: str
    times: list[float]
    frames: list[np.ndarray]
    raw: np.ndarray  # the first tick's frame as read (the check, timing at the view side)
    crop: Crop | None


def collect(it: Item, crop: Crop | None, since: float | None, cache: Path) -> View:
    """The ticks of one view (from `since` on, when given), cached under `cache`."""
    key = f"{it.path}|{it.path.stat().st_mtime_ns}|{crop}|{since}|{POSE_SIDE}|{POSE_RATE_HZ}"
    npz = cache / f"{hashlib.sha1(key.encode()).hexdigest()[:16]}.npz"
    name = f"{it.path.stem}{' ' + it.crop if it.crop else ''}"
    if npz.exists():
        z = np.load(npz, allow_pickle=True)
        return View(name, list(z["times"]), list(z["frames"]), z["raw"], crop)
    times, frames, raw = [], [], None
    for t, frame in sample_file(it.path, 1 / POSE_RATE_HZ):
        if since is not None and t < since:
            continue
        raw = frame if raw is None else raw
        times.append(t)
        frames.append(shrunk(frame, crop, POSE_SIDE))
    if raw is None:
        raise RuntimeError(f"{it.path}: no tick after {since}")
    cache.mkdir(parents=True, exist_ok=True)
    obj = np.empty(len(frames), object)
    obj[:] = frames
    np.savez(npz, times=np.array(times), frames=obj, raw=raw)
    return View(name, times, frames, raw, crop)


def people_of(
    est: PoseEstimator, view: View, name: str, grey: Grey, cache: Path
) -> list[list[list[float]]]:
    """The boxes found on each tick of `view` with candidate `name`, cached by its name."""
    key = f"{view.name}|{len(view.frames)}|{view.times[0]}|{name}|{est.side}"
    path = cache / f"{hashlib.sha1(key.encode()).hexdigest()[:16]}.json"
    if path.exists():
        return json.loads(path.read_text())
    boxes = [[list(p.box) for p in est.people(prepared(f, grey))] for f in view.frames]
    cache.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(boxes))
    return boxes


def ms_per_frame(grey: Grey, frames: list[np.ndarray]) -> float:
    g = [np.ascontiguousarray(f[..., 1]) for f in frames]
    grey(g[0])  # (first call allocations)
    t0 = time.perf_counter()
    for f in g:
        grey(f)
    return 1000 * (time.perf_counter() - t0) / len(g)


def _tick(times: list[float]) -> list[int]:
    return [round(t * POSE_RATE_HZ) for t in times]


def unmatched(night: list[list[float]], day: list[list[float]]) -> int:
    return sum(all(iou(tuple(b), tuple(d)) < 0.3 for d in day) for b in night)  # type: ignore[arg-type]


def main() -> None:
    p = argparse.ArgumentParser(
        prog="python -m experiments.night_sweep",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    p.add_argument("--out", default="/tmp/night_sweep")
    p.add_argument("--conditions", default="benchmarks/results/real/conditions",
                   help="where the night condition's clips were rendered")  # fmt: skip
    p.add_argument("--only", nargs="+", help="these candidates (default: all)")
    p.add_argument("--threads", type=int, default=1, help="the pose model's threads")
    a = p.parse_args()
    out, rendered = Path(a.out), Path(a.conditions)
    est = PoseEstimator(POSE_MODEL, threads=a.threads, side=POSE_SIDE)
    items = load_items(GMDCSA, ASSIST)
    falls = [it for it, _, _ in views(items) if it.label == "fall"]
    negs = negative_items(VTEST, NEGATIVES)
    missing = [str(_dst(it, "night", rendered)) for it in falls + negs
               if not _dst(it, "night", rendered).exists()]  # fmt: skip
    if missing:
        raise SystemExit(f"not rendered (run `make conditions-bench`): {missing}")

    def night_view(it: Item, since: float | None) -> View:
        src = Item(it.fold, it.clip_id, _dst(it, "night", rendered).resolve(), it.label,
                   None, None, None, "")  # fmt: skip
        v = collect(src, None, since, out / "frames")
        v.name = f"{it.clip_id}{' ' + it.crop if it.crop else ''}"
        return v

    lying = [night_view(it, fallen_from(it)) for it in falls]
    night_negs = [night_view(it, None) for it in negs]
    day_negs = [collect(it, parse_crop(it.crop), None, out / "frames") for it in negs]
    day_falls = [collect(it, parse_crop(it.crop), fallen_from(it), out / "frames") for it in falls]
    grey_share = {
        "night lying": np.mean([is_grey(f) for v in lying for f in v.frames]),
        "night negatives": np.mean([is_grey(f) for v in night_negs for f in v.frames]),
        "recorded lying": np.mean([is_grey(f) for v in day_falls for f in v.frames]),
        "recorded negatives": np.mean([is_grey(f) for v in day_negs for f in v.frames]),
    }
    print("share of frames taken as grey:", grey_share, flush=True)
    checks = [(v.frames[0], pose_frame(v.raw, v.crop, POSE_SIDE)) for v in lying + night_negs]
    today = [n for n, g in CANDIDATES.items()
             if all(np.array_equal(prepared(f, g), c) for f, c in checks)]  # fmt: skip
    print("reproduces pose_frame:", today, flush=True)
    day_boxes = [people_of(est, v, "daylight", CANDIDATES["grey as is"], out / "people")
                 for v in day_negs]  # fmt: skip
    day_ppt = sum(len(b) for clip in day_boxes for b in clip) / sum(len(v.frames) for v in day_negs)
    print("negative ticks, night / recorded:", [len(v.frames) for v in night_negs],
          [len(v.frames) for v in day_negs], flush=True)  # fmt: skip
    day_lying = [people_of(est, v, "daylight", CANDIDATES["grey as is"], out / "people")
                 for v in day_falls]  # fmt: skip
    day_at = [dict(zip(_tick(v.times), b, strict=True)) for v, b in zip(day_falls, day_lying,
                                                                          strict=True)]  # fmt: skip
    timing = [f for v in lying for f in v.frames][::4]
    views_640 = [v.raw for v in lying + night_negs]
    rows, per_view = [], {}
    for name in a.only or list(CANDIDATES):
        grey = CANDIDATES[name]
        boxes = [people_of(est, v, name, grey, out / "people") for v in lying]
        found = [[len(b) > 0 for b in bb] for bb in boxes]
        # the lying ticks where daylight found someone, and of them those found here too
        seen = [[(b, day[k]) for k, b in zip(_tick(v.times), bb, strict=True) if day.get(k)]
                for v, bb, day in zip(lying, boxes, day_at, strict=True)]  # fmt: skip
        again = sum(len(b) - unmatched(b, d) > 0 for pairs in seen for b, d in pairs)
        per_view[name] = [(sum(f), len(f)) for f in found]
        neg = [people_of(est, v, name, grey, out / "people") for v in night_negs]
        ticks_n = sum(len(v.frames) for v in night_negs)
        people = sum(len(b) for clip in neg for b in clip)
        extra = sum(unmatched(b, d) for n, dd in zip(neg, day_boxes, strict=True)
                    for b, d in zip(n, dd, strict=False))  # fmt: skip
        row = {
            "candidate": name, "found": sum(map(sum, found)), "lying": sum(map(len, found)),
            "day_found": sum(map(len, seen)), "day_found_again": again,
            "neg_ppt": people / ticks_n, "neg_unmatched_ppt": extra / ticks_n,
            "neg_ppt_per_clip": [sum(map(len, n)) / len(n) for n in neg],
            "ms_256": ms_per_frame(grey, timing), "ms_view": ms_per_frame(grey, views_640),
            "today": name in today,
        }  # fmt: skip
        rows.append(row)
        print(json.dumps(row), flush=True)
    per_view["as recorded (daylight)"] = [(sum(len(b) > 0 for b in bb), len(bb))
                                          for bb in day_lying]  # fmt: skip
    t0 = time.perf_counter()
    for f in timing[:50]:
        est.people(prepared(f, CANDIDATES[BASELINE]))
    pose_ms = 1000 * (time.perf_counter() - t0) / len(timing[:50])
    md = markdown(rows, per_view, [v.name for v in lying], [it.clip_id for it in negs], day_ppt)
    md += f"\nThe pose model itself: {pose_ms:.1f} ms per 256 px frame ({a.threads} thread).\n"
    md += f"\nShare of frames taken as grey (`is_grey`): {json.dumps(grey_share)}\n"
    (out / "night_sweep.md").write_text(md)
    (out / "night_sweep.json").write_text(json.dumps({"rows": rows, "per_view": per_view}))
    print(md)


def markdown(
    rows: list[dict], per_view: dict, view_names: list[str], neg_names: list[str], day_ppt: float
) -> str:
    lines = [
        "| candidate (grey frames only) | lying ticks with someone found | views better / worse "
        "than the baseline | of the lying ticks where daylight found someone, found there again | "
        "people per tick, night negatives (" + ", ".join(neg_names) + ") | of them "
        "unmatched by daylight | ms per frame at 256 px | at the view (<= 640 px) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    base = per_view.get(BASELINE)
    for r in rows:
        pv = per_view[r["candidate"]]
        better = sum(f > b for (f, _), (b, _) in zip(pv, base, strict=True)) if base else 0
        worse = sum(f < b for (f, _), (b, _) in zip(pv, base, strict=True)) if base else 0
        clips = ", ".join(f"{x:.2f}" for x in r["neg_ppt_per_clip"])
        lines.append(
            f"| {r['candidate']}{' **(pose_frame)**' if r['today'] else ''} | "
            f"{r['found'] / r['lying']:.0%} ({r['found']}/{r['lying']}) | {better} / {worse} | "
            f"{r['day_found_again'] / r['day_found']:.0%} ({r['day_found_again']}/"
            f"{r['day_found']}) | "
            f"{r['neg_ppt']:.2f} ({clips}) | {r['neg_unmatched_ppt']:.2f} | "
            f"{r['ms_256']:.2f} | {r['ms_view']:.2f} |"
        )
    day = per_view["as recorded (daylight)"]
    lines += ["", f"As recorded (daylight), the same ticks: lying found "
              f"{sum(f for f, _ in day)}/{sum(n for _, n in day)}, negatives {day_ppt:.2f} people "
              "per tick.", ""]  # fmt: skip
    top = sorted(rows, key=lambda r: -r["found"])[:6]
    names = ["as recorded (daylight)"] + [r["candidate"] for r in rows
                                          if r["today"] or r in top or r is rows[0]
                                          or r["candidate"] == BASELINE]  # fmt: skip
    lines += ["Lying ticks with someone found per clip view (the first row, the baseline, "
              "pose_frame's and the six best):", ""]  # fmt: skip
    lines.append("| clip view | " + " | ".join(names) + " |")
    lines.append("| --- |" + " --- |" * len(names))
    for i, v in enumerate(view_names):
        cells = [f"{per_view[n][i][0]}/{per_view[n][i][1]}" for n in names]
        lines.append(f"| {v} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
