"""#40 item 2: does the person stage see the person lying there? The pose model alone against the
track-guided second look (`edge_hf.core.secondlook.SecondLook`), per condition of the conditions
benchmark.

    python -m experiments.look_bench --out benchmarks/results/real

For every fall clip view under each condition (rendered by `make conditions-bench`, or here when
missing) and the negatives, at the person stage's 5 Hz: the share of *lying ticks* (from the end
of the descent, as the pose head's labels take it, to the clip's end) on which anyone is found;
on the negatives (vtest.avi and ../shared/data/negatives, people walking, nobody falls) the
people found per tick; and the cost, pose-model runs per tick and ms per camera-second. Writes
`<out>/look.json` and `<out>/look.md`.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from edge_hf.core.clippeople import clip_people
from edge_hf.core.pose import POSE_MODEL, POSE_RATE_HZ, POSE_SIDE, PoseEstimator
from edge_hf.core.secondlook import LookSettings
from edge_hf.training.data import parse_crop
from experiments.realbench import load_items
from experiments.realbench.conditions import (
    AS_RECORDED,
    CONDITIONS,
    NEGATIVES,
    negative_items,
    render,
)
from experiments.realbench.items import ASSIST, GMDCSA, VTEST, Item, views
from experiments.realbench.posehead import fallen_from

DEFAULT_CONDITIONS = (AS_RECORDED, "far", "night", "partial", "occluder", "second person",
                      "portrait", "elevated")  # fmt: skip


def run(
    it: Item, est: PoseEstimator, look: LookSettings | None, cache: Path
) -> tuple[list[tuple[float, int]], float, int]:
    """(tick, people found) of one clip view, seconds spent (0 when cached) and ticks."""
    t0 = time.perf_counter()
    calls = 0
    inner = est.people_batch

    def counted(frames, min_score=0.2):  # type: ignore[no-untyped-def]
        nonlocal calls
        calls += len(frames)
        return inner(frames, min_score)

    est.people_batch = counted  # type: ignore[method-assign]
    try:
        poses = clip_people(it.path, parse_crop(it.crop), est, POSE_RATE_HZ, cache, look)
    finally:
        del est.people_batch
    spent = time.perf_counter() - t0 if calls else 0.0
    return [(t, len(people)) for t, _, people in poses], spent, calls


def main() -> None:
    p = argparse.ArgumentParser(
        prog="python -m experiments.look_bench",
        description=__doc__,
        formatter_class=argparse.RawTextHelpFormatter,
    )
    p.add_argument("--out", default="benchmarks/results/real")
    p.add_argument("--conditions", nargs="+", default=list(DEFAULT_CONDITIONS))
    p.add_argument("--side", type=int, default=POSE_SIDE, help="the pose model's input side")
    p.add_argument("--small-px", type=int, help="LookSettings.small_px (default: its own)")
    p.add_argument("--name", default="look", help="writes <out>/<name>.json and .md")
    a = p.parse_args()
    out = Path(a.out)
    cache = out / "cache" / "look"
    est = PoseEstimator(POSE_MODEL, side=a.side)
    items = load_items(GMDCSA, ASSIST)
    falls = [it for it, _, _ in views(items) if it.label == "fall"]
    negatives = negative_items(VTEST, NEGATIVES)
    settings = LookSettings() if a.small_px is None else LookSettings(small_px=a.small_px)
    ways: dict[str, LookSettings | None] = {"pose model alone": None, "second look": settings}
    result: dict[str, Any] = {"side": a.side, "look": asdict(settings), "rows": []}
    for name in a.conditions:
        fall_views = (
            falls if name == AS_RECORDED else [render(it, name, out / "conditions") for it in falls]
        )
        negs = negatives
        if name != AS_RECORDED:
            negs = (
                [render(it, name, out / "conditions") for it in negatives]
                if CONDITIONS[name].negatives
                else []
            )
        for way, look in ways.items():
            lying = found = ticks = calls = 0
            spent, neg_people, neg_ticks = 0.0, 0, 0
            for it, orig in zip(fall_views, falls, strict=True):
                since = fallen_from(orig)
                got, s, c = run(it, est, look, cache)
                spent, calls, ticks = spent + s, calls + c, ticks + len(got)
                for t, n in got:
                    if since is not None and t >= since:
                        lying += 1
                        found += n > 0
            for it in negs:
                got, s, c = run(it, est, look, cache)
                spent, calls, ticks = spent + s, calls + c, ticks + len(got)
                neg_ticks += len(got)
                neg_people += sum(n for _, n in got)
            row = {
                "condition": name, "way": way, "lying_ticks": lying, "lying_found": found,
                "negative_people_per_tick": neg_people / neg_ticks if neg_ticks else None,
                "runs_per_tick": calls / ticks if calls else None,
                "ms_per_camera_s": 1000 * spent / (ticks / POSE_RATE_HZ) if calls else None,
            }  # fmt: skip
            result["rows"].append(row)
            print(json.dumps(row), flush=True)
    (out / f"{a.name}.json").write_text(json.dumps(result, indent=1))
    (out / f"{a.name}.md").write_text(markdown(result))
    print(markdown(result))


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "| condition | way | lying ticks with someone found | people per tick on the negatives "
        "| pose-model runs per tick | ms per camera-second |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for r in result["rows"]:
        share = r["lying_found"] / r["lying_ticks"] if r["lying_ticks"] else float("nan")
        neg = r["negative_people_per_tick"]
        runs, ms = r["runs_per_tick"], r["ms_per_camera_s"]
        lines.append(
            f"| {r['condition']} | {r['way']} | "
            f"{share:.0%} ({r['lying_found']}/{r['lying_ticks']}) "
            f"| {'-' if neg is None else f'{neg:.2f}'} | {'-' if runs is None else f'{runs:.2f}'} "
            f"| {'-' if ms is None else f'{ms:.0f}'} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
