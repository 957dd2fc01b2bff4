"""The daemon's composition root: one place builds every part in dependency order.

config -> classifier (the model file is loaded once; its contract comes from that session) ->
config checked against the contract -> hyperframe builder -> cameras (ring, detector, source and
capture thread) -> sinks (JSON lines, MQTT) -> Prometheus -> systemd notifier -> pipeline, which
only starts what was built here; stopped in reverse (capture,
the last windows, open events, sinks, then the metrics endpoint). `check` and `run` are the
daemon's commands (`replay`, which builds the same parts over files, is `edge_hf.daemon.replay`'s);
cli.py only parses their arguments.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import threading
from collections import deque
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import IO

from edge_hf.core.contract import ModelContract
from edge_hf.core.errors import UserError
from edge_hf.core.hyperframe import HyperframeBuilder, WindowStacker, use_one_cpu_thread
from edge_hf.core.personcrop import rule_of, work_size
from edge_hf.core.runtime import read_contract
from edge_hf.daemon.capture import CaptureThread
from edge_hf.daemon.classifier import OnnxFallClassifier
from edge_hf.daemon.config import (
    DISK_FULL,
    CameraConfig,
    Config,
    DetectionConfig,
    StateFiles,
    check_against_model,
    check_metrics_port,
    check_state_dir,
    check_zones,
    ensure_state_dir,
    load_config,
)
from edge_hf.daemon.events import FallDetector
from edge_hf.daemon.journal import JournalSink, OpenEvents
from edge_hf.daemon.payload import ModelInfo
from edge_hf.daemon.person import PersonStage, load_head, load_sequence
from edge_hf.daemon.pipeline import CameraRuntime, Pipeline
from edge_hf.daemon.ring import FrameRing
from edge_hf.daemon.sdnotify import Notifier
from edge_hf.daemon.sinks import AlertSink, AlertThread, JsonLinesSink, TeeSink
from edge_hf.daemon.sources import make_source

log = logging.getLogger(__name__)

DEFAULT_THRESHOLD = 0.5
LIVE_SCORE_HISTORY = 600  # window scores kept per camera live (a minute at 10 Hz): bounded


def check(path: Path) -> tuple[Config, ModelContract]:
    """What `edge-hf check` validates: the config, the model file, and the one against the other."""
    cfg = load_config(path)
    cfg.mqtt.check_files()
    contract = read_contract(cfg.model.path)
    check_against_model(cfg, contract, str(path))
    check_state_dir(cfg)
    _say_if_skeletons_show_nobody(cfg)
    if not held_by_a_daemon(cfg.state_dir):  # else the port is presumably that daemon's
        check_metrics_port(cfg)
    if cfg.person.model is not None:
        from edge_hf.core.pose import PoseEstimator

        PoseEstimator(cfg.person.model, side=cfg.person.side)  # loads, or one line
        load_head(cfg.person)  # its values and its contract against this config
        load_sequence(cfg.person)  # the same
    return cfg, contract


def held_by_a_daemon(state_dir: Path) -> bool:
    """Whether a running edge-hf holds `state_dir`'s lock (without taking it for long)."""
    import fcntl

    lock = state_dir / StateFiles.LOCK
    if not lock.is_file():
        return False
    try:
        with lock.open("a") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.flock(fh, fcntl.LOCK_UN)
    except OSError:
        return True
    return False


def with_snapshots(cfg: Config, sink: AlertSink) -> AlertSink:
    """`sink` behind a `SnapshotSink` for the cameras with `detection.snapshot` (decided here,
    once); `sink` itself when none has it."""
    from edge_hf.daemon.snapshots import Retention, SnapshotSink

    kept = {
        c.name: Retention(d.snapshot_keep, int(d.snapshot_max_mb * 1e6))
        for c in cfg.enabled_cameras()
        if (d := cfg.detection_for(c)).snapshot
    }
    return SnapshotSink(sink, cfg.state_dir / StateFiles.SNAPSHOTS, kept) if kept else sink


