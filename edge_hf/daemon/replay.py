"""Replay: the daemon's parts over recorded files, as fast as possible, deterministic.

Not a mode of the live `Pipeline`: a small runner over the same parts that `app.build_pipeline`
made (rings, person stage, classifier, detectors, sinks). Each camera's file is sampled by media
time with the rule `frame_indices` uses, each sample goes through the ring and, once a window is
complete, through `Pipeline.process` exactly as a live window would.
"""

from __future__ import annotations

import logging

import numpy as np
from tqdm import tqdm

from edge_hf.core.video import VideoError, to_model_rgb
from edge_hf.daemon.capture import check_frame_size, sample_by_media_time
from edge_hf.daemon.pipeline import CameraRuntime, Pipeline
from edge_hf.daemon.sources import OpenCVSource, SourceError, make_source, redact

log = logging.getLogger(__name__)


def replay(pipeline: Pipeline, origin_unix: float = 0.0, hold_end_s: float = 0.0) -> None:
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
