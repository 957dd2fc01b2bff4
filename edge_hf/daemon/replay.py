"""Replay: the daemon's parts over recorded files, as fast as possible, deterministic.

`replay` is `edge-hf replay`: what it was asked (`ReplayRequest`) becomes a config of its own
(`_replay_config`: never the live daemon's state_dir, MQTT only with `--publish`, under its own
device), `app.build_pipeline` builds the parts from it, and `replay_files` runs them.

`replay_files` is not a mode of the live `Pipeline`: a small runner over the same parts that
`app.build_pipeline` made (rings, person stage, classifier, detectors, sinks). Each camera's file
is sampled by media time with the rule `frame_indices` uses, each sample goes through the ring
and, once a window is complete, through `Pipeline.process` exactly as a live window would.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from edge_hf.core.errors import UserError
from edge_hf.core.video import VideoError, to_model_rgb
from edge_hf.daemon.app import (
    attach_clips,
    build_pipeline,
    held_by_a_daemon,
    make_sink,
    with_clips,
    with_snapshots,
)
from edge_hf.daemon.capture import check_frame_size, sample_by_media_time
from edge_hf.daemon.config import Config, StateFiles, ensure_state_dir, load_config
from edge_hf.daemon.explain import attach, explanation
from edge_hf.daemon.pipeline import CameraRuntime, Pipeline
from edge_hf.daemon.sources import OpenCVSource, SourceError, make_source, redact

log = logging.getLogger(__name__)


def video_source(path: Path) -> str:
    """A `--video FILE` as a camera source: an existing file whose name is UTF-8 (a camera's
    source is text, and OpenCV opens names as UTF-8); else a one-line UserError."""
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:  # bytes that are not UTF-8 (Python keeps them as surrogates)
        shown = str(os.fsencode(path))[2:-1]  # /clips/caf\xe9.avi
        raise UserError(
            f"--video {shown}: the file name is not UTF-8; rename the file, or link it under a "
            "UTF-8 name"
        ) from None
    if not path.is_file():
        raise UserError(f"--video {path}: no such file")
    return str(path)


# A replay's own state unless `--state-dir` says (not world-writable /tmp; never the config's).
REPLAY_STATE_DIR = Path.home() / ".cache" / "edge-hf" / "replay"


@dataclass(frozen=True)
class ReplayRequest:
    """What `edge-hf replay` was asked: a config, or a model and a video, and where events go."""

    config: Path | None = None
    video: Path | None = None
    model: Path | None = None
    state_dir: Path = REPLAY_STATE_DIR
    origin_unix: float = 0.0
    timeline_png: Path | None = None
    hold_end_s: float = 0.0
    explain: bool = False  # print why each camera did or did not alarm (edge_hf.daemon.explain)
    # Also publish to the config's MQTT broker (as client `<client id>-replay`, under device
    # `<device_id>-replay`). Off by default: a replayed fall clip must never raise a live alarm,
    # overwrite a live camera's retained state or take the daemon's place on the broker.
    publish: bool = False


def _replay_config(req: ReplayRequest) -> Config:
    """The config a replay runs with: never the live daemon's state_dir (its lock, outbox and
    journal stay untouched), MQTT only when asked (`publish`), and then under its own device."""
    if req.config is not None:
        cfg = load_config(req.config)
        if req.state_dir.resolve() == cfg.state_dir.resolve():
            raise UserError(
                f"--state-dir {req.state_dir} is the config's state_dir (the daemon's lock, outbox "
                "and journal): give the replay its own folder, or leave --state-dir out"
            )
        if req.model is not None:
            cfg = cfg.model_copy(update={"model": cfg.model.model_copy(update={"path": req.model})})
        if req.video is not None:  # the replayed camera takes the video's place
            first = cfg.enabled_cameras()[0].model_copy(update={"source": video_source(req.video)})
            cfg = cfg.model_copy(update={"cameras": [first]})
        client = f"{cfg.mqtt.client_id or f'edge-hf-{cfg.device_id}'}-replay"
        mqtt = cfg.mqtt.model_copy(
            update={"enabled": cfg.mqtt.enabled and req.publish, "client_id": client}
        )
        # Published, its states, availability and events go under <prefix>/<device>-replay/:
        # the live cameras' retained fall states are never overwritten (a live ON with an OFF).
        device = f"{cfg.device_id}-replay" if mqtt.enabled else cfg.device_id
        return cfg.model_copy(
            update={"state_dir": req.state_dir, "mqtt": mqtt, "device_id": device}
        )
    if req.model is None or req.video is None:
        raise UserError("give --config FILE, or both --model and --video")
    if req.publish:
        raise UserError("--publish needs --config (the broker to publish to)")
    # A camera name is ASCII letters, digits, '_' and '-' (it becomes an MQTT topic level).
    name = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "_-") else "_"
                   for ch in req.video.stem)[:64]  # fmt: skip
    return Config.model_validate(
        {
            "device_id": "replay",
            "model": {"path": req.model, "providers": ["cpu"]},
            "cameras": [{"name": name.strip("_") or "video", "source": video_source(req.video)}],
            "state_dir": req.state_dir,
        }
    )


def replay(req: ReplayRequest) -> int:
    """`edge-hf replay`: the daemon's pipeline over file(s) as fast as possible, deterministic."""
    if not 0.0 <= req.hold_end_s <= 3600.0:
        raise UserError(f"--hold-end-s {req.hold_end_s:g}: seconds in [0, 3600]")
    cfg = _replay_config(req)
    if held_by_a_daemon(cfg.state_dir):
        raise UserError(
            f"--state-dir {cfg.state_dir} is held by a running edge-hf (its {StateFiles.LOCK}): "
            "give the replay its own folder, or leave --state-dir out"
        )
    ensure_state_dir(cfg)
    if cfg.mqtt.enabled:
        log.info("replay --publish: under %s/%s/... as client %s, never the live device's topics",
                 cfg.mqtt.topic_prefix, cfg.device_id, cfg.mqtt.client_id)  # fmt: skip
    name = str(req.config) if req.config else "replay"
    sink = with_clips(cfg, with_snapshots(cfg, make_sink(cfg)), live=False)
    pipeline = build_pipeline(cfg, sink, config_name=name, score_history=None, live=False)
    attach_clips(sink, pipeline)
    # What --explain and --timeline-png show (kept only when asked: a long file's every tick).
    recordings = attach(pipeline, req.origin_unix) if req.explain or req.timeline_png else []
    t0 = time.perf_counter()
    try:
        replay_files(pipeline, req.origin_unix, req.hold_end_s)
    except (SourceError, VideoError) as exc:
        raise UserError(str(exc)) from None
    log.debug("replay took %.1f s", time.perf_counter() - t0)
    if req.timeline_png is not None:
        from edge_hf.daemon.timeline import signals_timeline_png

        signals_timeline_png(req.timeline_png, recordings)
    if req.explain:
        print(explanation(recordings), flush=True)
    return 0


