"""One capture thread per camera: sample on a fixed wall-clock schedule into the camera's ring.

Ticks fall at k * interval on the monotonic clock, a grid shared by all cameras (no drift
accumulates, and cameras with the same interval fall due together). Each tick gets the frame
that arrived nearest to it (`TickSampler`), resized to the model input and written to the ring
once the first frame after the tick has arrived; a source slower than the interval therefore
yields repeated frames, and a faster one has frames skipped. Files
replayed as fast as possible are sampled by media time with the nearest-frame rule of
`frame_indices` instead (`sample_by_media_time`), so live and offline windows agree.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

import cv2
import numpy as np

from edge_hf.core.video import VideoError, tick_frames, to_model_rgb
from edge_hf.daemon.person import PoseSlot
from edge_hf.daemon.ring import FrameRing
from edge_hf.daemon.sources import FrameSource, OpenCVSource, SourceError

log = logging.getLogger(__name__)


def sample_by_media_time(
    src: OpenCVSource, interval_s: float
) -> Iterator[tuple[float, np.ndarray]]:
    """(tick time, BGR frame) for ticks k * interval of a file by `tick_frames` (the rule
    `frame_indices` uses); stops at the end of the file.
    """

    def frames() -> Iterator[np.ndarray]:
        while (got := src.read()) is not None:
            yield got[0]

    return tick_frames(frames(), src.fps, interval_s)


class Sample(NamedTuple):
    """A tick's frame, and when that frame arrived (the window's time for alert latency)."""

    tick: float
    frame: np.ndarray
    arrival: float


class TickSampler:
    """Which frame each tick of the grid t0 + k * interval gets: the one whose arrival is nearest.

    Taking "the newest frame when the next one arrives" instead aliases when the camera's frame
    rate equals the sampling rate: arrivals that jitter around the ticks leave one tick with no
    new frame and give the next two ticks the same frame, so a window repeats one frame and loses
    its neighbour.

    A tick is decided as early as the rule allows: a frame arriving after the tick decides it
    (the frame before or this one, whichever is nearer), and a frame arriving before the tick by
    less than half the usual gap between frames decides it at once, since the next frame, due a
    gap later, will be farther. The window is then complete when its newest frame arrives, not a
    frame later. (A next frame that comes sooner than usual would have been nearer: the tick is
    then off by less than a frame.)
    """

    def __init__(self, t0: float, interval_s: float) -> None:
        self.t0, self.interval_s = t0, interval_s
        self.k = 0
        self._prev: tuple[np.ndarray | None, float] | None = None
        self._gap: float | None = None  # running mean of the time between arrivals

    def wants(self, now: float) -> bool:
        """Whether the frame arriving at `now` may be the nearest to a tick, so that it must be
        converted (a frame that is not is only grabbed, never colour-converted or resized).

        Yes when a tick is due and the frame before is farther from it (or was not kept), and
        when the next tick is nearer than half the usual gap between frames plus a margin (the
        frame is then probably the last before it and nearer than the one after). With jitter
        past that margin a tick takes the first frame after it instead: off by under a frame.
        """
        if self.t0 + self.k * self.interval_s <= now:
            # The latest tick now due is the one this frame is most likely the nearest to.
            last_due = self.t0 + math.floor((now - self.t0) / self.interval_s) * self.interval_s
            prev = self._prev
            if prev is None or prev[0] is None or now - last_due < last_due - prev[1]:
                return True
        next_tick = self.t0 + max(self.k, math.floor((now - self.t0) / self.interval_s) + 1) * (
            self.interval_s
        )
        return self._gap is None or next_tick - now <= 0.75 * self._gap

    def on_frame(self, frame: np.ndarray | None, now: float) -> list[Sample]:
        """A sample for every tick decided by a frame arriving at `now` (`frame` None: grabbed
        but not converted, because `wants` said no)."""
        out = []
        prev = self._prev
        while (tick := self.t0 + self.k * self.interval_s) <= now:
            if prev is not None and prev[0] is not None and (tick - prev[1] <= now - tick):
                out.append(Sample(tick, prev[0], prev[1]))
            elif frame is not None:
                out.append(Sample(tick, frame, now))
            elif prev is not None and prev[0] is not None:  # only if `wants` was ignored
                out.append(Sample(tick, prev[0], prev[1]))
            self.k += 1
        if prev is not None:
            gap = now - prev[1]
            self._gap = gap if self._gap is None else 0.9 * self._gap + 0.1 * gap
        self._prev = (frame, now)
        if frame is not None and self._gap is not None:
            while (tick := self.t0 + self.k * self.interval_s) <= now + self._gap / 2:
                out.append(Sample(tick, frame, now))
                self.k += 1
        return out


@dataclass
class CameraStats:
    """Counters a camera's capture thread keeps (read by metrics and status)."""

    state: str = "starting"  # starting, online, stalled, ended, stopped
    frames_read: int = 0
    reconnects: int = 0
    stalls: int = 0
    last_frame_at: float = field(default_factory=time.monotonic)
    # Mean time between frames (exponential average, seconds; None before the second frame).
    frame_gap_s: float | None = None
    # Since when the sampled picture has been black or unchanged (None while it changes).
    blind_since: float | None = None
    blind_reason: str = ""

    def slow(self, interval_s: float) -> bool:
        """Whether the camera delivers frames too seldom for the model's sampling interval
        (each window would repeat frames: a fall's motion is lost between them)."""
        return (
            self.frames_read >= SLOW_MIN_FRAMES
            and self.frame_gap_s is not None
            and self.frame_gap_s > SLOW_FACTOR * interval_s
        )


