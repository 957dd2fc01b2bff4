"""`edge-hf eval`: clip-level scores of a checkpoint or an exported model on labelled clips."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import numpy as np
from torch import nn

from edge_hf.core.errors import UserError
from edge_hf.core.personcrop import rule_of
from edge_hf.training.checkpoint import OnnxClassifier, load_checkpoint
from edge_hf.training.data import HyperframeDataset, WindowSpec, decode_clips, load_clips
from edge_hf.training.scores import (
    classification_report,
    pair_scores,
    plot_confusion,
    predict_clips,
)

log = logging.getLogger(__name__)

AMBIGUOUS_PAIRS = (("fall", "lie_down"), ("sit_down", "stand_up"))


def load_model(path: Path) -> tuple[nn.Module, WindowSpec, list[str], str]:
    """A checkpoint (.pt) or exported model (.onnx): model, window spec, classes, fall class."""
    if not path.exists():
        raise UserError(f"{path}: no such model file")
    if path.suffix == ".onnx":
        m = OnnxClassifier(path)
        c = m.contract
        spec = WindowSpec(
            c.window, c.interval_ms / 1000.0, c.input_size, c.volumes, c.mean, c.std, c.resize,
            person_crop=rule_of(c),
        )  # fmt: skip
        return m, spec, list(c.classes), c.fall_class
    model, cfg, classes = load_checkpoint(path)
    return model, cfg.spec(), classes, cfg.fall_class


def evaluate(
    model_path: Path,
    data: Path,
    shuffle_time: bool = False,
    batch_size: int = 32,
    cache_dir: Path | None = None,
    confusion_png: Path | None = None,
    background_label: str | None = None,
) -> dict[str, Any]:
    """Clip-level report (logits averaged over 1/4, 1/2, 3/4 of each clip) plus ambiguous pairs.

    With `background_label`, the time before each labelled segment is scored as that class too.
    """
    model, spec, classes, fall_class = load_model(model_path)
    clips = load_clips(data)
    unknown = sorted({c.label for c in clips} - set(classes))
    if unknown:
        raise UserError(f"{data}: labels {unknown} are not among the model's classes {classes}")
    if background_label is not None and background_label not in classes:
        raise UserError(f"--background-label {background_label!r}: not among {classes}")
    loaded = decode_clips(
        clips, spec.size, cache_dir, True, background_label=background_label, resize=spec.resize,
        person_crop=spec.person_crop,
    )  # fmt: skip
    ds = HyperframeDataset(loaded, classes, spec, train=False, shuffle_time=shuffle_time)
    pred = predict_clips(model, ds, batch_size)
    report = classification_report(pred.labels, pred.logits.argmax(1), classes, fall_class)
    report["clips"] = len(loaded)
    report["pairs"] = {
        f"{a}/{b}": pair_scores(pred.logits, pred.labels, classes, a, b)
        for a, b in AMBIGUOUS_PAIRS
        if a in classes and b in classes
    }
    if confusion_png is not None:
        plot_confusion(
            confusion_png, report["confusion"], classes, f"{model_path.name} on {data.name}"
        )
    return report


def report_text(report: dict[str, Any]) -> str:
    """A human-readable evaluation summary."""
    lines = [
        f"clips: {report['clips']}   accuracy: {report['accuracy']:.3f}   "
        f"fall P/R/F1: {report['fall_precision']:.3f}/{report['fall_recall']:.3f}"
        f"/{report['fall_f1']:.3f}",
        f"{'class':<12}{'precision':>10}{'recall':>10}{'f1':>10}{'support':>9}",
    ]
    for name, s in report["per_class"].items():
        lines.append(
            f"{name:<12}{s['precision']:>10.3f}{s['recall']:>10.3f}{s['f1']:>10.3f}{s['support']:>9d}"
        )
    for pair, s in report.get("pairs", {}).items():
        lines.append(f"pair {pair}: F1 {s['macro_f1']:.3f} over {s['clips']} clips")
    cm = np.array(report["confusion"])
    lines.append("confusion (rows true, columns predicted):")
    lines += ["  " + " ".join(f"{v:4d}" for v in row) for row in cm]
    return "\n".join(lines)
