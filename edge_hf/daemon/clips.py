"""Event clips (`clips`): the seconds around a fall's start, written off the inference loop.

`ClipSink` sits in front of the other sinks (on the alert thread): a `start` of a camera with a
`ClipSource` opens a job; the clip's own thread gathers the frames from `pre_s` before the fall
to `post_s` after it as they come (the inference loop is never waited on, nor copied for), then
writes an MP4 under `state_dir/clips`, prunes the oldest (`keep`, `max_mb`) and announces it to
the sinks (`ClipNotice`: MQTT `<camera>/clip`). Two sources:

- `SkeletonFrames` (`clips.mode: skeleton`, the default): the person stage's people of each pose
  tick drawn as stick figures on a plain background (`edge_hf.daemon.skeleton`): no image of
  anyone; at the pose rate, the view's proportions, long side SKELETON_SIDE.
- `RingFrames` (`image`): the frames the camera's ring holds, as the model sees them (the ring
  is made long enough to hold `pre_s + post_s` and a margin).

A clip that cannot be written (no MP4 encoder, a full disk) is logged; the alert never waits
for it. A job whose camera stops delivering is written with what it has after `post_s` +
CLIP_GRACE_S; at shutdown (or a replay's end) every open job is written with what it has.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import cv2
import numpy as np

from edge_hf.daemon.config import ClipsConfig
from edge_hf.daemon.payload import FallEvent, iso
from edge_hf.daemon.ring import FrameRing
from edge_hf.daemon.sinks import AlertSink, ClipNotice, ForwardingSink
from edge_hf.daemon.skeleton import PoseTick, Skeleton, draw
from edge_hf.daemon.snapshots import prune

log = logging.getLogger(__name__)

CLIP_GRACE_S = 5.0  # a live job waits this much longer than post_s for its frames
POLL_S = 0.1  # how often the clip thread gathers new frames
SKELETON_SIDE = 640  # a skeleton clip's long side (pixels)
CLIP_PATTERNS = ("*.mp4",)


class ClipSource(Protocol):
    """Where a camera's clip frames come from; sample times on the camera's clock."""

    fps: float

    def newest(self) -> float | None:
        """The newest sample time available (None: nothing yet)."""
        ...

    def frames(self, t0: float, t1: float) -> list[tuple[float, np.ndarray]]:
        """(sample time, BGR picture) of the samples from `t0` to `t1`, oldest first."""
        ...


class SkeletonFrames:
    """A camera's pose ticks (`PersonStage.poses_between`) drawn as skeletons."""

    def __init__(
        self, poses: Callable[[str, float, float], list[PoseTick]], camera: str, fps: float
    ) -> None:
        self.poses, self.camera, self.fps = poses, camera, fps

    def newest(self) -> float | None:
        ticks = self.poses(self.camera, float("-inf"), float("inf"))
        return ticks[-1].t if ticks else None

    def frames(self, t0: float, t1: float) -> list[tuple[float, np.ndarray]]:
        return [(p.t, draw(Skeleton(_size(p.hw), None, p.figures))) for p in
                self.poses(self.camera, t0, t1)]  # fmt: skip


def _size(hw: tuple[int, int]) -> tuple[int, int]:
    """A skeleton clip's (width, height): the view's proportions, long side SKELETON_SIDE (even
    sides: MP4 encoders want them)."""
    h, w = hw if min(hw) > 0 else (3, 4)
    scale = SKELETON_SIDE / max(h, w)
    return 2 * round(w * scale / 2), 2 * round(h * scale / 2)


class RingFrames:
    """The camera's ring of model-size frames (RGB), as they are."""

    def __init__(self, ring: FrameRing, fps: float) -> None:
        self.ring, self.fps = ring, fps

    def newest(self) -> float | None:
        return self.ring.last_time

    def frames(self, t0: float, t1: float) -> list[tuple[float, np.ndarray]]:
        return [
            (t, cv2.cvtColor(f, cv2.COLOR_RGB2BGR)) for t, f in self.ring.frames_between(t0, t1)
        ]


@dataclass
class _Job:
    event: FallEvent
    t: float  # the fall's sample time (the camera's clock)
    deadline: float  # monotonic: written with what it has by then (live only)
    frames: list[tuple[float, np.ndarray]] = field(default_factory=list)

    def gathered_until(self) -> float:
        return self.frames[-1][0] if self.frames else float("-inf")


