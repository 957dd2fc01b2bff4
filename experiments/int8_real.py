"""int8 vs fp32 on real footage, held out: the benchmark's own fold models, quantised.

    python -m experiments.int8_real --out /path/to/real-bench-out [--row ROW] [--seed 0]

For each fold of `make real-bench`'s row (default: the shipped recipe, three-state 160 px at
0.5 / confirm 2 s), the fold's exported fp32 model is quantised with `edge-hf export --int8`'s code,
calibrated on that fold's own training clips (never the held-out ones), and replayed over the
held-out clips and vtest.avi exactly as the benchmark replays the fp32 model. Prints both rows.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from edge_hf.training.quantize import calibration_windows, quantize_int8
from experiments import realbench as rb


def main() -> None:
    p = argparse.ArgumentParser(
        prog="python -m experiments.int8_real",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    p.add_argument("--out", required=True, help="the real benchmark's --out (fold models, runs)")
    p.add_argument("--runs-file", help="its runs JSON (default <out>/runs.json)")
    p.add_argument("--row", default="lite0 T=3 ImageNet falling+down 160px, confirm 2 s")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--windows", type=int, default=200)
    a = p.parse_args()
    out = Path(a.out)
    variant = rb.VARIANTS[a.row]
    items = rb.load_items(rb.GMDCSA, rb.ASSIST)
    clips, vtest_events, vtest_hours, agreement = [], 0, 0.0, []
    for fold in rb.FOLDS:
        rundir = rb.fold_dir(out, a.row, a.seed, fold)
        fp32 = rundir / "model.onnx"
        int8 = rundir / "model-int8.onnx"
        if not int8.exists():
            windows = calibration_windows(fp32, rundir / "train.csv", a.windows)
            stats = quantize_int8(fp32, int8, windows, f" from fold {fold}'s training clips")
            agreement.append(stats["argmax_agreement"])
        fold_items = [it for it in items if it.fold == fold]
        got, ev, hours = rb.run_fold_model(
            int8, fold_items, rb.VTEST, rundir / "int8-state", variant.threshold,
            variant.detection(), variant.calibrated, variant.vtest_negatives,
        )  # fmt: skip
        clips += got
        vtest_events += ev
        vtest_hours += hours
    int8_row = rb.summarise(clips, vtest_events, vtest_hours)
    runs = json.loads(Path(a.runs_file or out / "runs.json").read_text())
    fp32_row = runs[f"{a.row} | seed {a.seed}"]
    keys = ("falls_detected", "falls", "adl_clips_with_event", "adl_clips",
            "vtest_false_per_hour", "auc", "delay_s_median")  # fmt: skip
    print(json.dumps({
        "row": a.row, "seed": a.seed, "calibration_agreement": agreement,
        "fp32": {k: fp32_row.get(k) for k in keys}, "int8": {k: int8_row.get(k) for k in keys},
    }))  # fmt: skip


if __name__ == "__main__":
    main()