SLOW_FACTOR = 1.5  # frames this many sampling intervals apart, on average, make a camera slow
MIN_FRAME_SIDE = 64  # pixels on the short side: a smaller frame shows no one (1x1, 1x640 streams)
SLOW_MIN_FRAMES = 10
DARK_LEVEL = 12.0  # mean grey level under this: a black picture (covered lens, dead sensor)
# A picture with no detail: once sensor noise is smoothed away (5x5 mean), its grey levels vary
# less than this (a lens covered by a hand or a cap in daylight: flat grey plus noise).
FLAT_SD = 3.0
# An unchanged picture: fewer than this share of the pixels changed at all since the previous
# sample. A live sensor changes nearly every pixel a little (noise, and each key frame of a
# stream); a frozen stream repeats the same pixels exactly, except perhaps a small burnt-in clock.
STILL_SHARE = 0.02


def check_frame_size(frame: np.ndarray) -> None:
    """Raise VideoError for a camera frame too small to show a person: the model would classify
    noise upscaled to its input (a 2x2 stream raised a fall with the demo model)."""
    h, w = frame.shape[:2]
    if min(h, w) < MIN_FRAME_SIDE:
        raise VideoError(
            f"{w}x{h} frames: below {MIN_FRAME_SIDE} px on the short side, too small to show a "
            "person; check the camera's resolution and stream"
        )


def picture_problem(frame: np.ndarray, previous: np.ndarray | None) -> str:
    """ "black", "featureless", "unchanged" or "" for a sampled model-size RGB frame (every 2nd
    pixel looked at: cheap enough for every sample)."""
    small = frame[::2, ::2]
    if float(small.mean()) < DARK_LEVEL:
        return "black"
    grey = small.mean(axis=2, dtype=np.float32)
    if float(cv2.blur(grey, (5, 5)).std()) < FLAT_SD:
        return "featureless"
    if previous is not None:
        changed = np.any(small != previous[::2, ::2], axis=2)
        if float(changed.mean()) < STILL_SHARE:
            return "unchanged"
    return ""


