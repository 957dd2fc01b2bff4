"""The inference loop over built parts: rings -> hyperframe batches -> classifier -> detectors.

Live (`run`): capture threads fill per-camera rings on their own schedule; the inference loop
wakes on new samples, takes only the newest window of every camera that has one (older ones are
counted as skipped: no queue can grow), stacks them into one batch with the shared hyperframe
code and classifies the batch with one ONNX Runtime session.

Replay (`edge_hf.daemon.replay`) is a small runner of its own over the same parts: it feeds
recorded files through the rings and the shared step (`process`) by media time. The parts are
built by `edge_hf.daemon.app`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

import numpy as np

from edge_hf.core.errors import shown
from edge_hf.core.hyperframe import HyperframeBuilder, WindowStacker
from edge_hf.core.personcrop import crop_box, cut, work_size
from edge_hf.daemon.camerastatus import camera_status, say_status
from edge_hf.daemon.capture import CaptureThread
from edge_hf.daemon.classifier import Classifier
from edge_hf.daemon.config import CameraConfig, Config
from edge_hf.daemon.events import FallDetector
from edge_hf.daemon.load import LOAD_PERIOD_S, LoadTotals, LoadWatch
from edge_hf.daemon.lograte import LogRate
from edge_hf.daemon.payload import Evidence, FallEvent
from edge_hf.daemon.person import PersonStage, PoseSlot
from edge_hf.daemon.ring import FrameRing, Window
from edge_hf.daemon.sdnotify import Notifier, watchdog_interval_s
from edge_hf.daemon.sinks import AlertSink
from edge_hf.daemon.skeleton import Skeleton
from edge_hf.daemon.status import CameraSnapshot, Snapshot

log = logging.getLogger(__name__)


RECENT = 1000  # inference and latency samples kept for percentiles
READY_WAIT_S = 15.0  # systemd READY waits this long at most for every camera's first open
SKELETON_LOOKBACK_S = 3.0  # a skeleton snapshot shows the newest pose tick this recent


@dataclass
class CameraRuntime:
    """A camera's live parts and counters."""

    cfg: CameraConfig
    interval_s: float
    ring: FrameRing
    detector: FallDetector
    # The newest window scores (a bounded deque live; replay keeps the whole file for its plot).
    scores: deque[float]
    thread: CaptureThread | None = None  # built by `app.build_pipeline` (live), None in replay
    pose_slot: PoseSlot | None = None  # the person stage's frames (None: the stage is off)
    last_seq: int = 0
    windows: int = 0
    skipped: int = 0
    status: str = "starting"

    def snapshot(self) -> CameraSnapshot:
        st = self.thread.stats if self.thread is not None else None
        return CameraSnapshot(
            name=self.cfg.name,
            state=st.state if st else "starting",
            frames_read=st.frames_read if st else 0,
            stalls=st.stalls if st else 0,
            reconnects=st.reconnects if st else 0,
            windows=self.windows,
            skipped=self.skipped,
            dropped=self.ring.dropped,
            last_score=self.detector.last_score,
            status=self.status,
            events_started=self.detector.counts.start,
            events_ended=self.detector.counts.end,
            events_escalated=self.detector.counts.escalation,
            no_alarm=tuple(sorted(self.detector.counts.refused.items())),
        )


@dataclass
class PipelineStats:
    """Pipeline-wide counters (read through `Pipeline.snapshot`)."""

    batches: int = 0
    windows: int = 0
    inference_ms: deque[float] = field(default_factory=lambda: deque(maxlen=RECENT))
    latency_ms: deque[float] = field(default_factory=lambda: deque(maxlen=RECENT))
    last_progress: float = float("-inf")  # monotonic time of the last completed batch
    busy_ms: float = 0.0  # total time spent stacking and classifying batches

    def record(self, inference_ms: float, latencies: Iterable[float]) -> None:
        self.inference_ms.append(inference_ms)
        self.busy_ms += inference_ms
        self.latency_ms.extend(latencies)
        self.last_progress = time.monotonic()


def wall_time(monotonic_t: float) -> float:
    """The Unix time of a monotonic instant, by the wall clock as it reads now."""
    return monotonic_t + (time.time() - time.monotonic())


