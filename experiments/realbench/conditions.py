"""The conditions benchmark (#40): every held-out clip also replayed as a home camera would see it
in conditions the five rooms do not contain -- far away, at night, half hidden, beside a second
person, on a portrait phone, at 5 fps, through a wide-angle lens, from higher up.

Each condition is a pure transform of the recorded frames (after the view's crop, at most
`RENDER_SIDE` pixels on the long side), rendered once
into `<out>/conditions/<condition>/` (MJPG, quality 95, the frame nearest each 100 ms sampling
tick, i.e. what the daemon samples from the recording; `low rate` every other one, at 5 fps)
and then replayed like any clip: the daemon's pipeline, detector and person stage, each fold's own
models, nothing fitted on a transformed frame. What each transform does is its docstring (the
README's conditions table quotes them).

The second person is composited, not filmed: a person cut out of another recording (within
MoveNet's box of them, what differs from that recording's empty room) pasted into the frame,
mirrored. It carries the donor room's light, not the target's, and the donors' clips are in some
folds' training data (a fold model may have seen that person; never in that place of that room).
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import math
import pickle
import statistics
from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from edge_hf.core.hyperframe import nearest_index
from edge_hf.core.pose import POSE_MODEL, Person, PoseEstimator
from edge_hf.core.secondlook import LookSettings
from edge_hf.core.video import file_fps
from edge_hf.training.data import parse_crop

from .items import ASSIST, FOLDS, GMDCSA, Item, split_fold, views
from .posehead import fold_head
from .scoring import replay_scores, score_fold, summarise
from .training import ensure_fold_model
from .variants import CONDITION_AUG_RECIPE, SHIPPED_RECIPE, VARIANTS
from .zoom import _frames

log = logging.getLogger("real_benchmark")

Frame = np.ndarray  # (H, W, 3) uint8 BGR

# Daily-activity clips that look most like a fall (the list: lying down slowly or
# quickly, sitting on the floor or a bed, crawling, kneeling, bending, collapsing onto a chair,
# stumbling), chosen by the words of each clip's description, never by its scores.
HARD_WORDS = (
    "lay",
    "lying",
    "floor",
    "ground",
    "crawl",
    "knee",
    "bend",
    "bed",
    "collaps",
    "stumbl",
)


def is_hard(description: str) -> bool:
    """Whether a daily-activity clip's description names a fall look-alike (`HARD_WORDS`)."""
    d = description.lower()
    return any(w in d for w in HARD_WORDS)


# -- the transforms: frame (BGR) and its time in the clip -> frame ------------------------------


def far(frame: Frame, t: float, k: int) -> Frame:
    """The frame shrunk to 0.3 of its size into a canvas of the original size (its mean colour
    with faint noise), placed low and off-centre as a camera across a large room sees a person:
    someone 60 % of the frame high becomes 18 %."""
    h, w = frame.shape[:2]
    small = cv2.resize(frame, (round(w * 0.3), round(h * 0.3)), interpolation=cv2.INTER_AREA)
    canvas = np.empty_like(frame)
    canvas[:] = frame.reshape(-1, 3).mean(0).astype(np.uint8)
    canvas = _noise(canvas, 3.0, k)
    sh, sw = small.shape[:2]
    y0, x0 = round(0.55 * (h - sh)), round(0.3 * (w - sw))
    canvas[y0 : y0 + sh, x0 : x0 + sw] = small
    return canvas


def night(frame: Frame, t: float, k: int) -> Frame:
    """An infrared camera at night: one channel weighted to red (skin and cloth bright, as under
    IR), contrast cut to 45 % around a dark level (flat background), gamma 1.3, Gaussian sensor
    noise of sd 9 grey levels, grey in all three channels."""
    b, g, r = (frame[..., i].astype(np.float32) for i in range(3))
    ir = 0.6 * r + 0.3 * g + 0.1 * b
    ir = 255.0 * (ir / 255.0) ** 1.3
    ir = 50.0 + 0.45 * (ir - 50.0)
    ir += _noise_field(ir.shape, 9.0, k % 8)
    out = np.clip(ir, 0, 255).astype(np.uint8)
    return cv2.merge([out, out, out])