def replay_files(pipeline: Pipeline, origin_unix: float = 0.0, hold_end_s: float = 0.0) -> None:
    """Each camera's file through `pipeline`'s parts, sampled by media time; event times are
    `origin_unix` + media seconds.

    `hold_end_s` keeps showing a file's last frame that much longer, as if the camera went on
    watching a still scene: recordings are often cut right after a fall, before a detector that
    waits for the person to stay down (`confirm_s`) could decide.
    """
    pipeline.sink.start()
    try:
        for cam in pipeline.cameras:
            _replay_camera(pipeline, cam, origin_unix, hold_end_s)
    finally:
        pipeline.sink.close()


def _open_file(cam: CameraRuntime) -> OpenCVSource:
    # A recording: software decoding, the file's own frames (never an RTSP fallback).
    src = make_source(cam.cfg.source, realtime=False, decoder="software")
    if not isinstance(src, OpenCVSource) or src.live:
        raise SourceError(
            f"cameras.{cam.cfg.name}.source: replay reads recorded files; "
            f"{redact(cam.cfg.source)!r} is a live source (use edge-hf run, or give --video FILE)"
        )
    try:
        src.open()
    except SourceError as exc:
        raise SourceError(f"cameras.{cam.cfg.name}.source: {exc}") from None
    return src


def _replay_camera(
    pipeline: Pipeline, cam: CameraRuntime, origin_unix: float, hold_end_s: float
) -> None:
    src = _open_file(cam)
    pipeline.sink.camera_status(cam.cfg.name, "online")
    last_t, last, last_bgr = 0.0, None, None
    # A bar on a terminal only (long recordings: `replay`, `calibrate --video`).
    expected = src.frame_count / src.fps / cam.interval_s if src.fps > 0 else None
    bar = tqdm(desc=cam.cfg.name, total=expected and round(expected), unit="window",
               disable=None, leave=False)  # fmt: skip
    try:
        for t, frame in sample_by_media_time(src, cam.interval_s):
            check_frame_size(frame)
            last_t, last_bgr = t, frame
            last = to_model_rgb(frame, pipeline.size, cam.cfg.crop, pipeline.resize)
            _sample(pipeline, cam, last, t, origin_unix, frame)
            bar.update()
    except VideoError as exc:
        raise VideoError(f"{src.description}: {exc}") from None
    finally:
        bar.close()
        decoded = src.frames_decoded
        src.release()
    if src.frame_count and decoded < 0.95 * src.frame_count:
        log.warning(
            "%s: decoding stopped at frame %d of the %d its header announces: the file is "
            "truncated or corrupt, and the rest of it was not analysed",
            cam.cfg.name, decoded, src.frame_count,
        )  # fmt: skip
    held = round(hold_end_s / cam.interval_s)
    for k in range(1, held + 1):
        if last is not None:
            _sample(pipeline, cam, last, last_t + k * cam.interval_s, origin_unix, last_bgr)
    for event in cam.detector.close(origin_unix + last_t + held * cam.interval_s):
        pipeline.sink.send(event)


def _sample(
    pipeline: Pipeline,
    cam: CameraRuntime,
    rgb: np.ndarray,
    t: float,
    origin_unix: float,
    bgr: np.ndarray | None,
) -> None:
    """One sample at media time `t`: into the pose slot and the ring, then the window (if
    complete) through the pipeline's shared step."""
    if cam.pose_slot is not None and bgr is not None:
        cam.pose_slot.offer(t, bgr, cam.cfg.crop)
    cam.ring.write(rgb, t, None, bgr if cam.ring.keeps_evidence else None)
    window = cam.ring.window(pipeline.samples_per_window)
    if window is not None:
        pipeline.process([(cam, window)], lambda s: origin_unix + s, live=False)
