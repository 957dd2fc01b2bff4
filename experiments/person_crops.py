"""What a person-centred model is given (`edge_hf.core.personcrop`): for some falls of the
benchmark, the frame as the daemon keeps it (twice the input size) with the window's crop drawn,
and the window's newest frame as the model sees it, before, during and after the fall.

Uses the training side's own code (`decode_clips` with `person_crop`, the dataset's
`window_frames`), so this is exactly what training and the daemon cut (a test compares the two).

    python -m experiments.person_crops --out benchmarks/results/real/person_crops.png
"""

from __future__ import annotations

import argparse
from pathlib import Path

import cv2
import numpy as np

from edge_hf.core.personcrop import PersonCropRule, crop_box
from edge_hf.training.data import (
    Clip,
    HyperframeDataset,
    WindowSpec,
    decode_clips,
    parse_crop,
)
from experiments.realbench.items import ASSIST, GMDCSA, load_items

CLIPS = ("S1_Fall_13", "S3_Fall_01", "S4_Fall_01", "07_fall_to_knees_forward")


def main() -> None:
    p = argparse.ArgumentParser(
        prog="python -m experiments.person_crops",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    p.add_argument("--out", default="benchmarks/results/real/person_crops.png")
    p.add_argument("--cache", default="benchmarks/results/real/cache")
    a = p.parse_args()
    rule = PersonCropRule()
    size = (160, 160)
    spec = WindowSpec(3, 0.1, size, person_crop=rule, resize="area")
    rows = []
    items = [it for it in load_items(GMDCSA, ASSIST) if it.clip_id in CLIPS and it.label == "fall"]
    seen = set()
    for it in items:
        if it.clip_id in seen:
            continue  # one view of an ASSIST-IoT clip
        seen.add(it.clip_id)
        clip = Clip(it.path, "fall", it.fps, it.start_s, it.end_s, crop=parse_crop(it.crop))
        lc = decode_clips([clip], size, Path(a.cache), person_crop=rule, resize="area")[0]
        ds = HyperframeDataset([lc], ["fall"], spec, train=False)
        start = it.start_s or 0.0
        tiles = []
        for t in (start - 1.0, start + 0.5, start + 2.5):
            t = min(max(t, 0.1), lc.n_frames / lc.fps - 0.1)
            newest = t + 0.1
            full = lc.video.frames[min(round(newest * lc.fps), lc.n_frames - 1)].copy()
            boxes = lc.boxes.boxes_for(newest) if lc.boxes is not None else []
            crop = crop_box(boxes, full.shape[:2], rule)
            if crop is not None:
                x, y, w, h = crop
                cv2.rectangle(full, (x, y), (x + w - 1, y + h - 1), (255, 64, 64), 2)
            cut = ds.window_frames(0, t)[-1]
            tiles += [full, cv2.resize(cut, full.shape[1::-1], interpolation=cv2.INTER_NEAREST)]
        label = np.zeros((24, sum(tl.shape[1] for tl in tiles), 3), np.uint8)
        cv2.putText(label, f"{it.clip_id}: 1 s before the fall, during it, 2.5 s after "
                    "(frame kept + crop, what the model sees)", (6, 17),
                    cv2.FONT_HERSHEY_SIMPLEX, 0.5, (255, 255, 255), 1)  # fmt: skip
        rows += [label, np.concatenate(tiles, axis=1)]
    sheet = np.concatenate(rows, axis=0)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    cv2.imwrite(a.out, cv2.cvtColor(sheet, cv2.COLOR_RGB2BGR))
    print(f"wrote {a.out} ({len(seen)} falls)")


if __name__ == "__main__":
    main()
