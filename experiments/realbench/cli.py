"""`python -m experiments.real_benchmark` (make real-bench): run rows and seeds, resumable."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path
from typing import Any

import numpy as np

from edge_hf.core.errors import UserError

from . import conditions
from .conditions import NEGATIVES
from .items import ASSIST, FOLDS, GMDCSA, REVERSE, VTEST, load_items
from .scoring import replay_variant_seed, run_shipped, run_variant_seed
from .tables import plot_tradeoff, results_md, table, table_rows
from .training import train_final
from .variants import SHIPPED_ROW, VARIANTS


def main() -> None:
    np.seterr(all="ignore")
    p = argparse.ArgumentParser(
        prog="python -m experiments.real_benchmark",
        description=sys.modules[__package__].__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    p.add_argument("--gmdcsa", default=str(GMDCSA))
    p.add_argument("--assist", default=str(ASSIST))
    p.add_argument("--vtest", default=str(VTEST))
    p.add_argument("--out", default="benchmarks/results/real")
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), help="rows to run, in order")
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--shipped", default="",
                   help="also replay this model as the 'before' row (empty: skip)")  # fmt: skip
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--samples-per-clip", type=int, default=6)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--camera-aug", type=float, default=0.3)
    p.add_argument(
        "--rescore", action="store_true", help="replay every run's saved fold models again"
    )
    p.add_argument(
        "--reverse", action="store_true",
        help="run the reverse cross-source fold of --variants (train ASSIST-IoT + generated "
        "clips, test GMDCSA24) instead of the five leave-one-out folds",
    )  # fmt: skip
    p.add_argument(
        "--conditions", nargs="*", metavar="CONDITION",
        help="run the conditions benchmark (#40: far, night, partial, ...; none named: all) "
        "with the shipped recipe instead of rows; writes <out>/conditions.{json,md,png}",
    )  # fmt: skip
    p.add_argument("--negatives", default=str(NEGATIVES), help="clips where nobody falls")
    p.add_argument(
        "--person-side", type=int, default=0,
        help="--conditions: MoveNet's input side (person.side; 0: the shipped 256), its own rows",
    )  # fmt: skip
    p.add_argument(
        "--second-look", action="store_true",
        help="--conditions: with the person stage's second look (person.second_look; its own "
        "rows; fold heads fitted on its poses)",
    )  # fmt: skip
    p.add_argument(
        "--sequence", default="",
        help="--conditions: with this pose-sequence model in the person stage (person.sequence, "
        "mode join; '{seed}' in the path is the seed: e.g. the generated-only models of "
        "experiments/pose_seq.py, which saw no real clip); its own rows",
    )  # fmt: skip
    p.add_argument(
        "--traces", action="store_true",
        help="--conditions: keep what each camera's detector was fed under <out>/work/traces "
        "(rows already counted are run again once to keep theirs), for experiments.gate_sweep",
    )  # fmt: skip
    p.add_argument(
        "--recipe", default="",
        help="--conditions: replay this row's recipe instead of the shipped one (e.g. "
        "variants.CONDITION_AUG_RECIPE); its own rows",
    )  # fmt: skip
    p.add_argument("--final", metavar="VARIANT", help="train this row's recipe on all clips")
    p.add_argument("--runs-file", help="results JSON (default <out>/runs.json), e.g. per process")
    p.add_argument("--export", default="models/fall-real.onnx", help="where --final writes")
    a = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("edge_hf.daemon.events").setLevel(logging.WARNING)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    items = load_items(Path(a.gmdcsa), Path(a.assist))
    runs_file = Path(a.runs_file) if a.runs_file else out / "runs.json"
    runs: dict[str, Any] = json.loads(runs_file.read_text()) if runs_file.exists() else {}
    recipe = {k: getattr(a, k) for k in ("epochs", "samples_per_clip", "lr", "camera_aug")}

    def save(key: str, result: dict[str, Any]) -> None:
        runs[key] = result
        runs_file.write_text(json.dumps(runs, indent=1))
        rows = table_rows(runs)
        (out / "results.md").write_text(results_md(runs, rows))
        plot_tradeoff(runs, rows, out / "tradeoff.png")
        print(table(runs, rows), flush=True)

    if a.recipe and a.recipe not in VARIANTS:
        raise SystemExit(f"--recipe {a.recipe!r}: not a row of realbench.variants.VARIANTS")
    if a.conditions is not None:
        try:
            conditions.main(a, items)
        except UserError as exc:  # e.g. --person-side that a fold's pose head was not fitted at
            raise SystemExit(f"real_benchmark --conditions: {exc}") from None
        return
    if a.final:
        print(f"wrote {train_final(a.final, items, a, Path(a.export))}")
        return
    if a.rescore:
        for key, r in list(runs.items()):
            if r["variant"] == SHIPPED_ROW:
                fresh = run_shipped(Path(a.shipped), items, a)
            else:
                folds = (REVERSE,) if r.get("folds") == "reverse" else FOLDS
                fresh = replay_variant_seed(r["variant"], r["seed"], items, a, folds)
            save(key, {**r, **fresh})
    if a.shipped and SHIPPED_ROW not in runs and Path(a.shipped).exists():
        save(SHIPPED_ROW, {"variant": SHIPPED_ROW, **run_shipped(Path(a.shipped), items, a)})
    for seed in a.seeds:  # seed-major: every row gets a first seed before any gets a third
        for name in a.variants:
            key = f"{name} | seed {seed}" + (" | reverse" if a.reverse else "")
            if key in runs:
                continue
            v = VARIANTS[name]
            result = run_variant_seed(name, v, seed, items, a, (REVERSE,) if a.reverse else FOLDS)
            own = v.own_recipe(a)
            save(key, {"variant": name, "seed": seed, "recipe": {**recipe, **own},
                       **({"folds": "reverse"} if a.reverse else {}), **result})  # fmt: skip