class ClipSink(ForwardingSink):
    """Writes a clip around each `start` of the cameras in `sources` (see the module)."""

    def __init__(
        self,
        inner: AlertSink,
        folder: Path,
        cfg: ClipsConfig,
        sources: dict[str, ClipSource],
        live: bool = True,
    ) -> None:
        super().__init__(inner)
        self.folder, self.cfg, self.sources, self.live = folder, cfg, sources, live
        self._jobs: list[_Job] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._stepping = threading.Lock()  # one gatherer at a time (the thread, or close)
        self.written = 0
        self.failed = 0

    def start(self) -> None:
        self.inner.start()
        self._thread = threading.Thread(target=self._run, name="clips", daemon=True)
        self._thread.start()

    def send(self, event: FallEvent) -> None:
        t = event.evidence.t if event.evidence is not None else None
        if event.type == "start" and event.camera in self.sources and t is not None:
            deadline = time.monotonic() + self.cfg.post_s + CLIP_GRACE_S
            with self._lock:
                self._jobs.append(_Job(event, t, deadline))
        self.inner.send(event)

    def _run(self) -> None:
        while not self._stop.wait(POLL_S):
            self._step(final=False)

    def _step(self, final: bool) -> None:
        """Gather each job's new frames; write the jobs that are complete (all of them when
        `final`)."""
        with self._stepping:
            self._gather(final)

    def _gather(self, final: bool) -> None:
        with self._lock:
            jobs = list(self._jobs)
        for job in jobs:
            source = self.sources[job.event.camera]
            end = job.t + self.cfg.post_s
            start = max(job.t - self.cfg.pre_s, job.gathered_until() + 1e-3)
            try:
                job.frames += source.frames(start, end)
            except Exception as exc:  # (a bug of a source must not stop the other clips)
                log.error("%s: clip frames unavailable (%s)", job.event.camera, exc)
            newest = source.newest()
            done = newest is not None and newest >= end - 1e-6
            late = self.live and time.monotonic() >= job.deadline
            if final or done or late:
                with self._lock:
                    self._jobs.remove(job)
                self._write(job, source.fps)

    def _write(self, job: _Job, fps: float) -> None:
        """The job's frames as an MP4, pruned and announced; a failure is logged, counted."""
        event = job.event
        if not job.frames:
            log.warning("%s: no frames for the clip of fall %s", event.camera, event.event_id)
            self.failed += 1
            return
        path = self.folder / f"{event.event_id}.mp4"
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            _write_mp4(path, [f for _, f in job.frames], fps)
            size = path.stat().st_size
            prune(self.folder, self.cfg.keep, int(self.cfg.max_mb * 1e6), CLIP_PATTERNS)
        except (OSError, cv2.error) as exc:
            log.error("%s: no clip for fall %s (%s: %s); the alert went without it",
                      event.camera, event.event_id, path, exc)  # fmt: skip
            self.failed += 1
            return
        self.written += 1
        first, last = job.frames[0][0] - job.t, job.frames[-1][0] - job.t
        log.info("%s: clip of fall %s: %s (%d frames, %+.1f to %+.1f s, started %s)",
                 event.camera, event.event_id, path, len(job.frames), first, last,
                 iso(event.started_at))  # fmt: skip
        notice = ClipNotice(event.event_id, event.camera, event.device_id, str(path),
                            self.cfg.mode, event.started_at, first, last, len(job.frames), fps,
                            size)  # fmt: skip
        self.inner.clip(notice)

    def close(self) -> None:
        """Write every open job with what it has, then close the sinks behind."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5.0)
        self._step(final=True)
        self.inner.close()


def _write_mp4(path: Path, frames: list[np.ndarray], fps: float) -> None:
    """BGR frames of one size as an MP4 (MPEG-4 part 2: every OpenCV build with FFmpeg or
    GStreamer writes it); OSError when no encoder opens."""
    h, w = frames[0].shape[:2]
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"mp4v"), max(fps, 1.0), (w, h))
    if not writer.isOpened():
        raise OSError("this OpenCV has no MP4 encoder")
    try:
        for f in frames:
            writer.write(f if f.shape[:2] == (h, w) else cv2.resize(f, (w, h)))
    finally:
        writer.release()
