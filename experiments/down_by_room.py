"""Does a three-state fold model's "person down" carry over to the room it never saw?

    python -m experiments.down_by_room --out /work/bench_out/real --seed 0 --fold A

Replays one fold model of the real-footage benchmark on its held-out clips (as `make real-bench`
does) and prints per camera view the highest P(falling) and the highest 2-s mean of
P(falling or down) — what `detection.confirm_s` confirms a fall on — sorted by the latter. A
model whose "down" generalises keeps daily activity well below its falls on the second column.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
from pathlib import Path

import numpy as np

from experiments import realbench as rb


def main() -> None:
    p = argparse.ArgumentParser(
        prog="python -m experiments.down_by_room",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    rb.add_fold_model_args(p)
    p.add_argument("--confirm-s", type=float, default=2.0)
    a = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    model = rb.fold_model(a)
    items = [it for it in rb.load_items(rb.GMDCSA, rb.ASSIST) if it.fold == a.fold]
    views = rb.views(items)
    with tempfile.TemporaryDirectory() as state:
        cams = [(name, it.path, it.crop) for it, _, name in views]
        replayed = rb.replay_scores(model, cams, Path(state))
    rows = []
    for it, _, name in views:
        det = replayed[name]["detector"]
        fall = np.array([s for _, s, _ in det.trace])
        not_up = fall + np.array([d for _, _, d in det.trace])
        k = max(1, min(len(not_up), round(a.confirm_s / replayed[name]["interval_s"])))
        held = np.convolve(not_up, np.ones(k) / k, mode="valid").max()
        rows.append((float(held), float(fall.max()), it.label, name))
    print(f"| view | label | max P(falling) | max {a.confirm_s:g}-s mean P(falling or down) |")
    print("| --- | --- | --- | --- |")
    for held_max, fall_max, label, name in sorted(rows, reverse=True):
        print(f"| {name} | {label} | {fall_max:.2f} | {held_max:.2f} |")
    for label in ("fall", "adl"):
        vals = [h for h, _, lab, _ in rows if lab == label]
        if vals:
            print(f"{label}: {len(vals)} views, held P(falling or down) min {min(vals):.2f}, "
                  f"median {statistics.median(vals):.2f}, max {max(vals):.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
