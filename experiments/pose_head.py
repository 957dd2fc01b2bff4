"""#30 item 3: a small learned head on pose features against the hand pose rules, same folds.

    python -m experiments.pose_head --out benchmarks/results/real --seeds 0 1 2 [--threshold 0.5]
    python -m experiments.pose_head --final models/pose-head.json   # fitted on every clip

MoveNet runs once over every clip view at the person stage's rate (5 Hz, cached under
`<out>/cache`), the pose rules' tracker follows the people, and each tracked person at each tick
is a row of `edge_hf.core.posehead.FEATURES`. For each leave-one-out fold of `make real-bench`
(S1-S4, A) and the reverse fold (fitted on ASSIST-IoT, tested on GMDCSA24) a head is fitted
(`realbench.posehead.fold_head`: labels there) with each seed (its initial weights); each
held-out clip view then runs through `PoseFallRules(head=...)`: a fall clip counts when a person
is fallen at some tick from the fall's start minus 1 s, a daily-activity clip when a fall is
confirmed at all (either view of an ASSIST-IoT clip). vtest.avi from 40 s on gives events per hour
(the five fold heads); `../shared/data/negatives` the events of the five fold heads summed. The hand
rules run over the same tracked poses as the reference row (`make real-bench`'s "pose rules only"
row replays them through the daemon and its detector; the numbers can differ slightly).

Writes `<out>/pose_head.json` (one entry per `--threshold`) and prints a markdown table.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

from edge_hf.core.posefall import PoseFallRules
from edge_hf.core.posehead import MODES, PoseHead
from edge_hf.core.secondlook import LookSettings
from experiments.realbench import ASSIST, FOLDS, GMDCSA, REVERSE, VTEST, Item, load_items
from experiments.realbench.items import EARLY_S, VTEST_CALIBRATION_S
from experiments.realbench.posehead import ALL, Poses, fold_head, poses_of, view_keys

log = logging.getLogger("pose_head")

NEGATIVES = Path("../shared/data/negatives")
Rules = Callable[[], PoseFallRules]


def fallen_ticks(poses: Poses, rules: PoseFallRules) -> list[float]:
    """Ticks at which someone is fallen over one clip view."""
    return [t for t, _, found in poses if rules.update(t, found).fall]


def new_falls(poses: Poses, rules: PoseFallRules, t0: float) -> int:
    return sum(rules.update(t, found).new_fall and t >= t0 for t, _, found in poses)


def score(items: list[Item], poses: dict[tuple[str, int], Poses], make: Rules) -> dict[str, int]:
    """Falls detected / daily-activity clips with an event / lying-still clips with one."""
    hit: dict[str, tuple[str, bool]] = {}
    for key, it in view_keys(items):
        fallen = fallen_ticks(poses[key], make())
        if it.label == "fall":
            now = any(t >= (it.start_s or 0.0) - EARLY_S for t in fallen)
        else:
            now = bool(fallen)
        hit[it.clip_id] = (it.label, hit.get(it.clip_id, ("", False))[1] or now)
    out = {}
    for label, name in (("fall", "falls"), ("adl", "adl_clips"), ("lying_still", "still_clips")):
        got = [h for lab, h in hit.values() if lab == label]
        out[name], out[f"{name}_hit"] = len(got), sum(got)
    return out


def add(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    return {k: a.get(k, 0) + v for k, v in b.items()}


def evaluate(
    items: list[Item],
    poses: dict[tuple[str, int], Poses],
    vtest: Poses,
    negatives: dict[str, Poses],
    rules_for: Callable[[str], Rules],
) -> dict[str, Any]:
    """The figures of one set of rules (`rules_for(fold)` makes a fold's): all five folds summed,
    fold A, the reverse fold, vtest events after 40 s and events on the negatives."""
    total: dict[str, int] = {}
    vt = neg = 0
    fold_a: dict[str, int] = {}
    for fold in FOLDS:
        s = score([it for it in items if it.fold == fold], poses, rules_for(fold))
        total, fold_a = add(total, s), (s if fold == "A" else fold_a)
        vt += new_falls(vtest, rules_for(fold)(), VTEST_CALIBRATION_S)
        neg += sum(new_falls(p, rules_for(fold)(), 0.0) for p in negatives.values())
    hours = len(FOLDS) * (vtest[-1][0] - VTEST_CALIBRATION_S) / 3600
    reverse = score([it for it in items if it.fold != "A"], poses, rules_for(REVERSE))
    return {"all": {**total, "vtest_events": vt, "vtest_per_hour": vt / hours},
            "fold_a": fold_a, "reverse": reverse, "negatives_events": neg}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(
        prog="python -m experiments.pose_head", description=__doc__.split("\n")[0]
    )
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/real"))
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--threshold", type=float, default=0.5)
    p.add_argument("--mode", choices=MODES, default="decide", help="how the rules use the head")
    p.add_argument("--final", type=Path, help="fit one head (seed 0) on every clip, write it here")
    p.add_argument(
        "--second-look", action="store_true",
        help="--final: on poses through the person stage's second look (person.second_look)",
    )  # fmt: skip
    p.add_argument("--plot", type=Path, help="draw the head over six clips to this PNG")
    a = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    from tqdm import tqdm

    items = load_items(GMDCSA, ASSIST)
    if a.final:
        a.final.unlink(missing_ok=True)
        look = LookSettings() if a.second_look else None
        print(f"wrote {fold_head(items, ALL, 0, a.out, a.threshold, a.mode, a.final, look)}")
        return
    cache = a.out / "cache"
    poses = {key: poses_of(it.path, it.crop, cache)
             for key, it in tqdm(view_keys(items), desc="poses", unit="view")}  # fmt: skip
    vtest = poses_of(VTEST.resolve(), "", cache)
    with (NEGATIVES / "manifest.csv").open(newline="") as fh:
        negatives = {r["path"]: poses_of((NEGATIVES / r["path"]).resolve(), "", cache)
                     for r in csv.DictReader(fh)}  # fmt: skip

    if a.plot:
        plot(items, poses, a)
        return
    results: dict[str, Any] = {"threshold": a.threshold, "mode": a.mode, "head": {}}
    results["rules"] = evaluate(items, poses, vtest, negatives, lambda fold: PoseFallRules)
    for seed in a.seeds:

        def rules_for(fold: str, seed: int = seed) -> Rules:
            head = PoseHead.load(fold_head(items, fold, seed, a.out, a.threshold, a.mode))
            return lambda: PoseFallRules(head=head)

        results["head"][str(seed)] = evaluate(items, poses, vtest, negatives, rules_for)
        log.info("seed %d: %s", seed, json.dumps(results["head"][str(seed)]))
    path = a.out / "pose_head.json"
    runs = json.loads(path.read_text()) if path.exists() else {}
    runs[f"{a.mode}, threshold {a.threshold:g}"] = results
    path.write_text(json.dumps(runs, indent=1))
    print(table(runs))


PLOT_CLIPS = ("S3_Fall_01", "S1_Fall_13", "S4_ADL_19", "S3_ADL_15", "17_crawling",
              "11_sitting_laying_down_slowly")  # fmt: skip


def plot(items: list[Item], poses: dict[tuple[str, int], Poses], a: argparse.Namespace) -> None:
    """Per clip (first view), the held-out fold head's P(fallen) of each tracked person at each
    tick, the threshold, the ticks the hand rules read as down and the fall's labelled start."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    views = {it.clip_id: (key, it) for key, it in reversed(view_keys(items))}
    fig, axes = plt.subplots(len(PLOT_CLIPS), 1, figsize=(9, 2.0 * len(PLOT_CLIPS)), sharey=True)
    for ax, clip in zip(axes, PLOT_CLIPS, strict=True):
        key, it = views[clip]
        head = PoseHead.load(fold_head(items, it.fold, 0, a.out, a.threshold, a.mode))
        record: list[tuple[float, Any]] = []
        rules = PoseFallRules(record=record)
        down = [t for t, _, found in poses[key] if rules.update(t, found).down]
        ts = [t for t, _ in record]
        ax.scatter(ts, [float(head.prob(x)) for _, x in record], s=8, label="head P(fallen)")
        ax.axhline(head.threshold, color="grey", ls="--", lw=1, label=f"{a.mode} threshold")
        for t in down:
            ax.axvspan(t - 0.1, t + 0.1, color="tab:red", alpha=0.15, lw=0)
        if it.start_s is not None:
            ax.axvline(it.start_s, color="k", lw=1, label="fall starts (label)")
        ax.set_title(f"{clip} ({it.label}, fold {it.fold}; red: the rules read 'down')", fontsize=9)
        ax.set_ylim(-0.05, 1.05)
    axes[0].legend(fontsize=7, loc="upper left")
    axes[-1].set_xlabel("seconds")
    fig.tight_layout()
    fig.savefig(a.plot, dpi=90)
    print(f"wrote {a.plot}")


def _ms(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0]:.0f}"
    return f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}"


