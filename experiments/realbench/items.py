"""The benchmark's clips: the two datasets, their folds (leave one subject or room out, and the
reverse cross-source fold), training manifests, vtest.avi's negatives, motion-zoomed copies.
"""

from __future__ import annotations

import csv
import logging
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

import cv2

from edge_hf.training.data import parse_crop

from .zoom import ZoomSettings, zoom_video

log = logging.getLogger("real_benchmark")


GMDCSA = Path("../shared/data/gmdcsa24")

ASSIST = Path("../shared/data/assist_iot")

VTEST = Path("../shared/data/capture/vtest.avi")

FOLDS = ("S1", "S2", "S3", "S4", "A")

# The reverse cross-source fold (#30): trained on ASSIST-IoT's room (both views) and synthetic
# clips, tested on all of GMDCSA24 (four home rooms none of its training clips shows). Its runs
# are kept apart (`| reverse` keys): its test clips are the four GMDCSA24 folds' again.
REVERSE = "G"

SYNTH_FOLD = "Y"  # the generated clips' fold (never tested on)

# ASSIST-IoT has 2 falls: generated falls and daily activities (edge_hf.training.synth) make up a
# fall class. No lie_down: its lying end would be "adl" here and "down" in ASSIST-IoT's clips.
SYNTH_CLASSES = ("fall", "walk", "sit_down", "stand_up", "pick_up")

SYNTH_CLIPS_PER_CLASS = 24

EARLY_S = 1.0  # an event up to this long before the labelled fall start still counts

VTEST_CALIBRATION_S = 40.0  # vtest.avi calibrates on its first 40 s, is scored on the rest

VTEST_NEGATIVE_PIECES = 8  # vtest_negatives: 5-s pieces of those 40 s

GMDCSA_DESCENT_S = 1.5  # GMDCSA24's fall segments include the lying: the descent is taken as


@dataclass(frozen=True)
class Item:
    """One clip (and view) of the benchmark, as a manifest row and a replay camera."""

    fold: str
    clip_id: str  # both views of an ASSIST-IoT clip share it
    path: Path
    label: str  # fall, adl, lying_still
    fps: float | None
    start_s: float | None
    end_s: float | None
    crop: str  # "x,y,w,h" or ""


def load_items(gmdcsa: Path, assist: Path) -> list[Item]:
    """Every clip of both datasets, tagged with its fold."""
    items = []
    with (gmdcsa / "manifest.csv").open(newline="") as fh:
        for r in csv.DictReader(fh):
            items.append(
                Item(
                    f"S{r['subject']}", Path(r["path"]).stem, (gmdcsa / r["path"]).resolve(),
                    r["label"], float(r["fps"]) if r["fps"] else None,
                    float(r["fall_start_s"]) if r["fall_start_s"] else None,
                    float(r["fall_end_s"]) if r["fall_end_s"] else None, "",
                )
            )  # fmt: skip
    with (assist / "manifest.csv").open(newline="") as fh:
        for r in csv.DictReader(fh):
            items.append(
                Item(
                    "A", Path(r["path"]).stem, (assist / r["path"]).resolve(), r["label"],
                    float(r["fps"]) if r["fps"] else None,
                    float(r["fall_start_s"]) if r["fall_start_s"] else None,
                    float(r["fall_end_s"]) if r["fall_end_s"] else None,
                    assist_crop(assist / r["path"], r["crop"]),
                )
            )  # fmt: skip
    return items


