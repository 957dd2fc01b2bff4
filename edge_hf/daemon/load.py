"""Is the machine keeping up? The pipeline's own lag, so an overloaded box blames itself, not the
cameras.

Every LOAD_PERIOD_S the inference loop hands `LoadWatch.update` its totals: windows classified and
skipped (a camera's older windows are skipped when the loop comes back late), the time spent
stacking and classifying, and the person stage's time per pose frame. The machine is
**overloaded** when more than SKIP_SHARE of the windows due in the last period were skipped while
the loop was busy classifying more than BUSY_SHARE of the time: the cameras deliver, the model
does not keep up (a camera catching up after a network hiccup skips windows of an idle loop).
Cameras are then reported `overloaded`, not `slow` (a starved capture thread reads fewer frames
too), with an estimate of how many cameras this machine holds at the configured rate with this
pipeline.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

log = logging.getLogger(__name__)

LOAD_PERIOD_S = 5.0  # how often the lag is measured
SKIP_SHARE = 0.3  # more than this share of the due windows skipped ...
BUSY_SHARE = 0.5  # ... while the loop spent more than this share of the time classifying
CLEAR_SHARE = 0.1  # back under this share: keeping up again (no flapping in between)


@dataclass(frozen=True)
class LoadTotals:
    """Running totals of the inference loop and the person stage at one instant."""

    at: float  # monotonic seconds
    windows: int
    skipped: int
    busy_ms: float  # stacking + inference, all windows
    pose_frames: int = 0
    pose_busy_ms: float = 0.0


def capacity(
    window_ms: float, interval_s: float, pose_ms: float = 0.0, pose_rate_hz: float = 0.0
) -> int:
    """About how many cameras one inference loop (`window_ms` a window, one window per camera
    every `interval_s`) and one person-stage thread beside it (`pose_ms` a pose frame at
    `pose_rate_hz` per camera) keep up with: whichever runs out first."""
    limits = []
    if window_ms > 0:
        limits.append(interval_s * 1000.0 / window_ms)
    if pose_ms > 0 and pose_rate_hz > 0:
        limits.append(1000.0 / (pose_ms * pose_rate_hz))
    return max(0, math.floor(min(limits))) if limits else 0


class LoadWatch:
    """The overload verdict from successive `LoadTotals` (one per LOAD_PERIOD_S)."""

    def __init__(self, cameras: int, interval_s: float, pose_rate_hz: float = 0.0) -> None:
        self.cameras, self.interval_s, self.pose_rate_hz = cameras, interval_s, pose_rate_hz
        self._last: LoadTotals | None = None
        self.overloaded = False
        self.skip_share = 0.0
        self.capacity: int | None = None  # cameras this machine holds (None: not measured yet)

    def update(self, now: LoadTotals) -> bool:
        """Feed the totals now; whether the overload verdict changed."""
        last, self._last = self._last, now
        if last is None:
            return False
        windows, skipped = now.windows - last.windows, now.skipped - last.skipped
        if windows <= 0:
            return False
        self.skip_share = skipped / (windows + skipped)
        busy = (now.busy_ms - last.busy_ms) / 1000 / max(now.at - last.at, 1e-6)
        pose_frames = now.pose_frames - last.pose_frames
        pose_ms = (now.pose_busy_ms - last.pose_busy_ms) / pose_frames if pose_frames else 0.0
        window_ms = (now.busy_ms - last.busy_ms) / windows
        self.capacity = capacity(window_ms, self.interval_s, pose_ms, self.pose_rate_hz)
        was = self.overloaded
        if not was and self.skip_share > SKIP_SHARE and busy > BUSY_SHARE:
            self.overloaded = True
            log.warning(
                "overloaded: this machine classified only %.0f %% of the windows due (%.1f ms a "
                "window%s); it holds about %d cameras at %.0f Hz with this pipeline, %d are "
                "configured: falls can be missed. Remove cameras, lower the person stage's "
                "rate or use a faster machine",
                100 * (1 - self.skip_share), window_ms,
                f", {pose_ms:.1f} ms a pose frame" if pose_ms else "",
                self.capacity, 1 / self.interval_s, self.cameras,
            )  # fmt: skip
        elif was and self.skip_share < CLEAR_SHARE:
            self.overloaded = False
            log.info("keeping up again (%.0f %% of windows skipped)", 100 * self.skip_share)
        return self.overloaded != was


# What `make bench` measured (capacity section, 2026-12-06 19:25, one run): cameras sustained at
# 10 Hz on a 2-core x86-64 CPU, per shipped model, alone and with the person stage beside it.
BENCH_MACHINE = "a 2-core x86-64 CPU"
BENCH_CAPACITY: dict[str, tuple[int, int | None]] = {
    "fall-synth-mobilenet_v3_small-t3.onnx": (64, None),
    "fall-real-efficientnet_lite0-t3.onnx": (20, 8),
}


def capacity_warning(model_name: str, person: bool, cameras: int) -> str:
    """A line for `check` when more cameras are configured than `make bench` saw this pipeline
    hold on BENCH_MACHINE ("" when within it, or not measured)."""
    alone, with_person = BENCH_CAPACITY.get(model_name, (None, None))
    measured = with_person if person else alone
    if measured is None or cameras <= measured:
        return ""
    what = f"{model_name}{' with the person stage' if person else ''}"
    return (
        f"warning: {cameras} cameras configured; make bench measured {what} holding {measured} "
        f"cameras at 10 Hz on {BENCH_MACHINE}: on a machine like that the daemon will report "
        "`overloaded` and falls can be missed (run make bench on yours, or watch the stats "
        "topic's capacity_cameras)"
    )