def partial(frame: Frame, t: float, k: int) -> Frame:
    """The lower third of the frame hidden (black): a person is cut at the knees while up and
    mostly hidden once on the floor, as behind a bed, sofa or counter."""
    out = frame.copy()
    h = out.shape[0]
    out[h - h // 3 :] = 0
    return out


def occluder(frame: Frame, t: float, k: int) -> Frame:
    """A static piece of furniture (a flat dark-brown box) across the middle of the floor: 45 %
    of the width, from 55 % to 85 % of the height."""
    out = frame.copy()
    h, w = out.shape[:2]
    out[round(0.55 * h) : round(0.85 * h), round(0.275 * w) : round(0.725 * w)] = (40, 55, 75)
    return out


def portrait(frame: Frame, t: float, k: int) -> Frame:
    """A phone held upright: the centre 9:16 strip of the frame (full height)."""
    h, w = frame.shape[:2]
    cw = min(w, round(h * 9 / 16))
    x0 = (w - cw) // 2
    return np.ascontiguousarray(frame[:, x0 : x0 + cw])


@cache
def _barrel_maps(w: int, h: int) -> tuple[np.ndarray, np.ndarray]:
    """Remap tables of a wide-angle lens (radial k1 = 0.35 on the radius normalised to the half
    diagonal, scaled so the corners stay in the picture)."""
    cx, cy, r0 = (w - 1) / 2, (h - 1) / 2, math.hypot(w / 2, h / 2)
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float32)
    dx, dy = (xs - cx) / r0, (ys - cy) / r0
    r2 = dx * dx + dy * dy
    scale = (1 + 0.35 * r2) / (1 + 0.35)  # the corners map to the source's corners
    return (cx + dx * scale * r0).astype(np.float32), (cy + dy * scale * r0).astype(np.float32)


def wide_angle(frame: Frame, t: float, k: int) -> Frame:
    """Barrel distortion of a wide-angle lens (k1 0.35): straight lines bow, the centre swells,
    a person near the edge shrinks and bends."""
    h, w = frame.shape[:2]
    mx, my = _barrel_maps(w, h)
    return cv2.remap(frame, mx, my, cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)


def elevated(frame: Frame, t: float, k: int) -> Frame:
    """A higher camera tilted further down, imitated by a perspective warp: the top edge kept,
    the bottom edge narrowed to 60 % and the picture squashed to 80 % of its height (the floor
    seen more from above, a standing person shorter towards the feet)."""
    h, w = frame.shape[:2]
    src = np.array([[0, 0], [w, 0], [w, h], [0, h]], np.float32)
    dst = np.array([[0, 0], [w, 0], [0.8 * w, 0.8 * h], [0.2 * w, 0.8 * h]], np.float32)
    m = cv2.getPerspectiveTransform(src, dst)
    return cv2.warpPerspective(frame, m, (w, h), borderMode=cv2.BORDER_CONSTANT)


@cache
def _noise_field(shape: tuple[int, ...], sd: float, k: int) -> np.ndarray:
    return np.random.default_rng(k).normal(0.0, sd, shape).astype(np.float32)


def _noise(frame: Frame, sd: float, k: int) -> Frame:
    """Gaussian noise of `sd` grey levels, frame `k` of a cycle of 8 fixed fields (a sensor's
    noise changes every frame; 8 distinct fields are enough for that, and cheap)."""
    n = _noise_field(frame.shape, sd, k % 8)
    return np.clip(frame.astype(np.float32) + n, 0, 255).astype(np.uint8)


# -- the second person --------------------------------------------------------------------------

# Donors: (clip, crop, fall start or None). A donor's person is the part of its person box
# (MoveNet's, widened by 15 %) that differs from the empty room; the empty room is the first
# frame with the box of the person there filled from the last frame (where they are elsewhere).
WALKER = (ASSIST / "videos/adl/01_walking_slowly.mp4", "0,0,853,640", None)
FALLER = (GMDCSA / "S3_Fall_20.mp4", "", 2.3)  # "walking then falling forward on the floor"


