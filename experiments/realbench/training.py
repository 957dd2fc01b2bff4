"""Fold models: train a row's recipe on a fold's training clips and export ONNX (resumable: a fold
model already exported is not trained again), and the shipped model (`train_final`).
"""

from __future__ import annotations

import argparse
import logging
import time
from dataclasses import replace
from pathlib import Path

from edge_hf.core.pose import POSE_MODEL
from edge_hf.training.export import export_onnx
from edge_hf.training.train import TrainConfig, train

from .items import FOLDS, REVERSE, Item, split_fold, vtest_negatives, write_manifest, zoomed_items
from .variants import VARIANTS, Variant

log = logging.getLogger("real_benchmark")


def base_config(a: argparse.Namespace) -> TrainConfig:
    """The recipe every fold trains with (the variant fills in backbone, T, prior)."""
    return TrainConfig(
        data="",
        classes=["adl", "fall"],
        select="last",
        background_label="adl",
        epochs=a.epochs,
        samples_per_clip=a.samples_per_clip,
        lr=a.lr,
        batch_size=32,
        crop_scale_min=0.6,
        camera_aug=a.camera_aug,
        max_offset_steps=2,
        cache_dir=str(Path(a.out) / "cache"),
    )


def row_inputs(
    variant: Variant, items: list[Item], a: argparse.Namespace
) -> tuple[list[Item], Path]:
    """The clips and vtest.avi a row trains and replays on: as recorded, or motion-zoomed."""
    if not variant.zoom:
        return items, Path(a.vtest)
    # (one folder per sampling interval: the zoom sees one frame per interval)
    out = Path(a.out) / "zoomed" / f"{variant.interval_ms:g}ms"
    return zoomed_items(items, Path(a.vtest), out, variant.interval_ms / 1000)


def add_fold_model_args(p: argparse.ArgumentParser) -> None:
    """--out / --variant / --seed / --fold: which fold model of a benchmark run (the
    experiments that look into one)."""
    p.add_argument("--out", default="benchmarks/results/real", help="the benchmark's --out")
    p.add_argument("--variant", default="lite0 T=3 ImageNet falling+down 160px, confirm 2 s")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fold", default="A", choices=(*FOLDS, REVERSE))


def fold_model(a: argparse.Namespace) -> Path:
    """The fold model `add_fold_model_args` named; exits with one line if it is not there."""
    model = fold_dir(Path(a.out), a.variant, a.seed, a.fold) / "model.onnx"
    if not model.exists():
        raise SystemExit(f"{model}: no such fold model; run make real-bench for that row first")
    return model


def fold_dir(out: Path, name: str, seed: int, fold: str) -> Path:
    name = VARIANTS[name].models or name if name in VARIANTS else name
    slug = name.replace(" ", "_").replace("=", "").replace("/", "")
    return out / "work" / f"{slug}_s{seed}_{fold}"


def _train_and_export(
    variant: Variant, a: argparse.Namespace, train_items: list[Item], val_items: list[Item],
    seed: int, rundir: Path, export: Path, teacher: Path | None = None,
) -> None:  # fmt: skip
    """Train the variant's recipe on `train_items` (watching `val_items`) and export ONNX."""
    states = (
        {"classes": ["adl", "down", "falling"], "fall_class": "falling", "down_class": "down",
         "background_label": None}
        if variant.three_state else {}
    )  # fmt: skip
    cfg = replace(
        base_config(a),
        data=str(write_manifest(train_items, rundir / "train.csv", variant.three_state)),
        val_data=str(write_manifest(val_items, rundir / "val.csv", variant.three_state)),
        backbone=variant.backbone,
        window=variant.window,
        pretrained=variant.pretrained,
        shuffle_time=variant.shuffle_time,
        input_size=variant.input_size,
        interval_ms=variant.interval_ms,
        seed=seed,
        out=str(rundir),
        **variant.own_recipe(a),
        hard_negatives=variant.hard_negatives,
        backbone_lr=variant.backbone_lr,
        max_offset_steps=variant.offset_steps,
        resize=variant.resize,
        volumes=variant.volumes,
        crop=variant.crop,
        pose_model=str(POSE_MODEL),
        teacher=str(teacher) if teacher is not None else None,
        **states,  # type: ignore[arg-type]
    )
    export_onnx(train(cfg).best_checkpoint, export, **variant.operating_point())


def ensure_fold_model(
    name: str, variant: Variant, seed: int, fold: str, items: list[Item], a: argparse.Namespace
) -> Path:
    """The rundir of one fold model of a row and seed, trained and exported if missing (an
    ensemble row's: its members first)."""
    rundir = fold_dir(Path(a.out), name, seed, fold)
    if (rundir / "model.onnx").exists():
        return rundir
    t0 = time.perf_counter()
    if variant.members > 1:
        base = VARIANTS[variant.members_of]
        first = seed * variant.members
        members = [
            ensure_fold_model(variant.members_of, base, first + i, fold, items, a) / "best.pt"
            for i in range(variant.members)
        ]
        export_onnx(
            members, rundir / "model.onnx", mirrored=variant.mirrored, **variant.operating_point()
        )
        return rundir
    teacher = None
    if variant.teacher:
        teacher_row = VARIANTS[variant.teacher]
        teacher = ensure_fold_model(variant.teacher, teacher_row, seed, fold, items, a)
        teacher /= "model.onnx"
    items, vtest = row_inputs(variant, items, a)
    test, rest = split_fold(items, fold, Path(a.out))
    if variant.vtest_negatives:
        rest += vtest_negatives(vtest)
    _train_and_export(variant, a, rest, test, seed, rundir, rundir / "model.onnx", teacher)
    log.info("%s seed %d fold %s: %.0f s", name, seed, fold, time.perf_counter() - t0)
    return rundir


def train_final(name: str, items: list[Item], a: argparse.Namespace, export: Path) -> Path:
    """The shipped model: the variant's recipe on every clip of both datasets (seed 0; an
    ensemble row: its members' recipe, seeds 0 .. members - 1, averaged)."""
    variant = VARIANTS[name]
    items, vtest = row_inputs(variant, items, a)
    train_items = items + (vtest_negatives(vtest) if variant.vtest_negatives else [])
    if variant.members == 1:
        teacher = None
        if variant.teacher:  # the teacher row's own shipped-style model, on every clip too
            teacher = Path(a.out) / "final" / "teacher.onnx"
            if not teacher.exists():
                train_final(variant.teacher, items, a, teacher)
        rundir = Path(a.out) / "final" / ("student" if teacher else "")
        _train_and_export(variant, a, train_items, items, 0, rundir, export, teacher)
        return export
    members = []
    for i in range(variant.members):
        rundir = Path(a.out) / "final" / f"member{i}"
        if not (rundir / "model.onnx").exists():
            base = VARIANTS[variant.members_of]
            _train_and_export(base, a, train_items, items, i, rundir, rundir / "model.onnx")
        members.append(rundir / "best.pt")
    export_onnx(members, export, mirrored=variant.mirrored, **variant.operating_point())
    return export
