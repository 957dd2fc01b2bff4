"""Real-footage benchmark, event-level through the daemon's own replay and detector.

    python -m experiments.real_benchmark --out benchmarks/results/real   # or: make real-bench

Folds: leave one subject out over GMDCSA24's four subjects (S1-S4), and ASSIST-IoT as a fifth fold
(a room, cameras and people none of the other folds saw; its 18 look-alike daily activities are
the false-alarm test that matters). Each fold trains on every other fold, keeps its last epoch (the
held-out clips are watched, never chosen by), exports ONNX, and replays every held-out clip through
`Pipeline.replay` with the daemon's default detection settings (a variant may set
`detection.confirm_s`); each clip's last frame is held 3 s more (the recordings stop right after
the fall, as a camera would not); `vtest.avi` (79 s of real pedestrians, never trained on) gives
false events per hour.

Columns, summed over the five folds and then mean ± sd over seeds:
- falls detected / total: a fall clip counts when a fall event is on at some time from the fall's
  start (minus 1 s) to the end of the clip (an alarm raised by the stumble just before the fall
  and still on during it counts); ASSIST-IoT's two views of one clip count once (either view);
- false events on daily-activity clips: clips (9 GMDCSA24 + 18 ASSIST-IoT) with at least one event
  (on a fall clip, an event over before the fall began is counted apart as `early_events`);
  ASSIST-IoT's 2 "lying still" clips are reported apart;
- false events per hour on vtest.avi (the five folds' models, each on the whole 79 s);
- clip AUC: each clip's highest window fall probability, falls vs daily activities.

The package: `items` (clips, folds, manifests), `variants` (the rows), `training` (fold models),
`scoring` (replay and figures), `tables` (results.md, tradeoff.png), `cli` (the command line),
`zoom` (the motion-zoom row's camera crop). Other experiment scripts import it as
`experiments.realbench`.

Results accumulate in `<out>/runs.json` (a run already there is not redone), so the benchmark can be
stopped and resumed; `<out>/results.md` is the table.
"""

from .items import (
    ASSIST,
    FOLDS,
    GMDCSA,
    GMDCSA_DESCENT_S,
    REVERSE,
    VTEST,
    VTEST_CALIBRATION_S,
    VTEST_NEGATIVE_PIECES,
    Item,
    camera_name,
    load_items,
    split_fold,
    views,
    vtest_negatives,
    write_manifest,
    zoomed_items,
)
from .scoring import (
    CALIBRATION_MARGIN,
    HOLD_END_S,
    redetect,
    replay_scores,
    run_fold_model,
    score_fold,
    site_thresholds,
    summarise,
)
from .tables import cross_source_table, results_md, row_family, runs_of, table, table_rows
from .training import add_fold_model_args, fold_dir, fold_model
from .variants import ENSEMBLE_ROW, HYPER_VOLUME_ROW, SHIPPED_ROW, VARIANTS, Variant

__all__ = [
    "ASSIST", "CALIBRATION_MARGIN", "ENSEMBLE_ROW", "FOLDS", "GMDCSA", "GMDCSA_DESCENT_S",
    "HOLD_END_S", "HYPER_VOLUME_ROW", "REVERSE", "SHIPPED_ROW", "VARIANTS", "VTEST",
    "VTEST_CALIBRATION_S", "VTEST_NEGATIVE_PIECES", "Item", "Variant", "add_fold_model_args",
    "camera_name", "cross_source_table", "fold_dir", "fold_model", "load_items", "redetect",
    "replay_scores", "results_md", "row_family", "run_fold_model", "runs_of", "score_fold",
    "site_thresholds", "split_fold", "summarise", "table", "table_rows", "views",
    "vtest_negatives", "write_manifest", "zoomed_items",
]  # fmt: skip
