"""The benchmark's clips as a motion-zoomed camera would see them (`experiments.realbench.zoom`).

Renders them as the benchmark's row "160px, motion zoom" does (`real_benchmark.zoomed_items`:
`MotionZoom` sees the frame nearest each sampling tick, every frame is written as the crop
current at its time; how much each clip zoomed and how often the crop moved is logged) and
writes a contact sheet of some of them, to look at what the model was given.

    python -m experiments.zoomed_clips --out /tmp/zoomed --sheet /tmp/zoom.png
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import cv2
import numpy as np


def contact_sheet(videos: list[Path], path: Path, per_clip: int = 6, height: int = 90) -> None:
    """One row per video: `per_clip` frames evenly spread over it."""
    rows = []
    for v in videos:
        cap = cv2.VideoCapture(str(v))
        n = int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
        tiles = []
        for i in np.linspace(0, max(n - 1, 0), per_clip).astype(int):
            cap.set(cv2.CAP_PROP_POS_FRAMES, int(i))
            ok, f = cap.read()
            if ok:
                tiles.append(cv2.resize(f, (round(f.shape[1] * height / f.shape[0]), height)))
        cap.release()
        if tiles:
            rows.append(np.hstack(tiles))
    width = max(r.shape[1] for r in rows)
    rows = [np.pad(r, ((0, 2), (0, width - r.shape[1]), (0, 0))) for r in rows]
    cv2.imwrite(str(path), np.vstack(rows))


def main() -> None:
    from experiments.realbench import ASSIST, GMDCSA, VTEST, load_items, zoomed_items

    p = argparse.ArgumentParser(
        prog="python -m experiments.zoomed_clips",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    p.add_argument("--out", required=True)
    p.add_argument("--interval-ms", type=float, default=100.0)
    p.add_argument("--sheet", help="also write a contact sheet PNG of some zoomed clips")
    a = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    items = load_items(GMDCSA, ASSIST)
    zoomed, vtest = zoomed_items(items, VTEST, Path(a.out), a.interval_ms / 1000)
    if a.sheet:
        videos = sorted({it.path for it in zoomed} | {vtest})
        contact_sheet(videos[::4], Path(a.sheet))
        print(f"wrote {a.sheet}")


if __name__ == "__main__":
    main()
