"""Decoding videos into resized RGB frames, and the one resize rule shared with live capture."""

from __future__ import annotations

import hashlib
import logging
import os
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import cv2
import numpy as np

from edge_hf.core.contract import RESIZE, RESIZES
from edge_hf.core.hyperframe import nearest_index

log = logging.getLogger(__name__)


class VideoError(Exception):
    """A video that cannot be opened or has no decodable frame."""


Crop = tuple[int, int, int, int]  # x, y, width, height in pixels of the source frame


def check_crop(crop: Crop) -> Crop:
    """The one rule for a crop (config `cameras[].crop`, manifest `crop` column): x, y >= 0 and
    w, h >= 1 pixels; ValueError otherwise."""
    x, y, w, h = crop
    if x < 0 or y < 0 or w < 1 or h < 1:
        raise ValueError("[x, y, w, h] with x, y >= 0 and w, h >= 1 (pixels)")
    return crop


def cut(frame: np.ndarray, crop: Crop | None) -> np.ndarray:
    """The `crop` region (x, y, w, h) of `frame`, a view; the whole frame when None."""
    if crop is None:
        return frame
    x, y, w, h = crop
    return frame[y : y + h, x : x + w]


UNKNOWN_FPS = 30.0  # what a file whose header gives no usable frame rate is taken to play at


def file_fps(reported: float, description: str) -> float:
    """The frame rate a file plays at: the `reported` one (its header's), or UNKNOWN_FPS, with a
    warning, when that is missing, zero or implausible (1000 fps or more)."""
    if 0 < reported < 1000:
        return reported
    log.warning("%s: unknown frame rate, assuming %g fps", description, UNKNOWN_FPS)
    return UNKNOWN_FPS


FrameT = TypeVar("FrameT")  # a decoded frame, or anything standing for one (its index)


def tick_frames(
    frames: Iterable[FrameT], fps: float, interval_s: float
) -> Iterator[tuple[float, FrameT]]:
    """(tick k * interval_s, frame) for k = 0, 1, ...: the frame `nearest_index` gives (the rule
    `frame_indices` uses; frame i shown at i / fps), while the `frames` last. Lazy: reads no
    frame before it is needed."""
    k = 0
    for i, frame in enumerate(frames):
        while nearest_index(k * interval_s, fps, sys.maxsize) == i:
            yield k * interval_s, frame
            k += 1


def sample_file(
    path: Path, interval_s: float, fps: float | None = None
) -> Iterator[tuple[float, np.ndarray]]:
    """(tick, BGR frame) of the video file `path` by `tick_frames`, at `fps` (None: its header's
    by `file_fps`). VideoError when OpenCV cannot open it."""
    cap = cv2.VideoCapture(str(path))
    try:
        if not cap.isOpened():
            raise VideoError(f"{path}: OpenCV cannot open it")
        if fps is None:
            fps = file_fps(float(cap.get(cv2.CAP_PROP_FPS) or 0.0), str(path))

        def frames() -> Iterator[np.ndarray]:
            while True:
                ok, frame = cap.read()
                if not ok:
                    return
                yield frame

        yield from tick_frames(frames(), fps, interval_s)
    finally:
        cap.release()


def to_model_rgb(
    frame_bgr: np.ndarray,
    size: tuple[int, int],
    crop: Crop | None = None,
    resize: str | None = None,
) -> np.ndarray:
    """A decoded BGR frame as uint8 RGB of the model's input `size` (H, W): the whole frame, or
    the `crop` region (x, y, w, h) of it, squeezed to that size.

    Training, evaluation and the live daemon all go through this, so a model sees the same pixels
    from a file as from a camera.
    """
    h, w = size
    if crop is not None:
        x, y, cw, ch = crop
        fh, fw = frame_bgr.shape[:2]
        if x + cw > fw or y + ch > fh:
            raise VideoError(
                f"crop [{x}, {y}, {cw}, {ch}] reaches past the {fw}x{fh} frame; "
                "give x + w <= width and y + h <= height"
            )
        frame_bgr = cut(frame_bgr, crop)
    return cv2.cvtColor(shrink(frame_bgr, (w, h), resize or RESIZE), cv2.COLOR_BGR2RGB)


# A model records the rule it was trained with (ONNX metadata `edge_hf.resize`; models without
# it were trained with "area") and the daemon resizes by that rule: the same pixels both sides.
# (RESIZE, the rule new models train with, lives with the contract.)
__all__ = [
    "RESIZE", "RESIZES", "UNKNOWN_FPS", "VideoError", "check_crop", "cut", "decode_video",
    "file_fps", "sample_file", "shrink", "tick_frames", "to_model_rgb",
]  # fmt: skip