def _say_if_skeletons_show_nobody(cfg: Config) -> None:
    """Skeleton snapshots and clips draw the person stage's people: without it, nobody."""
    snaps = any(cfg.detection_for(c).snapshot for c in cfg.enabled_cameras())
    if cfg.person.model is not None:
        return
    if snaps and cfg.snapshots.mode == "skeleton":
        log.warning(
            "detection.snapshot: snapshots.mode skeleton draws the people the person stage "
            "finds, and person.model is unset: the snapshots will show nobody; set person.model, "
            "or snapshots.mode: image for the camera's picture"
        )
    if cfg.clips.enabled and cfg.clips.mode == "skeleton":
        log.warning(
            "clips.enabled: clips.mode skeleton draws the people the person stage finds, and "
            "person.model is unset: no clip will be written; set person.model, or clips.mode: "
            "image"
        )


def with_clips(cfg: Config, sink: AlertSink, live: bool = True) -> AlertSink:
    """`sink` behind a `ClipSink` when `clips.enabled` (its sources come with the pipeline:
    `attach_clips`); `sink` itself otherwise."""
    if not cfg.clips.enabled:
        return sink
    from edge_hf.daemon.clips import ClipSink

    return ClipSink(sink, cfg.state_dir / StateFiles.CLIPS, cfg.clips, {}, live)


def attach_clips(sink: AlertSink, pipeline: Pipeline) -> None:
    """Give a `ClipSink` (`with_clips`) each camera's frames: its pose ticks drawn as skeletons
    (`clips.mode: skeleton`, with the person stage) or its ring (`image`)."""
    from edge_hf.daemon.clips import ClipSink, ClipSource, RingFrames, SkeletonFrames

    if not isinstance(sink, ClipSink):
        return
    sources: dict[str, ClipSource] = {}
    for cam in pipeline.cameras:
        if sink.cfg.mode == "image":
            sources[cam.cfg.name] = RingFrames(cam.ring, 1.0 / cam.interval_s)
        elif pipeline.person is not None:
            person = pipeline.person
            sources[cam.cfg.name] = SkeletonFrames(
                person.poses_between, cam.cfg.name, person.cfg.rate_hz
            )
    sink.sources = sources


def make_sink(cfg: Config, statuses: bool = False) -> AlertSink:
    """JSON lines on stdout, plus the MQTT publisher when `mqtt.enabled`."""
    lines = JsonLinesSink(statuses=statuses)
    if not cfg.mqtt.enabled:
        return lines
    from edge_hf.daemon.mqtt import MqttSink

    enabled = cfg.enabled_cameras()
    cams = [c.name for c in enabled]
    snaps = [c.name for c in enabled if cfg.detection_for(c).snapshot]
    kind = "image/png" if cfg.snapshots.mode == "skeleton" else "image/jpeg"
    mqtt = MqttSink(cfg.mqtt, cfg.device_id, cams, cfg.state_dir, cfg.model.path.name, snaps, kind)
    return TeeSink(lines, mqtt)


def _camera(
    cfg: Config,
    cam: CameraConfig,
    contract: ModelContract,
    info: ModelInfo,
    wake: threading.Event,
    score_history: int | None,
    person: PersonStage | None,
    stop: threading.Event | None,
) -> CameraRuntime:
    """A camera's ring, detector and (`stop` given: live) source and capture thread."""
    interval_s = (cam.interval_ms or contract.interval_ms) / 1000.0
    detection = cfg.detection_for(cam)
    threshold, confirm_s = camera_operating_point(cfg, contract, cam)
    # With snapshots on, the ring also keeps the newest T + 2 frames at the camera's resolution:
    # the window's centre frame then travels with the window to the detector and the event.
    samples = contract.window * contract.volumes  # a window's samples (V hyperframes of T)
    evidence = samples + 2 if detection.snapshot else 0
    # A person-crop model's frames are kept larger: each window is cut from them (pipeline).
    frame_size = work_size(contract.input_size) if rule_of(contract) else contract.input_size
    slots = max(4 * samples, 16)
    if cfg.clips.enabled and cfg.clips.mode == "image":  # (the clip's frames, and a margin)
        slots = max(slots, math.ceil((cfg.clips.pre_s + cfg.clips.post_s + 5.0) / interval_s))
    ring = FrameRing(slots, (*frame_size, 3), wake, evidence_slots=evidence)
    detector = FallDetector(
        cam.name,
        cfg.device_id,
        detection.model_copy(update={"confirm_s": confirm_s}),
        threshold,
        info,
        decision=cfg.person.decision if person is not None else "cnn",
        zones=cam.zone_rules(),
        when_others=cfg.person.when_others_present if person is not None else None,
        lost_s=cfg.person.lost_s if person is not None else 0.0,
    )
    detector.keeps_pictures = detection.snapshot or cfg.clips.enabled  # (a clip's time too)
    pose_slot = person.slot() if person is not None else None
    thread = None
    if stop is not None:
        source = partial(
            make_source, cam.source, realtime=cam.realtime, loop=cam.loop,
            open_timeout_s=cam.open_timeout_s, read_timeout_s=cam.stall_timeout_s,
            decoder=cam.decoder,
        )  # fmt: skip
        thread = CaptureThread(
            cam.name, source, ring, interval_s=interval_s, size=frame_size, stop=stop,
            stall_timeout_s=cam.stall_timeout_s, crop=cam.crop, resize=contract.resize,
            pose_slot=pose_slot,
        )  # fmt: skip
    return CameraRuntime(
        cam, interval_s, ring, detector, deque(maxlen=score_history), thread, pose_slot
    )