class CaptureThread(threading.Thread):
    """Reads a camera and writes a sample into its ring every `interval_s`."""

    def __init__(
        self,
        name: str,
        make_source: Callable[[], FrameSource],
        ring: FrameRing,
        *,
        interval_s: float,
        size: tuple[int, int],
        stop: threading.Event,
        stall_timeout_s: float = 5.0,
        max_backoff_s: float = 30.0,
        crop: tuple[int, int, int, int] | None = None,
        resize: str = "area",
        pose_slot: PoseSlot | None = None,
    ) -> None:
        super().__init__(name=f"capture-{name}", daemon=True)
        self.camera = name
        self._make_source = make_source
        self.ring = ring
        self.interval_s = interval_s
        self.size = size
        self._stop_event = stop
        self.stall_timeout_s = stall_timeout_s
        self.max_backoff_s = max_backoff_s
        self.crop = crop
        self.resize = resize  # the model's rule (its contract), the one it was trained with
        self.pose_slot = pose_slot  # the person stage's frame, at its own rate (None: off)
        self.stats = CameraStats()

    def run(self) -> None:
        """Open, pump, reopen with backoff; an unexpected error restarts the camera."""
        backoff = 0.5
        while not self._stop_event.is_set():
            try:
                ended, backoff = self._session(backoff)
            except Exception as exc:  # a bug or a driver fault must not end the camera for good
                log.exception("%s: capture failed (%s); restarting the camera", self.camera, exc)
                self._set_stalled(f"capture failed: {type(exc).__name__}: {exc}")
                ended = False
                self._stop_event.wait(backoff)
                backoff = min(backoff * 2, self.max_backoff_s)
                self.stats.reconnects += 1
            if ended:
                return
        self.stats.state = "stopped"

    def _session(self, backoff: float) -> tuple[bool, float]:
        """One open-pump-release round; (the file ended, the next backoff)."""
        src = self._make_source()
        try:
            src.open()
        except SourceError as exc:
            self._set_stalled(str(exc))
            self._stop_event.wait(backoff)
            self.stats.reconnects += 1
            return False, min(backoff * 2, self.max_backoff_s)
        log.info("%s: opened %s", self.camera, src.description)
        self.stats.state = "online"
        self.stats.last_frame_at = time.monotonic()  # the stall clock starts at the open
        try:
            ended = self._pump(src)
        except VideoError as exc:  # e.g. a crop that does not fit this camera's frames
            self._set_stalled(f"cameras.{self.camera}: {exc}")
            self._stop_event.wait(self.max_backoff_s)
            return False, self.max_backoff_s
        finally:
            src.release()
        if ended:
            self.stats.state = "ended"
            log.info("%s: end of %s", self.camera, src.description)
            return True, 0.5
        if not self._stop_event.is_set():
            self._set_stalled(f"{src.description} stopped delivering frames")
            self._stop_event.wait(0.5)
            self.stats.reconnects += 1
        return False, 0.5

    def _set_stalled(self, reason: str) -> None:
        if self.stats.state != "stalled":
            self.stats.stalls += 1
            log.warning("%s: stalled: %s; reopening with backoff", self.camera, reason)
        self.stats.state = "stalled"

    def _pump(self, src: FrameSource) -> bool:
        """Read until the source fails (False) or a file ends (True) or stop is set."""
        # Ticks on a grid shared by every camera with the same interval, so their windows fall due
        # together and go through the model as one batch.
        t0 = math.ceil(time.monotonic() / self.interval_s) * self.interval_s
        sampler = TickSampler(t0, self.interval_s)
        last: tuple[np.ndarray, np.ndarray] | None = None  # (a BGR frame, its model input)
        previous: np.ndarray | None = None  # the model input sampled before
        while not self._stop_event.is_set():
            media_t = src.grab()
            now = time.monotonic()
            if media_t is None:
                return not src.live and not getattr(src, "loop", False)
            if self.stats.frames_read:
                gap = now - self.stats.last_frame_at
                ema = self.stats.frame_gap_s
                self.stats.frame_gap_s = gap if ema is None else 0.9 * ema + 0.1 * gap
            self.stats.frames_read += 1
            self.stats.last_frame_at = now
            if self.stats.state != "online":
                self.stats.state = "online"
            # Only a frame that may be sampled is colour-converted; every tick that has come due
            # gets the frame nearest to it (repeated if the source is slow, resized once).
            frame = src.retrieve() if sampler.wants(now) else None
            for tick, chosen, arrived in sampler.on_frame(frame, now):
                if last is None or last[0] is not chosen:
                    check_frame_size(chosen)  # too small: the camera is stalled, with why
                    last = (chosen, to_model_rgb(chosen, self.size, self.crop, self.resize))
                    self._watch_picture(last[1], previous, now)
                    previous = last[1]
                if self.pose_slot is not None:
                    self.pose_slot.offer(tick, chosen, self.crop)
                # The camera-resolution frame rides along for a snapshot (snapshots on only).
                self.ring.write(
                    last[1], tick, arrived, chosen if self.ring.keeps_evidence else None
                )
        return False

    def _watch_picture(self, frame: np.ndarray, previous: np.ndarray | None, now: float) -> None:
        problem = picture_problem(frame, previous)
        if not problem:
            self.stats.blind_since, self.stats.blind_reason = None, ""
        elif self.stats.blind_since is None or problem != self.stats.blind_reason:
            self.stats.blind_since = (
                now if self.stats.blind_since is None else self.stats.blind_since
            )
            self.stats.blind_reason = problem

    def check_stall(self, now: float | None = None) -> bool:
        """Mark the camera stalled when no frame arrived for `stall_timeout_s` (status only)."""
        now = time.monotonic() if now is None else now
        if self.stats.state == "online" and now - self.stats.last_frame_at > self.stall_timeout_s:
            self._set_stalled(f"no frame for {now - self.stats.last_frame_at:.1f} s")
            return True
        return False