def _cells(runs: list[dict[str, Any]]) -> str:
    def col(part: str, k: str) -> str:
        return _ms([float(r[part][k]) for r in runs])

    return " | ".join([
        col("all", "falls_hit"), col("all", "adl_clips_hit"), col("all", "still_clips_hit"),
        col("all", "vtest_per_hour"), col("fold_a", "falls_hit"), col("fold_a", "adl_clips_hit"),
        col("reverse", "falls_hit"), col("reverse", "adl_clips_hit"),
        _ms([float(r["negatives_events"]) for r in runs]),
    ])  # fmt: skip


def table(runs: dict[str, Any]) -> str:
    """Markdown: the hand rules once, the head at each threshold run."""
    lines = [
        "| pose evidence alone (MoveNet 5 Hz, no CNN) | seeds | falls /16 | activity clips /27 "
        "| lying still /2 | vtest events/h | fold A falls /2 | fold A clips /18 "
        "| reverse falls /14 | reverse clips /9 | negatives events |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    first = next(iter(runs.values()))
    lines.append(
        f"| hand rules (torso, aspect, hips; sudden descent) | – | {_cells([first['rules']])} |"
    )
    for key, r in runs.items():
        heads = list(r["head"].values())
        veto = r.get("mode") == "veto"
        what = "hand rules vetoed by the learned head" if veto else "learned head"
        lines.append(f"| {what} (MLP 10-16-1), {key} | {len(heads)} | {_cells(heads)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
