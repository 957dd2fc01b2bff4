"""Real-footage experiment on GMDCSA24, split by subject: T=1 vs T=3 vs T=5 vs time-shuffled, and
the window's span (T x interval), each over several training seeds (mean and spread).

    python -m experiments.real_footage --data ../shared/data/gmdcsa24 --test-subjects 3 \
        --seeds 0 1 2 --out runs/real

Writes `<out>/results.json` and `<out>/results.md`. Each run trains on the other subjects, keeps
its last epoch (the held-out subject is watched, never used to choose), and is scored per clip
segment with the time before each fall counted as `adl` (`--background-label adl`).
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any

from edge_hf.training.evaluate import evaluate
from edge_hf.training.train import TrainConfig, train

log = logging.getLogger("real_footage")

# name -> (window, interval_ms, shuffle_time, start from the synthetic T=3 model)
VARIANTS: dict[str, tuple[int, float, bool, bool]] = {
    "T=1": (1, 100.0, False, False),
    "T=3 @100ms (span 200ms)": (3, 100.0, False, False),
    "T=3 @200ms (span 400ms)": (3, 200.0, False, False),
    "T=3 @300ms (span 600ms)": (3, 300.0, False, False),
    "T=5 @100ms (span 400ms)": (5, 100.0, False, False),
    "T=5 @200ms (span 800ms)": (5, 200.0, False, False),
    "T=3 @200ms time-shuffled": (3, 200.0, True, False),
    "T=3 @100ms from synthetic": (3, 100.0, False, True),
}
SYNTH_CHECKPOINT = "runs/demo/hyperframe/best.pt"  # written by `make demo-model`


def split_manifest(data: Path, test_subjects: list[str], out: Path) -> tuple[Path, Path]:
    """Write train/test manifests (absolute paths) split by the `subject` column."""
    with (data / "manifest.csv").open(newline="") as fh:
        reader = csv.DictReader(fh)
        fields = list(reader.fieldnames or [])
        rows = list(reader)
    out.mkdir(parents=True, exist_ok=True)
    paths = {}
    for name, keep in (("train", False), ("test", True)):
        path = out / f"{name}.csv"
        with path.open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=fields)
            writer.writeheader()
            for r in rows:
                if (r["subject"] in test_subjects) == keep:
                    writer.writerow({**r, "path": str((data / r["path"]).resolve())})
        paths[name] = path
    return paths["train"], paths["test"]


def main() -> None:
    p = argparse.ArgumentParser(
        prog="python -m experiments.real_footage",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    p.add_argument("--data", default="../shared/data/gmdcsa24")
    p.add_argument("--test-subjects", nargs="+", default=["3"])
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--out", default="runs/real")
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), help="subset of the variants")
    p.add_argument("--backbone", default="mobilenet_v3_small")
    p.add_argument("--input-size", type=int, default=96)
    p.add_argument("--epochs", type=int, default=25)
    p.add_argument("--samples-per-clip", type=int, default=12)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument(
        "--synth-checkpoint",
        default=SYNTH_CHECKPOINT,
        help="the synthetic model the 'from synthetic' variant starts from",
    )
    a = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    out = Path(a.out)
    train_csv, test_csv = split_manifest(Path(a.data), a.test_subjects, out)
    base = TrainConfig(
        data=str(train_csv),
        val_data=str(test_csv),
        select="last",
        background_label="adl",
        backbone=a.backbone,
        input_size=a.input_size,
        epochs=a.epochs,
        samples_per_clip=a.samples_per_clip,
        lr=a.lr,
        crop_scale_min=0.6,
        cache_dir=str(out / "cache"),
    )
    results: dict[str, Any] = {"train": str(train_csv), "test": str(test_csv), "runs": {}}
    results_file = out / "results.json"
    if results_file.exists():  # resume: keep finished runs
        results["runs"] = json.loads(results_file.read_text())["runs"]
    for name in a.variants:
        window, interval_ms, shuffled, from_synth = VARIANTS[name]
        if from_synth and not Path(a.synth_checkpoint).exists():
            log.warning("skipping %s: %s not found (run make demo-model)", name, a.synth_checkpoint)
            continue
        for seed in a.seeds:
            key = f"{name} | seed {seed}"
            if key in results["runs"]:
                continue
            slug = name.split(" (")[0].replace(" ", "_").replace("@", "").replace("=", "")
            slug = f"{slug}_s{seed}"
            cfg = replace(
                base,
                window=window,
                interval_ms=interval_ms,
                shuffle_time=shuffled,
                init_from=a.synth_checkpoint if from_synth else None,
                seed=seed,
                out=str(out / slug),
            )
            log.info("run %s", key)
            ckpt = train(cfg).best_checkpoint
            report = evaluate(
                ckpt, test_csv, shuffle_time=shuffled, cache_dir=Path(base.cache_dir or ""),
                background_label="adl",
            )  # fmt: skip
            results["runs"][key] = {
                "variant": name,
                "seed": seed,
                "accuracy": report["accuracy"],
                "fall_f1": report["fall_f1"],
                "fall_precision": report["fall_precision"],
                "fall_recall": report["fall_recall"],
                "clips": report["clips"],
            }
            results_file.write_text(json.dumps(results, indent=1))
    (out / "results.md").write_text(table(results, a.variants))
    print(table(results, a.variants))


def _mean_sd(values: list[float]) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.3f} ± {sd:.3f}"


def table(results: dict[str, Any], variants: list[str]) -> str:
    """Mean ± standard deviation over seeds for each variant."""
    lines = [
        "| variant | seeds | accuracy | fall precision | fall recall | fall F1 |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name in variants:
        runs = [r for r in results["runs"].values() if r["variant"] == name]
        if not runs:
            continue
        cells = [_mean_sd([r[k] for r in runs]) for k in
                 ("accuracy", "fall_precision", "fall_recall", "fall_f1")]  # fmt: skip
        lines.append(f"| {name} | {len(runs)} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