class Pipeline:
    """Runs the parts that `app.build_pipeline` made: live (`start`, `run`) or over files."""

    def __init__(
        self,
        cfg: Config,
        classifier: Classifier,
        builder: WindowStacker | HyperframeBuilder,
        cameras: list[CameraRuntime],
        sink: AlertSink,
        wake: threading.Event,
        *,
        notifier: Notifier | None = None,
        on_batch: Callable[[float], None] | None = None,
        stuck_after_s: float = 15.0,
        stop: threading.Event | None = None,
        person: PersonStage | None = None,
    ) -> None:
        self.cfg = cfg
        self.classifier = classifier
        self.person = person
        self.builder = builder
        self.cameras = cameras
        self.sink = sink
        self.notifier = notifier or Notifier("")
        self.on_batch = on_batch  # e.g. the Prometheus inference histogram, in seconds
        self.stuck_after_s = stuck_after_s
        self.stop = stop or threading.Event()  # given by `app.run`: set by signal handlers
        self._ready_by: float | None = None  # set by start()
        self._new_sample = wake  # every camera's ring sets it on a write
        self._commands: deque[tuple[str, str]] = deque(maxlen=100)  # (camera, command) from MQTT
        self.stats = PipelineStats()
        self._rate = LogRate()  # commands come from outside: a flood of them is a few lines
        # A hyper-volume model (volumes V) sees V consecutive hyperframes of T samples each:
        # the newest V*T samples in time order, stacked on channels like one long hyperframe
        # (block v holds hyperframe v, oldest first: what training's `_stack` builds).
        self.samples_per_window = classifier.contract.window * classifier.contract.volumes
        self.input_size = classifier.contract.input_size
        self.resize = classifier.contract.resize
        # The size frames are kept at in the rings (replay resizes to it): the input size, or
        # for a person-crop model twice it, each window then cut around the people (`_frames`).
        self.crop_rule = person.crop_rule if person is not None else None
        self.size = work_size(self.input_size) if self.crop_rule else self.input_size
        # Live, the person stage runs in its own thread (False: in this loop before each batch,
        # as replay runs it; `make bench` measures both).
        self.person_threaded = True
        interval = min((c.interval_s for c in cameras), default=0.1)
        self.load = LoadWatch(len(cameras), interval, person.cfg.rate_hz if person else 0.0)
        self._next_load = float("-inf")

    # ------------------------------------------------------------------ the shared step

    def process(
        self,
        due: list[tuple[CameraRuntime, Window]],
        to_unix: Callable[[float], float] | None,
        live: bool = True,
    ) -> None:
        """Classify the windows in batches and let each camera's detector decide. `to_unix`
        turns a frame's arrival (monotonic) into detector time; None where the times already are
        (a file replayed)."""
        if self.person is not None and not self.person.threaded:
            self.person.step({c.cfg.name: c.pose_slot for c, _ in due if c.pose_slot is not None})
        for i in range(0, len(due), self.cfg.max_batch):
            chunk = due[i : i + self.cfg.max_batch]
            t0 = time.perf_counter()
            batch = self.builder.stack_batch([self._frames(cam, w) for cam, w in chunk])
            scores = self.classifier.scores(batch)
            ms = (time.perf_counter() - t0) * 1000
            now = time.monotonic()
            if self.on_batch is not None:
                self.on_batch(ms / 1000)
            self.stats.batches += 1
            self.stats.windows += len(chunk)
            # Latency (newest sample -> decision) only means something on the live clock.
            self.stats.record(ms, [(now - w.arrivals[-1]) * 1000 for _, w in chunk] if live else [])
            for (cam, w), (score, down) in zip(chunk, scores, strict=True):
                cam.windows += 1
                cam.scores.append(score)
                mid = len(w.frames) // 2
                # when the newest frame arrived (detector time)
                t = w.arrivals[-1] if to_unix is None else to_unix(w.arrivals[-1])
                self._feed_pose(cam, w.times[-1], to_unix)
                for event in cam.detector.update(score, t, w.frames[mid], down, w.evidence):
                    self.sink.send(self._shown(cam, event, w.times[-1]))

    def _feed_pose(
        self, cam: CameraRuntime, until: float, to_unix: Callable[[float], float] | None
    ) -> None:
        """The camera's pose verdicts up to the window's newest sample, to its detector in time
        order (the one decision point: the same order live and in replay)."""
        if self.person is None:
            return
        for verdict in self.person.verdicts_until(cam.cfg.name, until):
            at = verdict.t if to_unix is None else to_unix(verdict.t)
            for event in cam.detector.on_pose(at, verdict):
                self.sink.send(event)
        cam.detector.pose_ok = not self.person.is_degraded(cam.cfg.name)
        cam.detector.picture_ok = cam.thread is None or cam.thread.stats.blind_since is None

    def _shown(self, cam: CameraRuntime, event: FallEvent, until: float) -> FallEvent:
        """A start's evidence as `snapshots.mode` says: `image`, the picture as it is;
        `skeleton`, no picture at all (it never leaves this loop) but the camera's frame size
        and the people of its newest pose tick up to sample time `until` (drawn off this loop,
        by `SnapshotSink`); either way with `until` (an event clip is cut around it)."""
        ev = event.evidence
        if ev is None:
            return event
        if self.cfg.snapshots.mode != "skeleton":
            return replace(event, evidence=replace(ev, t=until))
        name, crop = cam.cfg.name, cam.cfg.crop
        if ev.camera_bgr is not None:
            size = (ev.camera_bgr.shape[1], ev.camera_bgr.shape[0])
        elif crop is not None:  # (the ring no longer had the frame: the view's extent)
            size = (crop[0] + crop[2], crop[1] + crop[3])
        else:
            size = (self.size[1], self.size[0])  # (H, W) -> (width, height)
        ticks = (
            self.person.poses_between(name, until - SKELETON_LOOKBACK_S, until)
            if self.person is not None
            else []
        )
        people = ticks[-1].figures if ticks else ()
        fallen = event.person[1] if event.person is not None else None
        skeleton = Skeleton(size, crop, people, fallen)
        return replace(event, evidence=Evidence(None, None, skeleton, until))

    def _frames(self, cam: CameraRuntime, w: Window) -> list[np.ndarray]:
        """The window's frames as the model takes them: as they are, or (a person-crop model)
        cut around the people the person stage saw up to the newest sample, one crop for all."""
        if self.crop_rule is None or self.person is None:
            return w.frames
        boxes = self.person.boxes_for(cam.cfg.name, w.times[-1])
        crop = crop_box(boxes, w.frames[0].shape[:2], self.crop_rule)
        return cut(w.frames, crop, self.input_size, self.resize)

    # ------------------------------------------------------------------ live

    def _lagging(self) -> list[CameraRuntime]:
        """Online cameras due at the newest sampled tick that have not written it yet."""
        newest = max((t for c in self.cameras if (t := c.ring.last_time) is not None), default=None)
        if newest is None:
            return []
        out = []
        for c in self.cameras:
            if c.thread is None or c.thread.stats.state != "online":
                continue  # a stalled or ended camera is never waited for
            last = c.ring.last_time
            if last is None or (last < newest - 1e-6 and last + c.interval_s <= newest + 1e-6):
                out.append(c)
        return out

    def wait_for_batch(self, max_s: float) -> float:
        """Wait until every online camera due at the newest tick has written it (at most `max_s`);
        returns the seconds waited. Ends at once when all are in: no fixed coalescing delay."""
        t0 = time.monotonic()
        deadline = t0 + max_s
        while not self.stop.is_set():
            self._new_sample.clear()
            if not self._lagging():
                break
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._new_sample.wait(left)
        self._new_sample.set()  # the caller's loop clears it after taking the windows
        return time.monotonic() - t0

    def _due_windows(self) -> list[tuple[CameraRuntime, Window]]:
        due = []
        for cam in self.cameras:
            seq = cam.ring.seq
            if seq <= cam.last_seq:
                continue
            if cam.last_seq > 0:
                cam.skipped += seq - cam.last_seq - 1  # only the newest window is classified
            w = cam.ring.window(self.samples_per_window)
            if w is not None:
                cam.last_seq = w.seq + 1
                due.append((cam, w))
        return due

    def _watch_load(self, now: float) -> None:
        """Every LOAD_PERIOD_S: is the machine keeping up (`LoadWatch`)?"""
        if now < self._next_load:
            return
        self._next_load = now + LOAD_PERIOD_S
        pc = self.person.counters if self.person is not None else None
        self.load.update(
            LoadTotals(
                now, sum(c.windows for c in self.cameras), sum(c.skipped for c in self.cameras),
                self.stats.busy_ms, pc.frames if pc else 0, pc.busy_ms if pc else 0.0,
            )
        )  # fmt: skip

    def _update_status(self) -> None:
        now = time.monotonic()
        self._watch_load(now)
        for cam in self.cameras:
            if cam.thread is None:
                continue
            cam.thread.check_stall()
            st = cam.thread.stats
            degraded = self.person is not None and self.person.is_degraded(cam.cfg.name)
            status = camera_status(st, cam.interval_s, cam.cfg.blind_after_s, now,
                                   self.load.overloaded, degraded)  # fmt: skip
            if status is not None and status != cam.status:
                say_status(cam.cfg.name, status, cam.status, st, cam.interval_s, now)
                cam.status = status
                self.sink.camera_status(cam.cfg.name, status)

    def restore_open(self, event: FallEvent, escalated: bool = False) -> bool:
        """An earlier run's open `start` (the journal's): held open again by its camera's
        detector if still latched (`FallDetector.restore`; `escalated`: it escalated already);
        False: end it."""
        cam = next((c for c in self.cameras if c.cfg.name == event.camera), None)
        return cam is not None and cam.detector.restore(
            event, time.monotonic(), time.time(), escalated
        )

    def command(self, camera: str, command: str) -> None:
        """A command from outside (any thread): `ack` ends the camera's latched fall."""
        self._commands.append((camera, command))
        self._new_sample.set()

    def _run_commands(self) -> None:
        while self._commands:
            name, command = self._commands.popleft()
            cam = next((c for c in self.cameras if c.cfg.name == name), None)
            if cam is None or command != "ack":
                self._rate.log(log, logging.WARNING, "ignoring command %s for camera %s",
                               shown(command), shown(name))  # fmt: skip
                continue
            self._rate.log(log, logging.INFO, "%s: fall acknowledged", name, key=(name, "ack"))
            for event in cam.detector.acknowledge(time.monotonic()):
                self.sink.send(event)

    def start(self) -> None:
        """Open the sink, warm the model up and start the cameras' capture threads."""
        if any(cam.thread is None for cam in self.cameras):
            raise RuntimeError("built with live=False (for replay): no capture threads to start")
        self.sink.listen(self.command)
        self.sink.start()
        ms = self.classifier.warm_up()
        log.info("model warm: %.1f ms per window", ms)
        for cam in self.cameras:
            if cam.thread is not None:
                cam.thread.start()
        # The person stage in its own thread, beside this loop (both cores busy at once); a
        # person-crop model's windows wait for their own tick's boxes instead, in this loop,
        # as in training (`process` then runs the stage before each batch).
        if self.person is not None and self.crop_rule is None and self.person_threaded:
            slots = {c.cfg.name: c.pose_slot for c in self.cameras if c.pose_slot is not None}
            self.person.start(slots, self.stop)
        # READY once every camera has tried its first open (or after READY_WAIT_S), said by the
        # inference loop: a camera slow to open must not hold up the healthy ones.
        self._ready_by = time.monotonic() + READY_WAIT_S

    def _say_ready(self, now: float) -> None:
        if self._ready_by is None:
            return
        if now < self._ready_by and any(
            c.thread is not None and c.thread.stats.state == "starting" for c in self.cameras
        ):
            return
        self._ready_by = None
        self.notifier.ready(self.snapshot().status_line())

    def snapshot(self) -> Snapshot:
        """Every counter at this instant, typed: what stats, summary, metrics and bench read."""
        return Snapshot(
            cameras=tuple(c.snapshot() for c in self.cameras),
            batches=self.stats.batches,
            windows=self.stats.windows,
            inference_ms=tuple(self.stats.inference_ms),
            latency_ms=tuple(self.stats.latency_ms),
            providers=tuple(self.classifier.providers),
            sinks=tuple(self.sink.health()),
            overloaded=self.load.overloaded,
            capacity_cameras=self.load.capacity,
        )

    def making_progress(self, now: float | None = None) -> bool:
        """Frames advanced and inference completed within `stuck_after_s`: what WATCHDOG=1 means."""
        now = time.monotonic() if now is None else now
        frames = any(
            c.thread is not None
            and c.thread.stats.frames_read > 0
            and now - c.thread.stats.last_frame_at < self.stuck_after_s
            for c in self.cameras
        )
        return frames and now - self.stats.last_progress < self.stuck_after_s

    def run(self, drain_s: float = 5.0) -> None:
        """The inference loop, until `stop` is set or every (file) camera has ended."""
        for cam in self.cameras:  # detectors run on the monotonic clock, events say wall time
            cam.detector.wall = wall_time
        # Cameras tick on a shared grid but their frames land a little apart: after the first new
        # sample, wait for the others due at that tick to join the batch, this long at most.
        interval_s = min(c.interval_s for c in self.cameras)
        coalesce_s = min(0.03, interval_s / 3)
        busy_s = 0.0  # how long the last batch took
        beat_s = min(5.0, watchdog_interval_s() or 5.0)
        next_beat = time.monotonic()
        next_stats = time.monotonic() + min(10.0, self.cfg.stats_interval_s)
        failure = ""  # the alarm path itself failed: the daemon stops, non-zero
        try:
            while not self.stop.is_set():
                # Under load no wait: windows that come due while a batch runs join the next one
                # anyway, and a wait on top of a long batch would make cameras skip windows.
                if self._new_sample.wait(0.5) and len(self.cameras) > 1 and busy_s < interval_s / 4:
                    self.wait_for_batch(coalesce_s)
                self._new_sample.clear()
                self._run_commands()
                due = self._due_windows()
                if due:
                    t0 = time.monotonic()
                    self.process(due, None)
                    busy_s = time.monotonic() - t0
                self._update_status()
                now = time.monotonic()
                self._say_ready(now)
                if now >= next_stats:
                    next_stats = now + self.cfg.stats_interval_s
                    self.sink.stats(self.snapshot())
                if now >= next_beat:
                    next_beat = now + beat_s
                    snap = self.snapshot()
                    self.notifier.status(snap.status_line())
                    failure = next((f"alert sink {s.name}: {s.failed}" for s in snap.sinks
                                    if s.failed), "")  # fmt: skip
                    if failure:
                        break  # no alert would go out: systemd's Restart= is the way back
                    if self.making_progress(now):
                        self.notifier.watchdog()
                if all(c.thread is not None and not c.thread.is_alive() for c in self.cameras):
                    log.info("every camera has ended")
                    break
        finally:
            self.shutdown(drain_s)
        if failure:
            raise RuntimeError(f"{failure}; stopping (restart to retry)")

    def shutdown(self, drain_s: float) -> None:
        """Stop capture, classify what is left within the budget, close events, close the sink."""
        self.notifier.stopping()
        self.stop.set()
        deadline = time.monotonic() + drain_s
        for cam in self.cameras:
            if cam.thread is not None:
                cam.thread.join(max(0.0, deadline - time.monotonic()))
        if self.person is not None:
            self.person.join(max(0.0, deadline - time.monotonic()))
        due = self._due_windows()
        if due and time.monotonic() < deadline:
            self.process(due, None)
        elif due:
            log.warning("shutdown: dropped %d unclassified windows (drain budget spent)", len(due))
        now = time.monotonic()
        for cam in self.cameras:  # a latched fall stays open: the next start holds it again
            for event in cam.detector.close(now, keep_latched=True):
                self.sink.send(event)
            if cam.status != "offline":
                cam.status = "offline"
                self.sink.camera_status(cam.cfg.name, "offline")
        log.info("%s", self.snapshot().summary())
        self.sink.close()
