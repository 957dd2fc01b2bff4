"""Clip-level evaluation: logits averaged over centres at 1/4, 1/2, 3/4, then the scores (and
the confusion-matrix picture)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

from edge_hf.training.data import HyperframeDataset


@dataclass(frozen=True)
class ClipPredictions:
    """Per clip: the averaged logits and the true class index."""

    logits: np.ndarray  # (n_clips, n_classes)
    labels: np.ndarray  # (n_clips,)
    loss: float  # mean cross-entropy over windows


@torch.no_grad()
def predict_clips(
    model: nn.Module,
    dataset: HyperframeDataset,
    batch_size: int = 32,
    workers: int = 0,
    device: torch.device | None = None,
) -> ClipPredictions:
    """Average each clip's window logits (test-time averaging over `EVAL_FRACTIONS`)."""
    if dataset.train:
        raise ValueError("predict_clips needs an evaluation dataset (train=False)")
    device = device or torch.device("cpu")
    model.eval()
    n_clips, n_classes = len(dataset.clips), len(dataset.classes)
    sums = torch.zeros(n_clips, n_classes, dtype=torch.float64)
    counts = torch.zeros(n_clips, dtype=torch.float64)
    labels = np.array([dataset.label_of(i) for i in range(n_clips)])
    loss_sum, n_windows = 0.0, 0
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=False, num_workers=workers)
    for x, y, clip in loader:
        logits = model(x.to(device)).float().cpu()
        loss_sum += float(nn.functional.cross_entropy(logits, y, reduction="sum"))
        n_windows += len(y)
        sums.index_add_(0, clip, logits.double())
        counts.index_add_(0, clip, torch.ones(len(clip), dtype=torch.float64))
    mean = (sums / counts.clamp(min=1).unsqueeze(1)).numpy()
    return ClipPredictions(mean, labels, loss_sum / max(1, n_windows))


def confusion(labels: np.ndarray, preds: np.ndarray, n_classes: int) -> np.ndarray:
    """Rows: true class, columns: predicted class."""
    cm = np.zeros((n_classes, n_classes), dtype=np.int64)
    np.add.at(cm, (labels, preds), 1)
    return cm


def _prf(tp: float, fp: float, fn: float) -> tuple[float, float, float]:
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return p, r, f


def classification_report(
    labels: np.ndarray, preds: np.ndarray, classes: Sequence[str], fall_class: str = "fall"
) -> dict[str, Any]:
    """Accuracy, per-class precision/recall/F1/support, confusion matrix, and the fall scores."""
    cm = confusion(labels, preds, len(classes))
    per_class = {}
    for i, name in enumerate(classes):
        tp = float(cm[i, i])
        p, r, f = _prf(tp, float(cm[:, i].sum()) - tp, float(cm[i, :].sum()) - tp)
        per_class[name] = {"precision": p, "recall": r, "f1": f, "support": int(cm[i, :].sum())}
    report: dict[str, Any] = {
        "accuracy": float(np.trace(cm) / max(1, cm.sum())),
        "macro_f1": float(np.mean([v["f1"] for v in per_class.values()])) if classes else 0.0,
        "per_class": per_class,
        "confusion": cm.tolist(),
        "classes": list(classes),
    }
    fall = per_class.get(fall_class, {"precision": 0.0, "recall": 0.0, "f1": 0.0})
    report.update(fall_precision=fall["precision"], fall_recall=fall["recall"], fall_f1=fall["f1"])
    return report


def pair_scores(
    logits: np.ndarray, labels: np.ndarray, classes: Sequence[str], a: str, b: str
) -> dict[str, float]:
    """Two-way scores on the clips of classes `a` and `b` only, deciding between those two logits.

    Chance is 0.5; this is how the ambiguous pairs (fall/lie_down, sit_down/stand_up) are judged.
    """
    ia, ib = list(classes).index(a), list(classes).index(b)
    mask = (labels == ia) | (labels == ib)
    if not mask.any():
        return {"accuracy": float("nan"), "macro_f1": float("nan"), "clips": 0}
    truth = (labels[mask] == ib).astype(int)
    pred = (logits[mask, ib] > logits[mask, ia]).astype(int)
    f1s = []
    for cls in (0, 1):
        tp = float(((pred == cls) & (truth == cls)).sum())
        fp = float(((pred == cls) & (truth != cls)).sum())
        fn = float(((pred != cls) & (truth == cls)).sum())
        f1s.append(_prf(tp, fp, fn)[2])
    return {
        "accuracy": float((pred == truth).mean()),
        "macro_f1": float(np.mean(f1s)),
        "clips": int(mask.sum()),
    }


def plot_confusion(path: Path, confusion: list[list[int]], classes: list[str], title: str) -> None:
    """A labelled confusion-matrix PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cm = np.array(confusion)
    fig, ax = plt.subplots(figsize=(1.2 + 0.8 * len(classes), 1 + 0.7 * len(classes)))
    ax.imshow(cm, cmap="Blues")
    ax.set_xticks(range(len(classes)), classes, rotation=45, ha="right")
    ax.set_yticks(range(len(classes)), classes)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title(title)
    for i in range(len(classes)):
        for j in range(len(classes)):
            colour = "white" if cm[i, j] > cm.max() / 2 else "black"
            ax.text(j, i, str(cm[i, j]), ha="center", va="center", color=colour)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
