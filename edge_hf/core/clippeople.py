"""The people a video file shows, tick by tick, as the person stage would see them (`clip_people`):
the frame nearest each tick of the pose rate, prepared by `pose_frame`, through the pose model
(and a second look), cached on disk by file, crop, rate, model, side and settings. Training,
the benchmarks and the tests read real clips through it; the daemon runs the same steps live.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from edge_hf.core.pose import (
    GREY_LEVELS,
    GREY_SHARE,
    NIGHT_CLAHE,
    NIGHT_DENOISE,
    Person,
    PoseEstimator,
    pose_frame,
)
from edge_hf.core.secondlook import LookSettings, SecondLook, look_key, view_frame
from edge_hf.core.video import Crop, sample_file


def person_row(p: Person) -> list[Any]:
    # (boxes at full precision: person-centred crops cut from cached and live boxes must agree)
    return [list(p.box), p.score, np.round(p.keypoints.astype(np.float64), 3).tolist()]


def person_of_row(row: list[Any]) -> Person:
    box, score, kp = row
    return Person(tuple(box), float(score), np.asarray(kp, np.float32))


def clip_people(
    path: Path,
    crop: Crop | None,
    estimator: PoseEstimator,
    rate_hz: float,
    cache_dir: Path | None = None,
    look: LookSettings | None = None,
) -> list[tuple[float, tuple[int, int], list[Person]]]:
    """(tick, pose frame (H, W), people in its pixels) of a video file at `rate_hz`: the frame
    nearest each tick (the daemon's sampling rule) prepared by `pose_frame`, as the person stage
    would see it (with `look`, through a `SecondLook`); cached in `cache_dir` (keyed by the file,
    crop, rate, pose model, side and look)."""
    cached = None
    if cache_dir is not None:
        st = path.stat()
        key = (
            f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{crop}|{rate_hz:g}|"
            f"{estimator.path.resolve()}|{estimator.path.stat().st_size}|{estimator.side}"
            + (f"|{look_key(look)}" if look is not None else "")
            + f"|grey-clahe-{GREY_LEVELS}-{GREY_SHARE:g}"  # (how grey frames are prepared)
            + f"|nlm-{NIGHT_DENOISE}-clahe-{NIGHT_CLAHE}"
        )
        cached = cache_dir / f"people-{hashlib.sha1(key.encode()).hexdigest()[:20]}.json"
        if cached.exists():
            return [
                (t, (hw[0], hw[1]), [person_of_row(r) for r in rows])
                for t, hw, rows in json.loads(cached.read_text())
            ]
    second = SecondLook(estimator, look) if look is not None else None
    out: list[tuple[float, tuple[int, int], list[Person]]] = []
    for t, frame in sample_file(path, 1 / rate_hz):
        rgb = pose_frame(frame, crop, estimator.side)
        if second is None:
            people = estimator.people(rgb)
        else:
            people = second.people(t, rgb, view_frame(frame, crop, estimator.side))
        out.append((t, (rgb.shape[0], rgb.shape[1]), people))
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        rows = [[t, list(hw), [person_row(p) for p in people]] for t, hw, people in out]
        cached.write_text(json.dumps(rows))
    return out