@cache
def assist_crop(path: Path, crop: str) -> str:
    """The manifest's crop of an ASSIST-IoT view, mirrored left to right where the clip's frame
    has its two cameras the other way round. The manifest gives every clip the main view on the
    left (0,0,853,640; the side view top right, black below it), but in 4 of its 22 clips (06,
    11, 12, 19) the side view is top left and the main view on the right: there the black
    corner is bottom left. Read off the first frame: the darker bottom corner is the empty one."""
    cap = cv2.VideoCapture(str(path))
    ok, frame = cap.read()
    cap.release()
    if not ok:
        raise RuntimeError(f"{path}: no frame decoded")
    h, w = frame.shape[:2]
    bottom = frame[h // 2 : h - h // 8]
    left, right = bottom[:, : w // 3].mean(), bottom[:, w - w // 3 :].mean()
    parsed = parse_crop(crop)
    if right <= left or parsed is None:
        return crop
    x, y, cw, ch = parsed
    log.info("%s: its views are the other way round; crop %s read as %d,%d,%d,%d",
             path.name, crop, w - x - cw, y, cw, ch)  # fmt: skip
    return f"{w - x - cw},{y},{cw},{ch}"


def write_manifest(items: list[Item], path: Path, three_state: bool = False) -> Path:
    """A training manifest. Two classes: `fall` over the labelled segment, the rest `adl` (the
    time before a fall through --background-label; a person lying still is daily activity, no fall
    motion). Three classes: `adl` before the fall, `falling` over the descent, `down` from the end
    of the descent to the end of the clip, and a person lying still is `down`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["path", "label", "fps", "subject", "start_s", "end_s", "crop"])
        for it in items:
            rows: list[tuple[str, float | str, float | str]] = []
            if not three_state:
                label = "fall" if it.label == "fall" else "adl"
                rows.append((label, _or_blank(it.start_s), _or_blank(it.end_s)))
            elif it.label == "fall":
                start = it.start_s or 0.0
                end = it.end_s if it.end_s is not None else start + GMDCSA_DESCENT_S
                descent = (
                    end - start
                    if it.fold in ("A", SYNTH_FOLD)
                    else min(GMDCSA_DESCENT_S, (end - start) / 2)
                )
                if start >= 0.8:
                    rows.append(("adl", 0.0, start - 0.3))
                rows.append(("falling", start, start + descent))
                rows.append(("down", start + descent + 0.2, ""))
            else:
                label = "down" if it.label == "lying_still" else "adl"
                rows.append((label, _or_blank(it.start_s), _or_blank(it.end_s)))
            for label, lo, hi in rows:
                w.writerow([it.path, label, it.fps or "", it.fold, lo, hi, it.crop])
    return path


def _or_blank(v: float | None) -> float | str:
    return "" if v is None else v


def synth_items(out: Path) -> list[Item]:
    """The reverse fold's generated clips (`SYNTH_CLASSES`, 15 fps, 320x240, seed 31), written
    under `out` once; a fall's labelled segment is its descent."""
    manifest = out / "manifest.csv"
    if not manifest.exists():
        from tqdm import tqdm

        from edge_hf.training.synth import generate

        total = SYNTH_CLIPS_PER_CLASS * len(SYNTH_CLASSES)
        with tqdm(total=total, desc="reverse fold: generated clips", unit="clip") as bar:
            generate(out, SYNTH_CLIPS_PER_CLASS, 15.0, seed=31, classes=SYNTH_CLASSES,
                     progress=lambda done, _: bar.update(done - bar.n))  # fmt: skip
    with manifest.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    return [
        Item(
            SYNTH_FOLD, Path(r["path"]).stem, (out / r["path"]).resolve(),
            "fall" if r["label"] == "fall" else "adl", float(r["fps"]),
            float(r["fall_start_s"]) if r["fall_start_s"] else None,
            float(r["fall_end_s"]) if r["fall_end_s"] else None, "",
        )
        for r in rows
    ]  # fmt: skip


def split_fold(items: list[Item], fold: str, out: Path) -> tuple[list[Item], list[Item]]:
    """(held-out clips, training clips) of a fold: one subject or room left out, or `REVERSE`
    (GMDCSA24 held out; ASSIST-IoT and the generated clips trained on)."""
    if fold == REVERSE:
        test = [it for it in items if it.fold != "A"]
        return test, [it for it in items if it.fold == "A"] + synth_items(out / "synth")
    return [it for it in items if it.fold == fold], [it for it in items if it.fold != fold]


def vtest_negatives(vtest: Path) -> list[Item]:
    """vtest.avi's first VTEST_CALIBRATION_S as daily-activity training clips, in pieces (so that
    each piece gets its share of windows per epoch like any other clip)."""
    piece = VTEST_CALIBRATION_S / VTEST_NEGATIVE_PIECES
    return [
        Item("V", f"vtest_{i}", vtest.resolve(), "adl", None, i * piece, (i + 1) * piece, "")
        for i in range(VTEST_NEGATIVE_PIECES)
    ]


ZOOM_WIDTH = 320  # zoomed clips are written this wide: twice the 160 px rows' input


def zoomed_items(
    items: list[Item], vtest: Path, out: Path, interval_s: float
) -> tuple[list[Item], Path]:
    """`items` and vtest.avi rendered motion-zoomed (`realbench.zoom.zoom_video`, each view's
    crop first) into `out`, once: the items point at the zoomed files, with no crop."""
    zoomed = []
    for it in [*items, Item("V", "vtest", vtest, "adl", None, None, None, "")]:
        dst = out / f"{it.path.stem}_{it.crop.replace(',', '-') or 'full'}.avi"
        if not dst.exists():
            box = parse_crop(it.crop)
            stats = zoom_video(it.path, box, dst, interval_s, ZOOM_WIDTH, ZoomSettings(), it.fps)
            log.info("zoomed %s: %s", dst.name, stats)
        zoomed.append(replace(it, path=dst.resolve(), crop=""))
    return zoomed[:-1], zoomed[-1].path


def camera_name(it: Item, view: int) -> str:
    return f"{it.fold}_{it.clip_id}_v{view}".replace(".", "_")[:64]


def views(items: list[Item]) -> list[tuple[Item, int, str]]:
    """(item, view number, camera name) of each clip's views."""
    out: list[tuple[Item, int, str]] = []
    seen: dict[str, int] = {}
    for it in items:
        seen[it.clip_id] = seen.get(it.clip_id, 0) + 1
        out.append((it, seen[it.clip_id], camera_name(it, seen[it.clip_id])))
    return out