def shrink(frame: np.ndarray, size_wh: tuple[int, int], resize: str = RESIZE) -> np.ndarray:
    """`frame` resized to `size_wh` (width, height) by the rule `resize`.

    - "area": OpenCV's INTER_AREA straight to the size (~1.6 ms for 640x480 -> 112x112 on one
      core here: a fractional factor takes its slow general path);
    - "linear2x-area": bilinear to twice the size, then the mean of each 2x2 block (INTER_AREA's
      fast integer path), for a frame at least twice as large; "area" otherwise. ~0.3 ms, and
      within about one grey level of "area" (the 2x2 mean removes the aliasing a single
      bilinear step would add). `edge-hf bench --sections capture` measures both.
    """
    if resize not in RESIZES:
        raise ValueError(f"resize {resize!r}: choose from {', '.join(RESIZES)}")
    w, h = size_wh
    fh, fw = frame.shape[:2]
    if (fh, fw) == (h, w):
        return frame
    if resize == "linear2x-area" and fw >= 2 * w and fh >= 2 * h:
        frame = cv2.resize(frame, (2 * w, 2 * h), interpolation=cv2.INTER_LINEAR)
    return cv2.resize(frame, (w, h), interpolation=cv2.INTER_AREA)


@dataclass(frozen=True)
class DecodedVideo:
    """All frames of a video at the model's input size, with the frame rate they play at."""

    frames: np.ndarray  # (N, H, W, 3) uint8 RGB
    fps: float


def _decode_opencv(
    path: Path, size: tuple[int, int], crop: Crop | None, resize: str
) -> DecodedVideo:
    cap = cv2.VideoCapture(str(path))
    try:
        if not cap.isOpened():
            raise VideoError(f"{path}: OpenCV cannot open it")
        fps = float(cap.get(cv2.CAP_PROP_FPS) or 0.0)
        frames = []
        while True:
            ok, frame = cap.read()
            if not ok:
                break
            frames.append(to_model_rgb(frame, size, crop, resize))
    finally:
        cap.release()
    if not frames:
        raise VideoError(f"{path}: no frame could be decoded")
    return DecodedVideo(np.stack(frames), fps)


def _decode_decord(
    path: Path, size: tuple[int, int], crop: Crop | None, resize: str
) -> DecodedVideo:
    import decord  # optional, faster seeking; only used when installed

    try:
        vr = decord.VideoReader(str(path), ctx=decord.cpu(0))
        n = len(vr)
        fps = float(vr.get_avg_fps())
        rgb = vr.get_batch(list(range(n))).asnumpy()
    except Exception as exc:  # decord raises its own DECORDError for broken files
        raise VideoError(f"{path}: decord cannot decode it ({exc})") from exc
    if n == 0:
        raise VideoError(f"{path}: no frame could be decoded")
    # Back to BGR so the resize rule is exactly the live one.
    frames = [to_model_rgb(np.ascontiguousarray(f[..., ::-1]), size, crop, resize) for f in rgb]
    return DecodedVideo(np.stack(frames), fps)


def _have_decord() -> bool:
    try:
        import decord  # noqa: F401
    except ImportError:
        return False
    return True


def decode_video(
    path: Path,
    size: tuple[int, int],
    cache_dir: Path | None = None,
    crop: Crop | None = None,
    resize: str = RESIZE,
) -> DecodedVideo:
    """Decode every frame of `path` (its `crop` region if given) at `size` (H, W) by the rule
    `resize`; reuse or fill `cache_dir` when given.

    The cache holds one `.npy` per (file, size), memory-mapped on load, so later runs and every
    DataLoader worker share the decoded frames without decoding again.
    """
    cached: Path | None = None
    if cache_dir is not None:
        st = path.stat()
        key = f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|{size[0]}x{size[1]}"
        if crop is not None:
            key += "|crop=" + ",".join(map(str, crop))
        if resize != "area":  # (caches written before the rule existed are "area")
            key += f"|resize={resize}"
        digest = hashlib.sha1(key.encode()).hexdigest()[:20]
        cached = cache_dir / f"{digest}.npy"
        fps_file = cached.with_suffix(".fps")
        if cached.exists() and fps_file.exists():
            return DecodedVideo(np.load(cached, mmap_mode="r"), float(fps_file.read_text()))
    decoded = (_decode_decord if _have_decord() else _decode_opencv)(path, size, crop, resize)
    if cached is not None:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_suffix(f".{os.getpid()}.tmp.npy")
        np.save(tmp, decoded.frames)
        os.replace(tmp, cached)  # atomic: a concurrent reader sees all of it or nothing
        cached.with_suffix(".fps").write_text(repr(decoded.fps))
        return DecodedVideo(np.load(cached, mmap_mode="r"), decoded.fps)
    return decoded
