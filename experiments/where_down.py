"""Where in the picture does a fold model see "a person down"? An occlusion map.

    python -m experiments.where_down --out /work/bench_out/real --seed 0 --fold A \
        --png benchmarks/results/real/where_down.png

For a few windows of the fold's held-out clips (and, for comparison, of a GMDCSA24 fall), slides
a grey square (the normalisation's mean: zero input) over the same place of all T frames and
maps how P(down) changes: blue where covering the picture lowers it (the evidence for "down"),
red where covering raises it. A model that looks at the person lights up the person; one that
reads the room lights up the room.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import numpy as np

from edge_hf.core.hyperframe import frame_indices, stack_frames
from edge_hf.core.runtime import read_contract
from edge_hf.core.video import decode_video
from edge_hf.daemon.classifier import OnnxFallClassifier
from edge_hf.training.data import parse_crop
from experiments import realbench as rb

# (clip id, view 1 = main / 2 = side, centre time s, what is in it)
WINDOWS = [
    ("01_walking_slowly", 1, 2.5, "ASSIST walking, main view"),
    ("01_walking_slowly", 2, 4.5, "ASSIST walking, side view (nobody in it)"),
    ("03_jogging_slowly", 1, 2.0, "ASSIST jogging, main view"),
    ("05_vertical_fall_faint", 1, 8.0, "ASSIST after its fall, main view"),
    ("S1_Fall_13", 1, 4.0, "GMDCSA24 S1 after a fall (trained on)"),
]


def window_of(it: rb.Item, t: float, size: tuple[int, int], window: int, interval_s: float,
              resize: str) -> list[np.ndarray]:  # fmt: skip
    video = decode_video(it.path, size, None, parse_crop(it.crop), resize)
    fps = it.fps or video.fps
    idx = frame_indices(int(video.frames.shape[0]), fps, t, window, interval_s)
    return [np.ascontiguousarray(video.frames[i]) for i in idx]


def occlusion(clf: OnnxFallClassifier, frames: list[np.ndarray], down: int, patch: float,
              stride: float) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The window's class probabilities, and per pixel the mean P(down) with a square covering
    it."""
    c = clf.contract
    x = stack_frames(frames, c.mean, c.std).numpy()
    h, w = x.shape[1:]
    ph, pw = max(1, round(h * patch)), max(1, round(w * patch))
    ys = list(range(0, h - ph + 1, max(1, round(h * stride))))
    xs = list(range(0, w - pw + 1, max(1, round(w * stride))))
    batch = np.repeat(x[None], len(ys) * len(xs), axis=0)
    for k, (y0, x0) in enumerate((y, xx) for y in ys for xx in xs):
        batch[k, :, y0 : y0 + ph, x0 : x0 + pw] = 0.0  # the mean colour in every frame
    probs = clf.probabilities(x[None])[0]
    base = float(probs[down])
    covered = clf.probabilities(batch)[:, down].reshape(len(ys), len(xs))
    # Per pixel: the mean P(down) over the patches that cover it.
    acc, n = np.zeros((h, w)), np.zeros((h, w))
    for i, y0 in enumerate(ys):
        for j, x0 in enumerate(xs):
            acc[y0 : y0 + ph, x0 : x0 + pw] += covered[i, j]
            n[y0 : y0 + ph, x0 : x0 + pw] += 1
    return probs, np.where(n > 0, acc / np.maximum(n, 1), base)


def main() -> None:
    p = argparse.ArgumentParser(
        prog="python -m experiments.where_down",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    rb.add_fold_model_args(p)
    p.add_argument("--model", help="this ONNX model instead of the fold model")
    p.add_argument("--patch", type=float, default=0.25, help="side of the square, of the frame")
    p.add_argument("--png", default="where_down.png")
    a = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    model = Path(a.model) if a.model else rb.fold_model(a)
    if not model.is_file():
        raise SystemExit(f"--model {model}: no such file")
    contract = read_contract(model)
    if contract.down_class is None:
        raise SystemExit(f"{model}: not a three-state model (no down class)")
    down = list(contract.classes).index(contract.down_class)
    clf = OnnxFallClassifier(model, providers=["cpu"])
    items = rb.load_items(rb.GMDCSA, rb.ASSIST)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    heats: list[tuple[float, np.ndarray]] = []
    shown: list[np.ndarray] = []
    fig, axes = plt.subplots(2, len(WINDOWS), figsize=(3.2 * len(WINDOWS), 6.6))
    for col, (clip, view, t, what) in enumerate(WINDOWS):
        it = [x for x in items if x.clip_id == clip][view - 1]
        frames = window_of(it, t, contract.input_size, contract.window,
                           contract.interval_ms / 1000, contract.resize)  # fmt: skip
        probs, heat = occlusion(clf, frames, down, a.patch, a.patch / 2)
        base = float(probs[down])
        heats.append((base, heat))
        named = ", ".join(f"{c} {v:.2f}" for c, v in zip(contract.classes, probs, strict=True))
        print(f"{what} ({it.path.name} view {view} at {t:g} s): {named}; "
              f"covering lowers P(down) to {heat.min():.2f} at most")  # fmt: skip
        axes[0, col].imshow(frames[len(frames) // 2])
        axes[0, col].set_title(f"{what}\nP(down) {base:.2f}", fontsize=8)
        shown.append(frames[len(frames) // 2])
    # One colour scale for all, as wide as the largest change (printed: small means "nowhere").
    scale = max(0.05, max(float(np.abs(h - b).max()) for b, h in heats))
    for col, ((base, heat), frame) in enumerate(zip(heats, shown, strict=True)):
        axes[1, col].imshow(frame)
        im = axes[1, col].imshow(heat - base, cmap="RdBu_r", vmin=-scale, vmax=scale, alpha=0.7)
        axes[1, col].set_title(f"change of P(down) when covered (±{scale:.2f})", fontsize=7)
        for ax in axes[:, col]:
            ax.set_axis_off()
    fig.colorbar(im, ax=axes[1, :].tolist(), shrink=0.8)
    fig.suptitle(a.model or f"{a.variant}, seed {a.seed}, fold {a.fold} model", fontsize=9)
    fig.savefig(a.png, dpi=100)
    print(f"wrote {a.png}")


if __name__ == "__main__":
    main()