def _box_mask(shape: tuple[int, ...], people: list[Person], grow: float = 0.15) -> np.ndarray:
    mask = np.zeros(shape[:2], np.uint8)
    for p in people[:1]:
        x0, y0, x1, y1 = p.box
        dx, dy = grow * (x1 - x0), grow * (y1 - y0)
        mask[max(0, int(y0 - dy)) : int(y1 + dy) + 1, max(0, int(x0 - dx)) : int(x1 + dx) + 1] = 1
    return mask


@cache
def _donor(which: str) -> tuple[list[np.ndarray], list[np.ndarray], float]:
    """A donor's frames and person masks, and its frame rate."""
    path, crop, _ = WALKER if which == "walker" else FALLER
    src = path.resolve()
    cap = cv2.VideoCapture(str(src))
    fps = file_fps(float(cap.get(cv2.CAP_PROP_FPS) or 0.0), str(src))
    cap.release()
    frames = [f for f, _ in _frames(src, parse_crop(crop))]
    pose = PoseEstimator(POSE_MODEL)
    boxes = [_box_mask(f.shape, pose.people(cv2.cvtColor(f, cv2.COLOR_BGR2RGB))) for f in frames]
    bg = frames[0].copy()
    bg[boxes[0] > 0] = frames[-1][boxes[0] > 0]
    bg16 = bg.astype(np.int16)
    masks = []
    kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (7, 7))
    for frame, box in zip(frames, boxes, strict=True):
        diff = np.abs(frame.astype(np.int16) - bg16).max(axis=2)
        mask = ((diff > 30) & (box > 0)).astype(np.uint8)
        mask = cv2.morphologyEx(mask, cv2.MORPH_CLOSE, kernel, iterations=2)
        mask = cv2.morphologyEx(mask, cv2.MORPH_OPEN, kernel)
        masks.append(mask)
    return frames, masks, fps


def _composite(frame: Frame, donor: str, donor_t: float) -> Frame:
    """`frame` with the donor's person at `donor_t` (clamped to the donor clip) pasted in,
    the donor frame scaled to the target's size and mirrored."""
    frames, masks, fps = _donor(donor)
    i = nearest_index(donor_t, fps, len(frames))
    h, w = frame.shape[:2]
    d = cv2.flip(cv2.resize(frames[i], (w, h), interpolation=cv2.INTER_AREA), 1)
    m = cv2.flip(cv2.resize(masks[i], (w, h), interpolation=cv2.INTER_NEAREST), 1)
    m3 = cv2.GaussianBlur(m.astype(np.float32), (5, 5), 0)[..., None]
    return (frame * (1 - m3) + d * m3).astype(np.uint8)


def second_person(frame: Frame, t: float, k: int) -> Frame:
    """A second person walking slowly through the room (ASSIST-IoT's '01 walking slowly',
    cut out and mirrored), from the clip's first frame on."""
    return _composite(frame, "walker", t)


@dataclass(frozen=True)
class Condition:
    """One row of the conditions table: a transform, and which clips it is replayed on."""

    transform: Callable[[Frame, float, int], Frame]
    fps: float | None = None  # write at this rate (None: the source's)
    labels: tuple[str, ...] = ("fall", "adl", "lying_still")
    negatives: bool = True  # vtest.avi and ../shared/data/negatives too

    @property
    def describe(self) -> str:
        return " ".join((self.transform.__doc__ or "").split())


def _both_falling(frame: Frame, t: float, k: int, fall_start: float = 0.0) -> Frame:
    """Two people falling together: GMDCSA24 S3_Fall_20's person (walking, then falling forward;
    cut out, mirrored) pasted in, timed so that their fall starts when the clip's own fall
    starts."""
    return _composite(frame, "faller", t - fall_start + (FALLER[2] or 0.0))


def low_rate(frame: Frame, t: float, k: int) -> Frame:
    """A 5 fps camera: the frame nearest each 0.2 s tick, written at 5 fps."""
    return frame


