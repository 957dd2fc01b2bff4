"""`edge-hf eval` and `edge-hf diagnose`: clip-level scores, and the controls for time."""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from edge_hf.contract import INPUT_NAME, OUTPUT_NAME
from edge_hf.data import HyperframeDataset, WindowSpec, decode_clips, load_clips
from edge_hf.errors import UserError
from edge_hf.hyperframe import stack_frames
from edge_hf.metrics import classification_report, pair_scores, predict_clips
from edge_hf.train import TrainConfig, load_checkpoint, plot_confusion, train

log = logging.getLogger(__name__)

AMBIGUOUS_PAIRS = (("fall", "lie_down"), ("sit_down", "stand_up"))


class OnnxClassifier(nn.Module):
    """An exported model behind the nn.Module call interface, run by ONNX Runtime on the CPU."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        import onnxruntime as ort

        from edge_hf.contract import read_contract

        self.contract = read_contract(path)
        self.session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.session.run([OUTPUT_NAME], {INPUT_NAME: x.numpy()})[0]
        return torch.from_numpy(out)


def load_model(path: Path) -> tuple[nn.Module, WindowSpec, list[str], str]:
    """A checkpoint (.pt) or exported model (.onnx): model, window spec, classes, fall class."""
    if not path.exists():
        raise UserError(f"{path}: no such model file")
    if path.suffix == ".onnx":
        m = OnnxClassifier(path)
        c = m.contract
        spec = WindowSpec(c.window, c.interval_ms / 1000.0, c.input_size, c.volumes, c.mean, c.std)
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
        clips, spec.size, cache_dir, progress=True, background_label=background_label
    )
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


def static_blocks_identical(data: Path, spec: WindowSpec) -> bool:
    """A still clip (one frame repeated T times) must give identical channel blocks."""
    clip = decode_clips(load_clips(data)[:1], spec.size)[0]
    frame = clip.video.frames[0]
    x = stack_frames([frame] * spec.window, spec.mean, spec.std)
    return all(torch.equal(x[0:3], x[3 * k : 3 * k + 3]) for k in range(spec.window))


def diagnose(cfg: TrainConfig, test_data: Path, out: Path) -> dict[str, Any]:
    """Train the hyperframe model and its two controls on the same data and budget; test all three.

    - hyperframe: T frames in time order;
    - single frame: T=1, the baseline that cannot see motion;
    - time-shuffled: T frames whose blocks get a fresh random order in every sample (train and
      test), keeping motion magnitude but destroying direction.
    """
    variants = {
        f"hyperframe T={cfg.window}": replace(cfg, shuffle_time=False),
        "single frame T=1": replace(cfg, window=1, shuffle_time=False),
        f"time-shuffled T={cfg.window}": replace(cfg, shuffle_time=True),
    }
    results: dict[str, Any] = {"test_data": str(test_data), "config": vars(cfg), "variants": {}}
    for name, vcfg in variants.items():
        slug = name.split(" T=")[0].replace(" ", "_").replace("-", "_")
        vcfg = replace(vcfg, out=str(out / slug))
        log.info("diagnose: training %s", name)
        trained = train(vcfg)
        report = evaluate(
            trained.best_checkpoint,
            test_data,
            shuffle_time=vcfg.shuffle_time,
            cache_dir=Path(vcfg.cache_dir) if vcfg.cache_dir else None,
            confusion_png=out / f"confusion_{slug}.png",
        )
        results["variants"][name] = {"checkpoint": str(trained.best_checkpoint), **report}
    results["static_blocks_identical"] = static_blocks_identical(test_data, cfg.spec())
    (out / "diagnose.json").write_text(json.dumps(results, indent=1))
    (out / "diagnose.md").write_text(diagnose_table(results))
    return results


def diagnose_table(results: dict[str, Any]) -> str:
    """The diagnose results as a Markdown table."""
    pairs = sorted({p for v in results["variants"].values() for p in v["pairs"]})
    head = ["variant", "accuracy", "fall F1"] + [f"{p} F1" for p in pairs]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for name, v in results["variants"].items():
        cells = [name, f"{v['accuracy']:.3f}", f"{v['fall_f1']:.3f}"]
        cells += [f"{v['pairs'][p]['macro_f1']:.3f}" for p in pairs]
        lines.append("| " + " | ".join(cells) + " |")
    ok = "yes" if results.get("static_blocks_identical") else "NO"
    lines.append("")
    lines.append(f"Static clip gives identical channel blocks after normalisation: {ok}.")
    return "\n".join(lines) + "\n"


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
