"""The training toolkit's sub-commands (`window`, `synth`, `train`, `eval`, `diagnose`,
`export`, `card`), called by cli.py with the parsed arguments."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import typing
from pathlib import Path

from edge_hf.core.errors import UserError

if typing.TYPE_CHECKING:
    from edge_hf.core.contract import ModelContract


def window(args: argparse.Namespace) -> int:
    from edge_hf.core.hyperframe import suggest_window

    try:
        t = suggest_window(args.action_s, args.interval_ms / 1000.0)
    except ValueError as exc:
        raise UserError(str(exc)) from None
    span = (t - 1) * args.interval_ms
    print(f"T={t} (window spans {span:.0f} ms at {args.interval_ms:g} ms per step)")
    return 0


def synth(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from edge_hf.training.synth import CLASSES, generate, write_demo_clips

    if args.demo:
        for path in write_demo_clips(Path(args.out), args.fps or 15.0):
            print(f"wrote {path}")
        return 0
    args.fps = args.fps or 30.0
    classes = tuple(args.classes or CLASSES)
    bad = sorted(set(classes) - set(CLASSES))
    if bad:
        raise UserError(f"--classes {bad}: unknown; choose from {', '.join(CLASSES)}")
    if args.clips < 1 or args.fps <= 0:
        raise UserError("--clips must be >= 1 and --fps > 0")
    with tqdm(total=args.clips * len(classes), desc="synth", unit="clip") as bar:
        manifest = generate(
            Path(args.out),
            args.clips,
            args.fps,
            seed=args.seed,
            width=args.width,
            height=args.height,
            classes=classes,
            progress=lambda done, total: bar.update(done - bar.n),
        )
    print(f"wrote {args.clips * len(classes)} clips and {manifest}")
    return 0


def train_config(args: argparse.Namespace) -> typing.Any:
    from edge_hf.training.train import TrainConfig

    values = {f.name: getattr(args, f.name) for f in dataclasses.fields(TrainConfig)}
    return TrainConfig(**values)


def train(args: argparse.Namespace) -> int:
    from edge_hf.training.train import train as run_training

    result = run_training(train_config(args))
    r = result.best_report
    print(
        f"best epoch {result.best_epoch}: val accuracy {r['accuracy']:.3f}, "
        f"fall F1 {r['fall_f1']:.3f} -> {result.best_checkpoint}"
    )
    return 0


def evaluate(args: argparse.Namespace) -> int:
    from edge_hf.training.evaluate import evaluate as run_eval
    from edge_hf.training.evaluate import report_text

    report = run_eval(
        Path(args.model),
        Path(args.data),
        shuffle_time=args.shuffle_time,
        batch_size=args.batch_size,
        cache_dir=Path(args.cache_dir) if args.cache_dir else None,
        confusion_png=Path(args.confusion_png) if args.confusion_png else None,
        background_label=args.background_label,
    )
    print(json.dumps(report) if args.json else report_text(report))
    return 0


def diagnose(args: argparse.Namespace) -> int:
    from edge_hf.training.diagnose import diagnose as run_diagnose
    from edge_hf.training.diagnose import diagnose_table

    cfg = train_config(args)
    results = run_diagnose(cfg, Path(args.test_data), Path(cfg.out))
    print(diagnose_table(results))
    return 0


def _export_fp32(args: argparse.Namespace, out: Path) -> ModelContract | None:
    """`--checkpoint` (one, or several averaged into one model) exported to `out`: the contract,
    or None after printing why the export failed."""
    from edge_hf.training.export import ExportError, export_onnx

    checkpoints = [Path(c) for c in args.checkpoint]
    if len(checkpoints) > 1 and any(c.suffix == ".onnx" for c in checkpoints):
        raise UserError("--checkpoint: an ensemble is made of best.pt files, not exported .onnx")
    try:
        return export_onnx(checkpoints, out, atol=args.atol, threshold=args.threshold,
                           confirm_s=args.confirm_s, mirrored=args.mirrored,
                           static_padding=not args.dynamic_padding)  # fmt: skip
    except ExportError as exc:
        print(f"edge-hf export: {exc}", file=sys.stderr)
        return None
    except ValueError as exc:  # an operating point the contract refuses (--threshold 1.5)
        raise UserError(f"--threshold/--confirm-s: {exc}") from None


def export(args: argparse.Namespace) -> int:
    if args.int8:
        return _export_int8(args)
    contract = _export_fp32(args, Path(args.out))
    if contract is None:
        return 1
    print(
        f"wrote {args.out}: {contract.backbone}{contract.members_note} T={contract.window} "
        f"classes={contract.classes}"
    )
    return 0


def _export_int8(args: argparse.Namespace) -> int:
    import tempfile

    from edge_hf.training.quantize import calibration_windows, quantize_int8

    if not args.calibration:
        raise UserError("--int8 needs --calibration DATA (clips like the training data)")
    if not 1 <= args.calibration_windows <= 100_000:
        raise UserError(f"--calibration-windows {args.calibration_windows}: give 1..100000")
    source, out = Path(args.checkpoint[0]), Path(args.out)
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = source
        if len(args.checkpoint) > 1 or source.suffix != ".onnx":
            fp32 = Path(tmp) / "fp32.onnx"
            if _export_fp32(args, fp32) is None:
                return 1
        cache = Path(args.cache_dir) if args.cache_dir else None
        windows = calibration_windows(fp32, Path(args.calibration), args.calibration_windows, cache)
        stats = quantize_int8(fp32, out, windows, f" from {Path(args.calibration).name}")
    print(
        f"wrote {out}: int8 QDQ, {stats['int8_bytes'] / 1e6:.1f} MB (fp32 "
        f"{stats['fp32_bytes'] / 1e6:.1f} MB); on {stats['windows']} calibration windows the "
        f"top class agrees with fp32 on {stats['argmax_agreement']:.1%}, largest probability "
        f"difference {stats['max_prob_diff']:.3f}"
    )
    return 0


def card(args: argparse.Namespace) -> int:
    from edge_hf.training.card import write_card

    report = json.loads(Path(args.test_json).read_text()) if args.test_json else None
    diag = Path(args.diagnose_md).read_text() if args.diagnose_md else None
    write_card(
        Path(args.model), Path(args.out), args.train_command, args.data_note, report,
        args.test_note, diag, args.diagnose_title,
    )  # fmt: skip
    print(f"wrote {args.out}")
    return 0