CONDITIONS: dict[str, Condition] = {
    "far": Condition(far),
    "night": Condition(night),
    "partial": Condition(partial),
    "occluder": Condition(occluder),
    "second person": Condition(second_person),
    "both falling": Condition(_both_falling, labels=("fall",), negatives=False),
    "portrait": Condition(portrait),
    "low rate": Condition(low_rate, fps=5.0),
    "wide angle": Condition(wide_angle),
    "elevated": Condition(elevated),
}


def slug(name: str) -> str:
    return name.replace(" ", "_")


# Frames are brought to at most this long side before a transform (a camera's 640x360 substream;
# the pose model sees 256 px and the classifier 160 px, so nothing they could see is lost).
RENDER_SIDE = 640


def _at_most(frame: Frame, side: int) -> Frame:
    h, w = frame.shape[:2]
    if max(h, w) <= side:
        return frame
    s = side / max(h, w)
    return cv2.resize(frame, (round(w * s), round(h * s)), interpolation=cv2.INTER_AREA)


# The daemon samples every 100 ms (the shipped model's interval) and the pose stage every other
# sample: a file holding the frame nearest each 100 ms tick gives it exactly the frames the
# recording would (the same nearest-frame rule), at a third of the frames to transform and write.
TICK_S = 0.1


def _ticks(src: Path, crop: str, fps: float) -> list[tuple[float, Frame]]:
    """(tick time, frame) of `src`'s crop: the frame nearest each TICK_S tick, at most
    RENDER_SIDE pixels on the long side."""
    frames = [f for f, _ in _frames(src, parse_crop(crop))]
    n = max(1, math.ceil(len(frames) / fps / TICK_S))
    picked = [frames[nearest_index(k * TICK_S, fps, len(frames))] for k in range(n)]
    return [(k * TICK_S, _at_most(f, RENDER_SIDE)) for k, f in enumerate(picked)]


def _dst(it: Item, name: str, out: Path) -> Path:
    return out / slug(name) / f"{it.path.stem}_{it.crop.replace(',', '-') or 'full'}.avi"


def render(it: Item, name: str, out: Path) -> Item:
    """`it` (its view's crop) as condition `name` sees it, written once under `out`; the item
    pointing at the rendered file, with no crop."""
    return render_item(it, [name], out)[0]


def render_item(it: Item, names: list[str], out: Path) -> list[Item]:
    """`render` of one clip view under several conditions, decoding it once."""
    todo = [n for n in names if not _dst(it, n, out).exists()]
    if todo:
        cap = cv2.VideoCapture(str(it.path))
        fps = cap.get(cv2.CAP_PROP_FPS) or it.fps or 30.0
        cap.release()
        ticks = _ticks(it.path, it.crop, fps)
        for name in todo:
            _write(it, name, ticks, _dst(it, name, out))
    return [
        replace(it, path=_dst(it, n, out).resolve(), crop="", fps=CONDITIONS[n].fps or 1 / TICK_S)
        for n in names
    ]


def _write(it: Item, name: str, ticks: list[tuple[float, Frame]], dst: Path) -> None:
    cond = CONDITIONS[name]
    transform = cond.transform
    if transform is _both_falling:
        start = it.start_s or 0.0

        def transform(f: Frame, t: float, k: int) -> Frame:
            return _both_falling(f, t, k, start)

    rate = cond.fps or 1.0 / TICK_S
    step = max(1, round(1.0 / (rate * TICK_S)))  # low rate: every other tick
    tmp = dst.with_suffix(".part.avi")
    dst.parent.mkdir(parents=True, exist_ok=True)
    writer: cv2.VideoWriter | None = None
    for k, (t, frame) in enumerate(ticks[::step]):
        img = transform(frame, t, k)
        if writer is None:
            size = (img.shape[1], img.shape[0])
            writer = cv2.VideoWriter(str(tmp), cv2.VideoWriter.fourcc(*"MJPG"), rate, size)
            writer.set(cv2.VIDEOWRITER_PROP_QUALITY, 95)
        writer.write(img)
    if writer is None:
        raise RuntimeError(f"{it.path}: no frame decoded")
    writer.release()
    tmp.rename(dst)