def operating_point(
    cfg: Config, contract: ModelContract, detection: DetectionConfig | None = None
) -> tuple[float, float]:
    """(threshold, confirm_s): the config's, else the model's own (its metadata), else 0.5, 0."""
    threshold = cfg.model.threshold or contract.threshold or DEFAULT_THRESHOLD
    confirm_s = (detection or cfg.detection).confirm_s
    if confirm_s is None:
        confirm_s = contract.confirm_s or 0.0
    return threshold, confirm_s


def camera_operating_point(
    cfg: Config, contract: ModelContract, cam: CameraConfig
) -> tuple[float, float]:
    """(threshold, confirm_s) that apply to `cam`: its own threshold (`calibrate --write`), else
    the config's, else the model's; its detection's confirm_s, else the model's. The one place
    this is decided (the detector, `check`, the replay timeline)."""
    threshold, confirm_s = operating_point(cfg, contract, cfg.detection_for(cam))
    return (cam.threshold if cam.threshold is not None else threshold), confirm_s


def build_pipeline(
    cfg: Config,
    sink: AlertSink,
    *,
    config_name: str = "config",
    notifier: Notifier | None = None,
    score_history: int | None = LIVE_SCORE_HISTORY,
    stop: threading.Event | None = None,
    on_batch: Callable[[float], None] | None = None,
    live: bool = True,
) -> Pipeline:
    """Every part of the daemon from one Config, in dependency order; the model loads once.

    `live`: each camera also gets its source and capture thread (`Pipeline.start` starts them);
    replay (`edge_hf.daemon.replay`) reads the files itself and builds none. `on_batch` is told
    each batch's seconds (e.g. the Prometheus inference histogram)."""
    notifier = notifier or Notifier("")
    check_zones(cfg, config_name)
    classifier = OnnxFallClassifier(
        cfg.model.path,
        cfg.model.providers,
        cfg.state_dir,
        cfg.model.fp16,
        cfg.max_batch,
        # A TensorRT engine build can take minutes: ask systemd to wait rather than kill us.
        on_slow_start=lambda: notifier.extend_timeout(900),
    )
    contract = classifier.contract
    check_against_model(cfg, contract, config_name)
    # The window stage where the model runs: NumPy on the CPU (torch is never imported), torch
    # on CUDA (one uint8 upload, then cat + in-place normalisation on the GPU).
    builder: WindowStacker | HyperframeBuilder = WindowStacker(
        contract.mean, contract.std, contract.volumes
    )
    if classifier.device == "cuda":
        builder = HyperframeBuilder(
            contract.mean, contract.std, classifier.device, contract.volumes
        )
        use_one_cpu_thread()
    info = ModelInfo(cfg.model.path.name, contract.window, contract.interval_ms)
    _say_if_skeletons_show_nobody(cfg)
    wake = threading.Event()
    stop = stop or threading.Event()
    person = None
    if cfg.person.model is not None:
        person = PersonStage(cfg.person, classifier.providers, crop_rule=rule_of(contract))
        seq = cfg.person.sequence
        also = f", pose-sequence model {seq} ({cfg.person.sequence_mode})" if seq else ""
        log.info("person stage: %s at %g Hz, decision %s%s", cfg.person.model,
                 cfg.person.rate_hz, cfg.person.decision, also)  # fmt: skip
    cameras = [
        _camera(cfg, c, contract, info, wake, score_history, person, stop if live else None)
        for c in cfg.enabled_cameras()
    ]
    return Pipeline(cfg, classifier, builder, cameras, sink, wake, notifier=notifier,
                    on_batch=on_batch, stop=stop, person=person)  # fmt: skip


