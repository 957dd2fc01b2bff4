"""`edge-hf calibrate`: a per-camera threshold under which normal activity at the site raises
no fall event, with a stated margin.

The camera's own pipeline (source, crop, model, detection settings) runs over a recording of
normal activity at the site (or the live camera for some minutes). For `k_of_n` smoothing an event
starts when k of the last n window scores reach the threshold, so the quietest threshold that
stays silent is just above the highest k-th largest score of any n consecutive windows (`median`:
the highest median of n). Adding the margin to that gives `cameras[].threshold`.
"""

from __future__ import annotations

import logging
import re
import shutil
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edge_hf.core.errors import UserError
from edge_hf.core.video import VideoError
from edge_hf.daemon.app import build_pipeline
from edge_hf.daemon.config import Config, DetectionConfig, ensure_state_dir, load_config
from edge_hf.daemon.sinks import RecordingSink
from edge_hf.daemon.sources import SourceError

log = logging.getLogger(__name__)
MAX_THRESHOLD = 0.99


@dataclass(frozen=True)
class Calibration:
    """The score distribution of normal activity and the threshold it implies."""

    camera: str
    windows: int
    p50: float
    p90: float
    p99: float
    max: float
    trigger: float  # the smoothed score normal activity reached: any threshold above stays quiet
    margin: float
    threshold: float
    events_at_current: int  # fall events the current threshold raised on this recording
    current: float  # the threshold the camera runs at now (its own, the config's or the model's)

    def report(self) -> str:
        return (
            f"{self.camera}: {self.windows} windows of normal activity; fall probability p50 "
            f"{self.p50:.3f}, p90 {self.p90:.3f}, p99 {self.p99:.3f}, max {self.max:.3f}; "
            f"smoothed peak {self.trigger:.3f}; threshold {self.current:g} raised "
            f"{self.events_at_current} event(s); suggested threshold {self.threshold:.3f} "
            f"(peak + margin {self.margin:g})" + self._warning()
        )

    def _warning(self) -> str:
        if self.trigger + self.margin <= MAX_THRESHOLD - 0.05:
            return ""
        return (
            f". WARNING: normal activity here scores like a fall ({self.trigger:.3f}): at "
            f"{self.threshold:.3f} falls that score lower are missed; check the camera's view "
            "and crop, or use a model trained for such scenes"
        )


def smoothed_peak(scores: Sequence[float], detection: DetectionConfig) -> float:
    """The highest value the detector's smoothing reaches over `scores` (0 if too few)."""
    n = detection.n
    if len(scores) < (n if detection.smoothing == "median" else detection.k):
        return 0.0
    peak = 0.0
    for i in range(len(scores)):
        recent = sorted(scores[max(0, i - n + 1) : i + 1], reverse=True)
        if detection.smoothing == "median":
            value = float(np.median(recent)) if len(recent) == n else 0.0
        else:
            value = recent[detection.k - 1] if len(recent) >= detection.k else 0.0
        peak = max(peak, value)
    return peak


def _one_camera(cfg: Config, camera: str, video: Path | None) -> Config:
    cams = [c for c in cfg.cameras if c.name == camera]
    if not cams:
        names = ", ".join(c.name for c in cfg.cameras)
        raise UserError(f"--camera {camera!r}: no such camera in the config (cameras: {names})")
    cam = cams[0].model_copy(update={"enabled": True})
    if video is not None:
        if not video.is_file():
            raise UserError(f"--video {video}: no such file")
        cam = cam.model_copy(update={"source": str(video), "loop": False})
    return cfg.model_copy(update={"cameras": [cam]})


def calibrate(
    cfg: Config, camera: str, video: Path | None, minutes: float, margin: float
) -> Calibration:
    """Run the camera's pipeline over normal activity and derive its threshold."""
    if not 0.0 <= margin < 0.5:
        raise UserError(f"--margin {margin:g}: a probability margin in [0, 0.5)")
    one = _one_camera(cfg, camera, video)
    ensure_state_dir(one)
    sink = RecordingSink()
    pipeline = build_pipeline(one, sink, "calibrate", score_history=None)
    if video is not None:
        try:
            pipeline.replay()
        except (SourceError, VideoError) as exc:
            raise UserError(f"cameras.{camera}: {exc}") from None
    else:
        if not 0 < minutes <= 24 * 60:
            raise UserError(f"--minutes {minutes:g}: give 0 < minutes <= 1440 (or --video FILE)")
        timer = threading.Timer(minutes * 60, pipeline.stop.set)
        timer.start()
        try:
            pipeline.start()
            pipeline.run(drain_s=2.0)
        finally:
            timer.cancel()
    scores = list(pipeline.cameras[0].scores)
    detection = one.detection_for(one.cameras[0])
    if len(scores) < detection.n:
        raise UserError(f"{camera}: only {len(scores)} windows came out; give a longer recording")
    trigger = smoothed_peak(scores, detection)
    q = np.percentile(scores, [50, 90, 99])
    return Calibration(
        camera=camera,
        windows=len(scores),
        p50=float(q[0]),
        p90=float(q[1]),
        p99=float(q[2]),
        max=float(max(scores)),
        trigger=trigger,
        margin=margin,
        threshold=min(MAX_THRESHOLD, trigger + margin),
        events_at_current=sum(e.type == "start" for e in sink.events),
        current=pipeline.cameras[0].detector.threshold,
    )


def write_threshold(path: Path, camera: str, threshold: float) -> Path:
    """Set `threshold:` in the camera's block of a block-style YAML list; keeps a `.bak` copy.

    Only the one line changes (comments and layout stay); a camera written in flow style
    (`- {name: a, ...}`) is refused with the line to add by hand.
    """
    lines = path.read_text().splitlines(keepends=True)
    name_re = re.compile(rf"^(\s*)(-\s+)?name:\s*['\"]?{re.escape(camera)}['\"]?\s*(#.*)?$")
    for i, line in enumerate(lines):
        m = name_re.match(line.rstrip("\n"))
        if not m:
            continue
        indent = len(m.group(1)) + (len(m.group(2)) if m.group(2) else 0)
        end = i + 1
        while end < len(lines) and (
            not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) >= indent
        ):
            end += 1
        new = f"{' ' * indent}threshold: {threshold:.3f}\n"
        for j in range(i + 1, end):
            if lines[j].strip().startswith("threshold:"):
                lines[j] = new
                break
        else:
            lines.insert(i + 1, new)
        shutil.copyfile(path, path.with_suffix(path.suffix + ".bak"))
        path.write_text("".join(lines))
        load_config(path)  # still a valid config
        return path
    raise UserError(
        f"{path}: no block-style camera entry 'name: {camera}' to write into; add "
        f"'threshold: {threshold:.3f}' to that camera by hand"
    )