def contact_sheet(items: list[Item], out: Path, png: Path) -> Path:
    """One frame per condition (the same fall clip, 1 s after its fall began) beside the
    original: what each row of the table was shown."""
    it = next(i for i in items if i.clip_id == "S3_Fall_20")
    t = (it.start_s or 0.0) + 2.0
    tiles, names = [], ["as recorded", *CONDITIONS]
    for name in names:
        src = it if name == "as recorded" else render(it, name, out)
        cap = cv2.VideoCapture(str(src.path))
        fps = file_fps(float(cap.get(cv2.CAP_PROP_FPS) or 0.0), str(src.path))
        n = int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
        cap.set(cv2.CAP_PROP_POS_FRAMES, nearest_index(t, fps, n))
        ok, frame = cap.read()
        cap.release()
        if not ok:
            raise RuntimeError(f"{src.path}: cannot read the frame at {t:.1f} s")
        h = 240
        tile = cv2.resize(frame, (round(frame.shape[1] * h / frame.shape[0]), h))
        canvas = np.full((h + 28, 330, 3), 255, np.uint8)
        tile = tile[:, : min(tile.shape[1], 330)]
        x0 = (330 - tile.shape[1]) // 2
        canvas[28:, x0 : x0 + tile.shape[1]] = tile
        cv2.putText(canvas, name, (6, 20), cv2.FONT_HERSHEY_SIMPLEX, 0.6, (0, 0, 0), 1, cv2.LINE_AA)
        tiles.append(canvas)
    while len(tiles) % 4:
        tiles.append(np.full_like(tiles[0], 255))
    rows = [np.hstack(tiles[i : i + 4]) for i in range(0, len(tiles), 4)]
    png.parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(str(png), np.vstack(rows))
    return png


# -- replaying the shipped recipe under each condition -------------------------------------------

AS_RECORDED = "as recorded"

NEGATIVES = Path("../shared/data/negatives")


def descriptions(gmdcsa: Path, assist: Path) -> dict[str, str]:
    """Each clip's description from the two manifests (clip id -> text)."""
    out = {}
    for manifest in (gmdcsa / "manifest.csv", assist / "manifest.csv"):
        with manifest.open(newline="") as fh:
            for r in csv.DictReader(fh):
                out[Path(r["path"]).stem] = r["description"]
    return out


def negative_items(vtest: Path, negatives: Path) -> list[Item]:
    """vtest.avi and the clips of ../shared/data/negatives: nobody falls in them."""
    out = [Item("N", "vtest", vtest.resolve(), "adl", None, None, None, "")]
    with (negatives / "manifest.csv").open(newline="") as fh:
        for r in csv.DictReader(fh):
            path = negatives / r["path"]
            out.append(Item("N", path.stem, path.resolve(), "adl", None, None, None, ""))
    return out


def _as(name: str, items: list[Item], out: Path) -> list[Item]:
    if name == AS_RECORDED:
        return items
    labels = CONDITIONS[name].labels
    return [render(it, name, out) for it in items if it.label in labels]


_POSE_MEMO: dict[bytes, list[Person]] = {}  # MoveNet's answers, kept across folds and seeds


