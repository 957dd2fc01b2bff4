"""#40 item 2: which second-look settings let the pose rules catch the most falls, condition by
condition, without more events on daily life and the negatives? A quick screen on poses alone.

    python -m experiments.look_sweep --conditions far "as recorded" night \
        --look max_upscale=1.6,crop_min_score=0.2 --look max_upscale=1.28,crop_min_score=0.15

Every clip view of the conditions benchmark (rendered by `make conditions-bench`; rendered here
when missing) and the negatives (vtest.avi from 40 s on, ../shared/data/negatives) go through
MoveNet and a `SecondLook` with each `--look` (`edge_hf.core.secondlook.LookSettings` fields; none
named: the defaults), cached under `<out>/cache` like every pose run of the benchmark. Then the
pose rules with the held-out fold's pose head as a veto (`realbench.posehead.fold_head`, fitted
once on the second look's poses with the *current* default settings, seed `--seed`) follow the
people, as the person stage does. No classifier: this is the pose stage's share of the shipped
`combined` decision (as recorded it caught 15 of 16 falls alone where the daemon's replay with the
classifier caught 16), a screen to choose settings before the event-level rows of
`python -m experiments.real_benchmark --conditions ... --second-look`. A fall clip counts when a
fall is confirmed from its labelled start minus 1 s (either view), a daily-activity or
lying-still clip when one is confirmed at all; on the negatives the events of all five fold heads
are summed, and the people found per tick reported (more: false people, and more squares).
Prints a markdown table and writes it to `<out>/look_sweep.md`.
"""

from __future__ import annotations

import argparse
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from edge_hf.core.posefall import PoseFallRules
from edge_hf.core.posehead import PoseHead
from edge_hf.core.secondlook import LookSettings
from experiments.realbench import ASSIST, FOLDS, GMDCSA, VTEST, load_items
from experiments.realbench.conditions import (
    AS_RECORDED,
    NEGATIVES,
    negative_items,
    render,
)
from experiments.realbench.items import EARLY_S, VTEST_CALIBRATION_S, Item, views
from experiments.realbench.posehead import fold_head, poses_of
from experiments.realbench.variants import SHIPPED_RECIPE, VARIANTS


def look_of(spec: str) -> LookSettings:
    """`LookSettings` from 'name=value,...' (the defaults for the rest)."""
    kinds = {f.name: f.type for f in fields(LookSettings)}
    values: dict[str, Any] = {}
    for part in filter(None, spec.split(",")):
        name, _, value = part.partition("=")
        if name not in kinds:
            raise SystemExit(f"--look {spec!r}: no setting {name!r}; known: {sorted(kinds)}")
        try:
            values[name] = int(value) if kinds[name] in (int, "int") else float(value)
        except ValueError:
            raise SystemExit(f"--look {spec!r}: {name} = {value!r} is not a number") from None
    return LookSettings(**values)


def _seen_as(it: Item, condition: str, out: Path) -> Item:
    return it if condition == AS_RECORDED else render(it, condition, out / "conditions")


def first_fall(poses: list[Any], head: PoseHead, after: float = 0.0) -> float | None:
    """When the rules with `head` first confirm a fall at or after `after` (None: never)."""
    rules = PoseFallRules(head=head)
    for t, _, found in poses:
        if rules.update(t, found).new_fall and t >= after:
            return float(t)
    return None


def clips_row(
    condition: str, look: LookSettings, items: list[Item], heads: dict[str, PoseHead], out: Path
) -> dict[str, Any]:
    """Falls caught, daily-activity clips with an event, and the falls missed, per clip."""
    caught: dict[str, bool] = {}
    label: dict[str, str] = {}
    for it, _, _ in views(items):
        seen = _seen_as(it, condition, out)
        at = first_fall(poses_of(seen.path, seen.crop, out / "cache", look), heads[it.fold])
        ok = at is not None and (it.label != "fall" or at >= (it.start_s or 0.0) - EARLY_S)
        caught[it.clip_id] = caught.get(it.clip_id, False) or ok
        label[it.clip_id] = it.label
    falls = [c for c in caught if label[c] == "fall"]
    rest = [c for c in caught if label[c] != "fall"]
    return {
        "falls": sum(caught[c] for c in falls), "of_falls": len(falls),
        "false": sum(caught[c] for c in rest), "of_rest": len(rest),
        "missed": sorted(c for c in falls if not caught[c]),
        "alarmed": sorted(c for c in rest if caught[c]),
    }  # fmt: skip


def negatives_row(
    condition: str, look: LookSettings, heads: dict[str, PoseHead], out: Path
) -> dict[str, Any]:
    """Events on the negatives (the five fold heads summed) and people found per tick."""
    events, people, ticks = 0, 0, 0
    for it in negative_items(VTEST, NEGATIVES):
        seen = _seen_as(it, condition, out)
        poses = poses_of(seen.path, seen.crop, out / "cache", look)
        after = VTEST_CALIBRATION_S if it.clip_id == "vtest" else 0.0
        events += sum(first_fall(poses, head, after) is not None for head in heads.values())
        people += sum(len(found) for _, _, found in poses)
        ticks += len(poses)
    return {"negative_events": events, "people_per_tick": round(people / max(ticks, 1), 2)}


def main() -> None:
    p = argparse.ArgumentParser(prog="python -m experiments.look_sweep", description=__doc__)
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/real"))
    p.add_argument("--conditions", nargs="+", default=[AS_RECORDED, "far"])
    p.add_argument("--look", action="append", default=[], help="LookSettings fields, a=1,b=2")
    p.add_argument("--seed", type=int, default=0, help="the fold heads' seed")
    a = p.parse_args()
    items = load_items(GMDCSA, ASSIST)
    shipped = VARIANTS[SHIPPED_RECIPE]
    heads = {
        fold: PoseHead.load(
            fold_head(
                items,
                fold,
                a.seed,
                a.out,
                shipped.pose_head,
                shipped.pose_head_mode,
                look=LookSettings(),
            )
        )
        for fold in FOLDS
    }
    default = asdict(LookSettings())
    lines = [
        "| condition | second look (settings other than the defaults) | falls caught | "
        "daily-activity and lying-still clips with an event | events on the negatives | "
        "people per tick on the negatives | falls missed |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for condition in a.conditions:
        for spec in a.look or [""]:
            look = look_of(spec)
            changed = {k: x for k, x in asdict(look).items() if x != default[k]}
            r = clips_row(condition, look, items, heads, a.out)
            n = negatives_row(condition, look, heads, a.out)
            lines.append(
                f"| {condition} | {changed or 'defaults'} | {r['falls']} / {r['of_falls']} | "
                f"{r['false']} / {r['of_rest']} | {n['negative_events']} | "
                f"{n['people_per_tick']} | {', '.join(r['missed']) or '-'} |"
            )
            print(lines[-1], flush=True)
    md = "\n".join(lines) + "\n"
    (a.out / "look_sweep.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
