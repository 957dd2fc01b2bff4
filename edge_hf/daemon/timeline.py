"""`edge-hf replay --timeline-png`: a camera's window scores over time against the threshold."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np


def score_timeline_png(
    path: Path, scores: Mapping[str, tuple[float, Sequence[float], float]]
) -> None:
    """Plot each camera's window scores (name -> (interval s, scores, the camera's threshold))
    against its own threshold (a calibrated camera's differs from the others')."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 3))
    for name, (interval_s, values, threshold) in scores.items():
        (line,) = ax.plot(np.arange(len(values)) * interval_s, list(values), label=name)
        ax.axhline(threshold, color=line.get_color(), linestyle="--",
                   label=f"{name} threshold {threshold:.2f}")  # fmt: skip
    ax.set_xlabel("time (s)")
    ax.set_ylabel("fall probability")
    ax.set_ylim(0, 1.02)
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
