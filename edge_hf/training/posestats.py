"""What pose detections look like in numbers, to hold generated ones (`posegen.observe`) against
MoveNet's on real clips: how often someone is found, how many keypoints are seen and how sure,
how much keypoints jitter when the person is still, box shapes and pads, left/right swaps.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from edge_hf.core.pose import MIN_KEYPOINT_SCORE, Person

Ticks = Sequence[Sequence[Person]]
PAIRS = ((5, 6), (9, 10), (11, 12), (13, 14), (15, 16))  # left/right pairs checked for swaps
STILL_MOVE, STILL_GROW = 0.03, 0.05  # a still tick: box centre within 3 % of its height, ...


def stats(ticks: Ticks, size: tuple[int, int] | None = None) -> dict[str, float]:
    """`stats_many` of one clip's ticks (each the people found then); `size` (w, h) of its
    frame adds the box height as a share of the frame's."""
    return stats_many([(ticks, size)])


def stats_many(clips: Iterable[tuple[Ticks, tuple[int, int] | None]]) -> dict[str, float]:
    """The distributions compared, pooled over clips ((ticks, frame size or None) each); the
    best-scoring person of a tick stands for it."""
    r: dict[str, list[float]] = {k: [] for k in (
        "found", "multi", "score", "kp_score", "seen", "aspect", "box_frac", "pad_x", "pad_y",
        "outside", "jitter", "swap", "lost_run", "seen_face", "seen_arms", "box_long",
        "seen_legs")}  # fmt: skip
    for ticks, size in clips:
        _clip(ticks, size, r)
    a = {k: np.asarray(v, float) for k, v in r.items()}

    def pct(k: str, q: float) -> float:
        return float(np.percentile(a[k], q)) if len(a[k]) else float("nan")

    def mean(k: str) -> float:
        return float(a[k].mean()) if len(a[k]) else float("nan")

    return {
        "ticks": float(len(a["found"])),
        "found": mean("found"),
        "two_or_more": mean("multi"),
        "lost_run_mean": mean("lost_run"),
        "person_score_p10": pct("score", 10),
        "person_score_p50": pct("score", 50),
        "person_score_p90": pct("score", 90),
        "kp_score_p10": pct("kp_score", 10),
        "kp_score_p50": pct("kp_score", 50),
        "kp_score_p90": pct("kp_score", 90),
        "kp_seen": mean("seen"),
        "kp_seen_face": mean("seen_face"),
        "kp_seen_arms": mean("seen_arms"),
        "kp_seen_legs": mean("seen_legs"),
        "jitter_still_p50": pct("jitter", 50),
        "jitter_still_p90": pct("jitter", 90),
        "still_pairs": float(len(a["jitter"])),
        "aspect_p10": pct("aspect", 10),
        "aspect_p50": pct("aspect", 50),
        "aspect_p90": pct("aspect", 90),
        "box_height_frac_p50": pct("box_frac", 50),
        "box_long_frac_p50": pct("box_long", 50),
        "pad_x": pct("pad_x", 50),
        "pad_y": pct("pad_y", 50),
        "kp_outside_box": mean("outside"),
        "swap_rate": mean("swap"),
    }


def _clip(ticks: Ticks, size: tuple[int, int] | None, r: dict[str, list[float]]) -> None:
    prev: Person | None = None
    run = 0
    for people in ticks:
        r["found"].append(float(len(people) > 0))
        r["multi"].append(float(len(people) > 1))
        if not people:
            run, prev = run + 1, None
            continue
        if run:
            r["lost_run"].append(run)
            run = 0
        p = max(people, key=lambda q: q.score)
        kp = np.asarray(p.keypoints, float)
        seen = kp[:, 2] >= MIN_KEYPOINT_SCORE
        x0, y0, x1, y1 = p.box
        bw, bh = max(x1 - x0, 1e-6), max(y1 - y0, 1e-6)
        r["score"].append(p.score)
        r["kp_score"].extend(kp[:, 2])
        r["seen"].append(seen.mean())
        r["seen_face"].append(seen[:5].mean())
        r["seen_arms"].append(seen[5:11].mean())
        r["seen_legs"].append(seen[11:].mean())
        r["aspect"].append(bw / bh)
        if size is not None:
            r["box_frac"].append(bh / size[1])
            r["box_long"].append(max(bw, bh) / max(size))
        r["pad_x"].append((kp[:, 0].min() - x0 + x1 - kp[:, 0].max()) / 2 / bw)
        r["pad_y"].append((kp[:, 1].min() - y0 + y1 - kp[:, 1].max()) / 2 / bh)
        out = (kp[:, 0] < x0) | (kp[:, 0] > x1) | (kp[:, 1] < y0) | (kp[:, 1] > y1)
        r["outside"].append(out.mean())
        if prev is not None:
            _pair(prev, p, r)
        prev = p
    if run:
        r["lost_run"].append(run)


def _pair(a: Person, b: Person, r: dict[str, list[float]]) -> None:
    """Jitter and swaps between consecutive ticks of a person: jitter where the box barely moved
    (keypoint moves as shares of box height), a swap where a left/right pair is nearer crossed."""
    ka, kb = np.asarray(a.keypoints, float), np.asarray(b.keypoints, float)
    bh = max(b.box[3] - b.box[1], 1e-6)
    ca = np.array([(a.box[0] + a.box[2]) / 2, (a.box[1] + a.box[3]) / 2])
    cb = np.array([(b.box[0] + b.box[2]) / 2, (b.box[1] + b.box[3]) / 2])
    both = (ka[:, 2] >= MIN_KEYPOINT_SCORE) & (kb[:, 2] >= MIN_KEYPOINT_SCORE)
    moved = np.linalg.norm(kb[:, :2] - ka[:, :2], axis=1) / bh
    still = (np.linalg.norm(cb - ca) / bh < STILL_MOVE
             and abs(bh - (a.box[3] - a.box[1])) / bh < STILL_GROW)  # fmt: skip
    if still:
        r["jitter"].extend(moved[both])
    for i, j in PAIRS:
        if not (both[i] and both[j]):
            continue
        if np.linalg.norm(ka[i, :2] - ka[j, :2]) / bh <= 0.08:
            continue  # too close together to tell
        straight = np.linalg.norm(kb[i, :2] - ka[i, :2]) + np.linalg.norm(kb[j, :2] - ka[j, :2])
        crossed = np.linalg.norm(kb[i, :2] - ka[j, :2]) + np.linalg.norm(kb[j, :2] - ka[i, :2])
        r["swap"].append(float(crossed < 0.5 * straight))
