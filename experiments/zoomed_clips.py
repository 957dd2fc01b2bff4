"""The benchmark's clips as a motion-zoomed camera would see them (`edge_hf.core.zoom`).

Each clip (its view's crop first) is decoded once; `MotionZoom` is fed the frame nearest each
sampling tick, as the daemon samples, and every frame is written as the crop current at its
time, at `width` pixels wide (the frame's aspect ratio kept, so the model squeezes it exactly as
it squeezes a whole frame). Training and replay then read these files like any other video: the
zoom is tested before any daemon code depends on it.

    python experiments/zoomed_clips.py --out /tmp/zoomed --sheet /tmp/zoom.png   # a look at it
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import cv2
import numpy as np

from edge_hf.core.zoom import ZoomSettings, zoom_video


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
    from experiments.real_benchmark import ASSIST, GMDCSA, VTEST, load_items

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--interval-ms", type=float, default=100.0)
    p.add_argument("--width", type=int, default=320)
    p.add_argument("--sheet", help="also write a contact sheet PNG of some zoomed clips")
    a = p.parse_args()
    out = Path(a.out)
    stats = {}
    items = load_items(GMDCSA, ASSIST)
    jobs = [(it.path, it.crop, it.fps) for it in items] + [(VTEST, "", None)]
    for src, crop, fps in jobs:
        box = tuple(int(v) for v in crop.split(",")) if crop else None
        dst = out / f"{src.stem}_{crop.replace(',', '-') or 'full'}.avi"
        stats[dst.name] = zoom_video(
            src,
            box,
            dst,
            a.interval_ms / 1000,
            a.width,
            ZoomSettings(),
            fps,  # type: ignore[arg-type]
        )
        print(dst.name, stats[dst.name], flush=True)
    (out / "zoom_stats.json").write_text(json.dumps(stats, indent=1))
    if a.sheet:
        contact_sheet(sorted(out.glob("*.avi"))[::4], Path(a.sheet))


if __name__ == "__main__":
    main()