def run_condition(
    name: str, seed: int, items: list[Item], negatives: list[Item], a: argparse.Namespace
) -> dict[str, Any]:
    """The shipped recipe (`SHIPPED_RECIPE`: each fold's 160 px model, MoveNet, the fold's own
    pose head as a veto, `combined`) replayed on every fold's held-out clips as condition `name`
    sees them, and on the negatives with fold FOLDS[seed]'s models (one fold per seed: the
    negatives are nobody's held-out clips, and replaying them five times would cost as much as
    all the folds)."""
    recipe = a.recipe or SHIPPED_RECIPE
    v = VARIANTS[recipe]
    out = Path(a.out)
    rendered = out / "conditions"
    clips: list[dict[str, Any]] = []
    negative_events: dict[str, int] = {}
    hours = 0.0
    seq = getattr(a, "sequence", "")  # person.sequence, '{seed}' filled in
    for fold in FOLDS:
        rundir = ensure_fold_model(recipe, v, seed, fold, items, a)  # (trained once)
        look = LookSettings() if a.second_look else None
        head = fold_head(items, fold, seed, out, v.pose_head, v.pose_head_mode, look=look)
        test, _ = split_fold(items, fold, out)
        test = _as(name, test, rendered)
        cams = [(cam, it.path, it.crop) for it, _, cam in views(test)]
        neg: list[Item] = []
        if fold == FOLDS[seed % len(FOLDS)] and (name == AS_RECORDED or CONDITIONS[name].negatives):
            neg = _as(name, negatives, rendered)
            cams += [(f"neg_{it.clip_id}", it.path, it.crop) for it in neg]
        log.info("conditions: %s, seed %d, fold %s: %d cameras", name, seed, fold, len(cams))
        replayed = replay_scores(
            rundir / "model.onnx", cams, rundir / "state", v.threshold, v.detection(),
            {**(v.person_config(head) or {}), **({"side": a.person_side} if a.person_side else {}),
             **({"second_look": True} if a.second_look else {}),
             **({"sequence": Path(seq.format(seed=seed))} if seq else {})},
            _POSE_MEMO,
        )  # fmt: skip
        if getattr(a, "traces", False):
            keep_trace(
                out / "work" / "traces" / f"{slug(a.trace_key)}_{fold}.pkl", test, neg, replayed
            )
        if test:
            clips += score_fold(test, replayed)
        for it in neg:
            r = replayed[f"neg_{it.clip_id}"]
            negative_events[it.clip_id] = len(r["events"])
            hours += len(r["scores"]) * r["interval_s"] / 3600
    result = summarise(clips, sum(negative_events.values()), hours or float("nan"))
    result["negative_events"] = negative_events
    return result


def keep_trace(
    path: Path, test: list[Item], neg: list[Item], replayed: dict[str, dict[str, Any]]
) -> None:
    """Keep what one fold's replay fed each camera's detector (`scoring.Calls`), the detector's
    settings and the clips it scores, for `python -m experiments.gate_sweep` to decide again
    at other decision settings without running a model."""
    any_det = next(iter(replayed.values()))["detector"]
    keep = {
        "test": test,
        "negatives": [f"neg_{it.clip_id}" for it in neg],
        "settings": {"cfg": any_det.cfg, "threshold": any_det.threshold, "model": any_det.model,
                     "decision": any_det.decision, "when_others": any_det.seen.when_others,
                     "lost_s": any_det.seen.lost_s},
        "cameras": {name: {"scores": r["scores"], "interval_s": r["interval_s"],
                           "calls": r["detector"].record.calls, "events": r["events"]}
                    for name, r in replayed.items()},
    }  # fmt: skip
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        pickle.dump(keep, f)


def hard_clips(clips: list[dict[str, Any]], about: dict[str, str]) -> tuple[int, int]:
    """(look-alike clips with an event, look-alike clips) among a run's daily-activity clips."""
    hard = [c for c in clips if c["label"] == "adl" and is_hard(about.get(c["clip"], ""))]
    return sum(c["false_events"] > 0 for c in hard), len(hard)


