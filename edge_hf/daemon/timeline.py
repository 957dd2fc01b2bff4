"""`edge-hf replay --timeline-png`: a camera's window scores over time against the threshold."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np


def score_timeline_png(
    path: Path, scores: Mapping[str, tuple[float, Sequence[float]]], threshold: float
) -> None:
    """Plot each camera's window scores (name -> (interval s, scores)) against the threshold."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 3))
    for name, (interval_s, values) in scores.items():
        ax.plot(np.arange(len(values)) * interval_s, list(values), label=name)
    ax.axhline(threshold, color="red", linestyle="--", label="threshold")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("fall probability")
    ax.set_ylim(0, 1.02)
    ax.legend(loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
