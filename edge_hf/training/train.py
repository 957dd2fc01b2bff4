"""Training: a resolved config, a plain loop, the best checkpoint by validation fall F1, and plots.

Reads top to bottom: config -> clips and split -> datasets -> model -> epochs (train, validate,
keep the best) -> metrics files and plots. The resolved config is saved inside every checkpoint,
so `eval` and `export` rebuild exactly the model that was trained.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader

from edge_hf.core.errors import UserError
from edge_hf.training.checkpoint import (
    OnnxClassifier,
    load_checkpoint,
    read_checkpoint,
    save_checkpoint,
)
from edge_hf.training.config import TrainConfig, contract_from_config
from edge_hf.training.data import (
    Clip,
    HyperframeDataset,
    LoadedClip,
    decode_clips,
    load_clips,
)
from edge_hf.training.models import HyperVolume, build_model, freeze_batchnorm, stem_conv
from edge_hf.training.scores import classification_report, plot_confusion, predict_clips

log = logging.getLogger(__name__)


def _seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def split_clips(clips: Sequence[Clip], cfg: TrainConfig) -> tuple[list[Clip], list[Clip]]:
    """Validation clips: the subjects asked for; else a random `val_fraction` of the subjects
    when every clip names one (no person or scene on both sides); else a stratified random
    fraction of the clips of each label."""
    rng = random.Random(cfg.seed)
    subjects = sorted({c.subject for c in clips if c.subject})
    if cfg.val_subjects:
        val_subjects = set(cfg.val_subjects)
    elif len(subjects) > 1 and all(c.subject for c in clips):
        rng.shuffle(subjects)
        val_subjects = set(subjects[: max(1, round(cfg.val_fraction * len(subjects)))])
    else:
        val_subjects = set()
    if val_subjects:
        val = [c for c in clips if c.subject in val_subjects]
        train = [c for c in clips if c.subject not in val_subjects]
        if not val or not train:
            raise UserError(f"--val-subjects {cfg.val_subjects} leaves an empty train or val split")
        return train, val
    train, val = [], []
    for label in sorted({c.label for c in clips}):
        group = [c for c in clips if c.label == label]
        rng.shuffle(group)
        n_val = max(1, round(cfg.val_fraction * len(group))) if len(group) > 1 else 0
        val += group[:n_val]
        train += group[n_val:]
    return train, val


def resolve_classes(cfg: TrainConfig, clips: Sequence[Clip]) -> list[str]:
    classes = cfg.classes or sorted({c.label for c in clips})
    if cfg.fall_class not in classes:
        raise UserError(f"fall class {cfg.fall_class!r} is not among the labels {classes}")
    if cfg.down_class is not None and cfg.down_class not in classes:
        raise UserError(f"--down-class {cfg.down_class!r} is not among the labels {classes}")
    return classes


def load_split(cfg: TrainConfig) -> tuple[list[LoadedClip], list[LoadedClip], list[str]]:
    """Decode the training and validation clips (validation from --val-data or a split)."""
    clips = load_clips(Path(cfg.data))
    if cfg.val_data:
        train_clips, val_clips = clips, load_clips(Path(cfg.val_data))
    else:
        train_clips, val_clips = split_clips(clips, cfg)
    classes = resolve_classes(cfg, train_clips)
    size = (cfg.input_size, cfg.input_size)
    cache = Path(cfg.cache_dir) if cfg.cache_dir else None
    bg = cfg.background_label
    if bg is not None and bg not in classes:
        raise UserError(f"--background-label {bg!r} is not among the labels {classes}")
    crop, pose = cfg.spec().person_crop, Path(cfg.pose_model)

    def decode(clips: list[Clip]) -> list[LoadedClip]:
        return decode_clips(clips, size, cache, True, background_label=bg, resize=cfg.resize,
                            person_crop=crop, pose_model=pose)  # fmt: skip

    return decode(train_clips), decode(val_clips), classes


def _adopt_stem(cfg: TrainConfig) -> TrainConfig:
    """With --init-from and no --stem-kernel of its own, a run takes the source's first conv
    size, so that a stem trained to see motion is carried over rather than dropped for shape."""
    if not cfg.init_from or cfg.stem_kernel:
        return cfg
    src = read_checkpoint(Path(cfg.init_from))["config"]
    stem = int(src.get("stem_kernel", 0))
    if stem:
        log.info("--init-from: using its %dx%d first conv (--stem-kernel %d)", stem, stem, stem)
        cfg = replace(cfg, stem_kernel=stem)
    return cfg


def _init_from_checkpoint(model: nn.Module, path: Path, cfg: TrainConfig) -> None:
    """Start from another edge_hf run (e.g. synthetic pre-training): every tensor whose name and
    shape match is copied; the head, sized for other classes, keeps its fresh init."""
    src, src_cfg, _ = load_checkpoint(path)
    if (src_cfg.backbone, src_cfg.window) != (cfg.backbone, cfg.window):
        raise UserError(
            f"--init-from {path}: it is {src_cfg.backbone} T={src_cfg.window}, "
            f"this run is {cfg.backbone} T={cfg.window}"
        )
    own = model.state_dict()
    copied = {k: v for k, v in src.state_dict().items() if k in own and own[k].shape == v.shape}
    own.update(copied)
    model.load_state_dict(own)
    log.info("initialised %d of %d tensors from %s", len(copied), len(own), path)


class DistillLoss(nn.Module):
    """Cross-entropy on the labels plus the teacher's softened probabilities on the same windows:
    (1 - w) CE(student, y) + w T^2 KL(teacher_T || student_T) (Hinton et al., 2015). The teacher
    is an exported model (an ensemble's output is already the log of its mean probability; a
    log-softmax of it is the same distribution), run by ONNX Runtime on each batch."""

    def __init__(self, cfg: TrainConfig, classes: Sequence[str], labels_loss: nn.Module) -> None:
        super().__init__()
        if cfg.teacher is None:
            raise ValueError("DistillLoss needs TrainConfig.teacher")
        self.teacher = OnnxClassifier(Path(cfg.teacher))
        mine, theirs = contract_from_config(cfg, list(classes)), self.teacher.contract
        for key in ("window", "interval_ms", "input_size", "classes", "volumes", "mean", "std",
                    "resize", "crop"):  # fmt: skip
            if getattr(mine, key) != getattr(theirs, key):
                raise UserError(
                    f"--teacher {cfg.teacher}: its {key} {getattr(theirs, key)!r} differs from "
                    f"this training's {getattr(mine, key)!r}; distil from a model of the same "
                    "contract"
                )
        self.labels_loss = labels_loss
        self.weight, self.temperature = cfg.distill_weight, cfg.distill_temperature

    def forward(self, logits: torch.Tensor, y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        t = self.temperature
        with torch.no_grad():
            target = torch.log_softmax(self.teacher(x.cpu()).to(logits.device) / t, dim=1)
        kl = nn.functional.kl_div(
            torch.log_softmax(logits / t, dim=1), target, log_target=True, reduction="batchmean"
        )
        return (1 - self.weight) * self.labels_loss(logits, y) + self.weight * t * t * kl


def _run_epoch(
    model: nn.Module,
    loader: DataLoader[tuple[torch.Tensor, int, int]],
    opt: torch.optim.Optimizer,
    sched: torch.optim.lr_scheduler.LRScheduler,
    loss_fn: nn.Module,
    cfg: TrainConfig,
    device: torch.device,
    desc: str,
) -> float:
    from tqdm import tqdm

    model.train()
    if cfg.freeze_bn:
        freeze_batchnorm(model)
    total, n = 0.0, 0
    bar = tqdm(loader, desc=desc, unit="batch", leave=False)
    for x, y, _ in bar:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        logits = model(x)
        loss = loss_fn(logits, y, x) if isinstance(loss_fn, DistillLoss) else loss_fn(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        total += loss.item() * len(y)
        n += len(y)
        bar.set_postfix(loss=f"{total / n:.3f}")
    return total / max(1, n)


def param_groups(
    model: nn.Module, backbone: str, num_classes: int, lr: float, backbone_share: float
) -> list[dict[str, Any]]:
    """The new layers at `lr`, the rest at `lr * backbone_share`. New: the head (every Linear
    layer with one output per class) and an inflated stem (the first conv, when it takes more
    than 3 channels): the stem is where the frames of a window meet, so it is the layer that
    has to learn motion, which no RGB prior holds."""
    head = [
        p
        for m in model.modules()
        if isinstance(m, nn.Linear) and m.out_features == num_classes
        for p in m.parameters()
    ]
    stem = stem_conv(model, backbone)
    if isinstance(stem, nn.Conv2d) and stem.in_channels > 3:
        head += list(stem.parameters())
    if isinstance(model, HyperVolume):  # its 1-D fusion over the hyperframes is new too
        head += list(model.fuse.parameters())
    ids = {id(p) for p in head}
    rest = [p for p in model.parameters() if id(p) not in ids]
    groups = [{"params": head, "lr": lr}, {"params": rest, "lr": lr * backbone_share}]
    return [g for g in groups if g["params"]]


def alarm_classes(cfg: TrainConfig, classes: Sequence[str]) -> list[int]:
    """Indices of the classes that raise an alarm: the fall class and, if set, the down class."""
    return [classes.index(c) for c in (cfg.fall_class, cfg.down_class) if c in classes]


@torch.no_grad()
def mine_hard_negatives(
    model: nn.Module,
    ds: HyperframeDataset,
    alarm: Sequence[int],
    count: int,
    device: torch.device,
    batch_size: int = 64,
) -> list[tuple[int, float]]:
    """The `count` windows of non-alarm clips that `model` scores highest as an alarm (the sum
    of the alarm classes' probabilities), on a grid of one window span; the most confusing
    daily activity is what the next epoch sees more of. Fewer candidates than `count`: repeated."""
    from tqdm import tqdm

    stride = ds.spec.window * ds.spec.interval_s
    candidates = [
        (ci, c)
        for ci in range(len(ds.clips))
        if ds.label_of(ci) not in alarm
        for c in ds.grid(ci, stride)
    ]
    if not candidates or count <= 0:
        return []
    model.eval()
    scores: list[torch.Tensor] = []
    for i in tqdm(range(0, len(candidates), batch_size), desc="mining", unit="batch", leave=False):
        x = torch.stack([ds.plain(ci, c) for ci, c in candidates[i : i + batch_size]])
        p = model(x.to(device)).float().softmax(1)
        scores.append(p[:, list(alarm)].sum(1).cpu())
    score = torch.cat(scores)
    order = score.argsort(descending=True).tolist()
    top = [candidates[i] for i in order[:count]]
    top = (top * (count // len(top) + 1))[:count]
    kept = score[order[: min(count, len(order))]]
    log.info(
        "hard negatives: %d windows of %d scored %.2f-%.2f as a fall (%d clips)",
        len(top), len(candidates), kept.min().item(), kept.max().item(), len({ci for ci, _ in top}),
    )  # fmt: skip
    return top


@dataclass
class TrainResult:
    """Where the best checkpoint is and how it scored on the validation clips."""

    best_checkpoint: Path
    best_epoch: int
    best_report: dict[str, Any]
    history: list[dict[str, Any]]


def train(cfg: TrainConfig) -> TrainResult:
    """Train, validate each epoch, keep the best by validation fall F1 (then loss)."""
    cfg.validate()
    cfg = _adopt_stem(cfg)
    _seed_everything(cfg.seed)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    train_clips, val_clips, classes = load_split(cfg)
    spec = cfg.spec()
    common = {"classes": classes, "spec": spec, "shuffle_time": cfg.shuffle_time, "seed": cfg.seed}
    train_ds = HyperframeDataset(
        train_clips,
        train=True,
        samples_per_clip=cfg.samples_per_clip,
        max_offset_steps=cfg.max_offset_steps,
        crop_scale=(cfg.crop_scale_min, 1.0),
        reverse_pairs=cfg.reverse_map(),
        camera_aug=cfg.camera_aug,
        condition_aug=cfg.condition_aug,
        **common,  # type: ignore[arg-type]
    )
    val_ds = HyperframeDataset(val_clips, train=False, **common)  # type: ignore[arg-type]
    loader = DataLoader(
        train_ds,
        batch_size=cfg.batch_size,
        shuffle=True,
        num_workers=cfg.workers,
        drop_last=len(train_ds) > cfg.batch_size,
        # Workers start afresh each epoch: a persistent worker keeps its copy of the dataset,
        # and would never see the epoch (random draws) or the hard negatives set after it.
        persistent_workers=False,
        generator=torch.Generator().manual_seed(cfg.seed),
    )
    model = build_model(
        cfg.backbone,
        cfg.window,
        len(classes),
        cfg.volumes,
        pretrained=cfg.pretrained,
        weights_file=Path(cfg.weights) if cfg.weights else None,
        inflate_noise=cfg.inflate_noise,
        stem_kernel=cfg.stem_kernel,
        temporal_init=cfg.temporal_init,
        motion_init=cfg.motion_init,
    )
    if cfg.init_from:
        _init_from_checkpoint(model, Path(cfg.init_from), cfg)
    model.to(device)
    groups = param_groups(model, cfg.backbone, len(classes), cfg.lr, cfg.backbone_lr)
    opt = torch.optim.AdamW(groups, lr=cfg.lr, weight_decay=cfg.weight_decay)
    steps = max(1, cfg.epochs * len(loader))
    sched = torch.optim.lr_scheduler.OneCycleLR(
        opt, max_lr=[g["lr"] for g in groups], total_steps=steps, pct_start=0.15
    )
    loss_fn: nn.Module = nn.CrossEntropyLoss(label_smoothing=cfg.label_smoothing)
    if cfg.teacher:
        loss_fn = DistillLoss(cfg, classes, loss_fn)
        log.info("distilling from %s (weight %g, temperature %g)", cfg.teacher,
                 cfg.distill_weight, cfg.distill_temperature)  # fmt: skip
    log.info(
        "training %s T=%d on %d clips (%d windows/epoch), validating on %d clips, classes %s",
        cfg.backbone,
        cfg.window,
        len(train_clips),
        len(train_ds),
        len(val_clips),
        classes,
    )
    history: list[dict[str, Any]] = []
    best: tuple[float, float] = (-1.0, math.inf)
    best_epoch, best_report = 0, {}
    for epoch in range(1, cfg.epochs + 1):
        train_ds.set_epoch(epoch)
        t0 = time.perf_counter()
        train_loss = _run_epoch(
            model, loader, opt, sched, loss_fn, cfg, device, f"epoch {epoch}/{cfg.epochs}"
        )
        pred = predict_clips(model, val_ds, cfg.batch_size, cfg.workers, device)
        report = classification_report(pred.labels, pred.logits.argmax(1), classes, cfg.fall_class)
        row = {
            "epoch": epoch,
            "train_loss": train_loss,
            "val_loss": pred.loss,
            "val_accuracy": report["accuracy"],
            "val_fall_f1": report["fall_f1"],
            "val_macro_f1": report["macro_f1"],
            "seconds": time.perf_counter() - t0,
        }
        history.append(row)
        log.info(
            "epoch %d: train loss %.3f, val loss %.3f, acc %.3f, fall F1 %.3f (%.0f s)",
            epoch,
            train_loss,
            pred.loss,
            report["accuracy"],
            report["fall_f1"],
            row["seconds"],
        )
        if cfg.hard_negatives and epoch < cfg.epochs:
            count = round(cfg.hard_negatives * len(train_ds))
            mined = mine_hard_negatives(
                model, train_ds, alarm_classes(cfg, classes), count, device, cfg.batch_size
            )
            train_ds.set_hard(mined)
        save_checkpoint(out / "last.pt", model, cfg, classes, epoch=epoch, report=report)
        # "last" is for runs whose validation set is the test set: watched, never chosen by.
        better = (report["fall_f1"], -pred.loss) > (best[0], -best[1])
        if better or cfg.select == "last":
            best, best_epoch, best_report = (report["fall_f1"], pred.loss), epoch, report
            save_checkpoint(out / "best.pt", model, cfg, classes, epoch=epoch, report=report)
        _write_history(out, history)
    _write_plots(out, history, best_report)
    return TrainResult(out / "best.pt", best_epoch, best_report, history)


def _write_history(out: Path, history: list[dict[str, Any]]) -> None:
    with (out / "metrics.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(history[0]))
        writer.writeheader()
        writer.writerows(history)
    (out / "metrics.json").write_text(json.dumps(history, indent=1))


def _write_plots(out: Path, history: list[dict[str, Any]], report: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = [h["epoch"] for h in history]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.5))
    a1.plot(epochs, [h["train_loss"] for h in history], label="train")
    a1.plot(epochs, [h["val_loss"] for h in history], label="validation")
    a1.set_xlabel("epoch")
    a1.set_ylabel("loss")
    a1.legend()
    a2.plot(epochs, [h["val_fall_f1"] for h in history], label="fall F1")
    a2.plot(epochs, [h["val_accuracy"] for h in history], label="accuracy")
    a2.set_xlabel("epoch")
    a2.set_ylim(0, 1.02)
    a2.legend()
    fig.tight_layout()
    fig.savefig(out / "curves.png", dpi=100)
    plt.close(fig)
    if report:
        plot_confusion(out / "confusion.png", report["confusion"], report["classes"], "validation")