def conditions_md(runs: dict[str, Any], about: dict[str, str]) -> str:
    """The conditions table: one row per condition, mean ± sd over the seeds run, each
    condition's transform spelled out below it."""

    def cell(values: list[float], total: int | None = None) -> str:
        if not values:
            return "-"
        text = (
            f"{values[0]:.0f}"
            if len(values) == 1
            else f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}"
        )
        return f"{text} / {total}" if total is not None else text

    lines = [
        "| condition | seeds | falls detected | daily-activity clips with an event | "
        "of them fall look-alikes | lying-still clips with an event | events on the negatives "
        "(vtest.avi, intel, sports2d) | alarm delay (median s) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    names = [AS_RECORDED, *CONDITIONS]
    names += sorted({r["condition"] for r in runs.values()} - set(names))  # (e.g. another side)
    for name in names:
        rs = [r for r in runs.values() if r["condition"] == name]
        if not rs:
            continue
        falls = rs[0]["falls"]
        hard = [hard_clips(r["clips"], about) for r in rs]
        neg = [sum(r["negative_events"].values()) for r in rs if r["negative_events"]]
        delays = [r["delay_s_median"] for r in rs if r["delay_s_median"] is not None]
        lines.append(
            f"| {name} | {len(rs)} | {cell([r['falls_detected'] for r in rs], falls)} | "
            + (f"{cell([r['adl_clips_with_event'] for r in rs], rs[0]['adl_clips'])} | "
               f"{cell([h[0] for h in hard], hard[0][1])} | "
               f"{cell([r['still_clips_with_event'] for r in rs], rs[0]['still_clips'])} | "
               if rs[0]["adl_clips"] else "- | - | - | ")
            + f"{cell(neg) if neg else '-'} | {cell(delays) if delays else '-'} |"
        )  # fmt: skip
    lines += ["", "What each condition does to the frames (after the view's crop):", ""]
    lines += [f"- **{n}**: {c.describe}" for n, c in CONDITIONS.items()]
    return "\n".join(lines) + "\n"


def render_all(names: list[str], items: list[Item], out: Path) -> None:
    """Render every clip view under every condition in `names` (once; a progress bar)."""
    from tqdm import tqdm

    for it in tqdm(items, desc="rendering the conditions", unit="clip view"):
        render_item(it, [n for n in names if it.label in CONDITIONS[n].labels], out)


def main(a: argparse.Namespace, items: list[Item]) -> None:
    """Run the conditions (`a.conditions`, empty: all) for `a.seeds`, resumable through
    `<out>/conditions.json`; write conditions.md and conditions.png."""
    out = Path(a.out)
    runs_file = out / "conditions.json"
    runs: dict[str, Any] = json.loads(runs_file.read_text()) if runs_file.exists() else {}
    about = descriptions(Path(a.gmdcsa), Path(a.assist))
    negatives = negative_items(Path(a.vtest), Path(a.negatives))
    names = a.conditions or [AS_RECORDED, *CONDITIONS]
    unknown = [n for n in names if n != AS_RECORDED and n not in CONDITIONS]
    if unknown:
        raise SystemExit(f"--conditions: unknown {unknown}; known: {[AS_RECORDED, *CONDITIONS]}")
    print(contact_sheet(items, out / "conditions", out / "conditions.png"), flush=True)
    render_all([n for n in names if n != AS_RECORDED], items + negatives, out / "conditions")
    for seed in a.seeds:  # seed-major: every condition gets a first seed before any a second
        for name in names:
            side = f", person.side {a.person_side}" if a.person_side else ""
            side += ", second look" if a.second_look else ""
            side += ", night and hidden augmentation" if a.recipe == CONDITION_AUG_RECIPE else ""
            side += ", pose-sequence model" if getattr(a, "sequence", "") else ""
            key = f"{name}{side} | seed {seed}"
            a.trace_key = key.replace(" | ", "_s").replace("seed ", "").replace(",", "")
            traced = (out / "work" / "traces" / f"{slug(a.trace_key)}_{FOLDS[-1]}.pkl").exists()
            if key in runs and (not getattr(a, "traces", False) or traced):
                continue
            result = {"condition": name + side, "seed": seed,
                      **run_condition(name, seed, items, negatives, a)}  # fmt: skip
            # (read again: another process may have added rows meanwhile)
            runs = json.loads(runs_file.read_text()) if runs_file.exists() else {}
            if key in runs:  # (--traces: a row run again to keep its trace)
                was = {k: runs[key][k] for k in ("falls_detected", "adl_clips_with_event")}
                now = {k: result[k] for k in was}
                log.info("conditions: %s again: %s (was %s)", key, now, was)
            runs[key] = result
            runs_file.write_text(json.dumps(runs, indent=1))
            table = conditions_md(runs, about)
            (out / "conditions.md").write_text(table)
            print(table, flush=True)