def _install_stop_handlers(stop: threading.Event) -> None:
    def handler(signum: int, _frame: object) -> None:
        logging.getLogger("edge_hf").info("signal %d: stopping", signum)
        stop.set()  # only a flag: the loops notice it within their wait timeouts

    # SIGHUP too: a closed terminal or a reload request ends events cleanly instead of killing
    # the process mid-alert (the unit's ExecReload restarts the service to reload the config).
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, handler)


def _lock_state_dir(state_dir: Path) -> IO[str] | None:
    """Hold an exclusive lock on `state_dir` for the process's life: two daemons sharing one
    would fight over the MQTT client id and send every fall twice."""
    import fcntl

    try:
        lock = (state_dir / StateFiles.LOCK).open("a+")
    except OSError as exc:
        if exc.errno not in DISK_FULL:
            raise
        # No inode for the lock file (a daemon that ran here before left one): watch the
        # cameras all the same, a full disk must never stop the alarm.
        log.error("state_dir: cannot create %s (%s): running without the lock against a second "
                  "daemon", state_dir / StateFiles.LOCK, exc.strerror)  # fmt: skip
        return None
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.seek(0)
        other = lock.read().strip() or "?"
        lock.close()
        raise UserError(
            f"state_dir: {state_dir} is in use by another edge-hf (pid {other}); give each "
            "daemon its own state_dir"
        ) from None
    # Unbuffered: on a full disk the pid (for the message above) is simply not written; a
    # buffered one would raise again at close.
    with contextlib.suppress(OSError):
        os.ftruncate(lock.fileno(), 0)
        os.write(lock.fileno(), f"{os.getpid()}\n".encode())
    return lock


def run(config: Path, drain_s: float = 5.0, statuses: bool = False) -> int:
    """`edge-hf run`: the daemon until SIGTERM/SIGINT or until every (file) camera has ended."""
    stop = threading.Event()
    _install_stop_handlers(stop)  # first: a TERM while the model loads still ends cleanly
    cfg = load_config(config)
    cfg.mqtt.check_files()
    os.umask(0o077)  # the outbox, snapshots and engine cache are for this service alone
    ensure_state_dir(cfg)
    lock = _lock_state_dir(cfg.state_dir)  # held until the process exits
    notifier = Notifier()
    # Open fall events are journaled: a crash's leftovers are ended at the next start.
    # ... and every sink runs on the alert thread, never on the inference loop (#42 item 7).
    # The journal first: an open fall is on disk before its picture is encoded.
    clips = with_clips(cfg, with_snapshots(cfg, make_sink(cfg, statuses)))
    journal = JournalSink(clips, OpenEvents(cfg.state_dir / StateFiles.OPEN_EVENTS))
    sink = AlertThread(journal, journal=journal.journal)
    metrics = None
    if cfg.metrics.enabled:
        from edge_hf.daemon.prometheus import Metrics

        metrics = Metrics()
    pipeline = build_pipeline(
        cfg, sink, config_name=str(config), notifier=notifier, stop=stop,
        on_batch=metrics.inference.observe if metrics is not None else None,
    )  # fmt: skip
    attach_clips(clips, pipeline)
    # A latched fall outlives a restart (#42 item 8), and escalates once, not again (#43).
    journal.keep = lambda e: pipeline.restore_open(
        e, escalated=journal.journal.escalation(e.event_id) is not None
    )
    if metrics is not None:
        metrics.watch(pipeline.snapshot)
        try:
            metrics.serve(cfg.metrics.host, cfg.metrics.port)
        except OSError as exc:
            raise UserError(
                f"metrics.port {cfg.metrics.port}: cannot listen on {cfg.metrics.host} "
                f"({exc.strerror}); pick a free port"
            ) from None
    try:
        pipeline.start()
        pipeline.run(drain_s=drain_s)
    finally:
        if metrics is not None:
            metrics.close()
        notifier.close()
        if lock is not None:
            lock.close()
    return 0
