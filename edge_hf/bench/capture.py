"""Benchmarks, capture part: what one camera frame costs before it reaches the ring.

Per frame a capture thread decodes (`grab`), and for the frames that may be sampled converts to
BGR (`retrieve`) and resizes to the model input (`to_model_rgb`). Measured side by side on a
640x480 video: the way before (every frame read = decoded and converted, INTER_AREA resize) and
ours, with the memory floor of the resize (read the camera frame, write the small one), the
share of frames the tick sampler converts at common frame rates, and what the cheaper resize
does to a model's scores on real footage (windows built both ways, same frames, same model).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from edge_hf.bench.prep import time_it
from edge_hf.core.contract import INPUT_NAME
from edge_hf.core.hyperframe import WindowStacker, frame_indices
from edge_hf.core.runtime import open_session, read_contract
from edge_hf.core.video import cut, file_fps, to_model_rgb
from edge_hf.daemon.capture import TickSampler


def area_rgb(frame_bgr: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """The resize before: OpenCV's INTER_AREA straight to the model size, then RGB."""
    h, w = size
    small = cv2.resize(frame_bgr, (w, h), interpolation=cv2.INTER_AREA)
    return cv2.cvtColor(small, cv2.COLOR_BGR2RGB)


def converted_share(fps: float, interval_s: float = 0.1, seconds: float = 60.0) -> float:
    """Share of a camera's frames the tick sampler asks to convert (arrivals jitter by 4 ms)."""
    rng = np.random.default_rng(int(fps))
    arrivals = [k / fps + float(rng.uniform(-0.004, 0.004)) for k in range(1, int(fps * seconds))]
    sampler = TickSampler(0.0, interval_s)
    frame = np.zeros(1, np.uint8)
    converted = 0
    for now in arrivals:
        keep = sampler.wants(now)
        converted += keep
        sampler.on_frame(frame if keep else None, now)
    return converted / len(arrivals)


def _decode_ms(video: Path, how: str, frames: int = 300) -> float:
    """Milliseconds per frame of reading `video` with read() or grab() (one thread)."""
    import time

    cap = cv2.VideoCapture(str(video), cv2.CAP_FFMPEG)
    try:
        n, t0 = 0, time.perf_counter()
        while n < frames:
            ok = cap.read()[0] if how == "read" else cap.grab()
            if not ok:
                cap.set(cv2.CAP_PROP_POS_FRAMES, 0)
                continue
            n += 1
        return (time.perf_counter() - t0) * 1000 / n
    finally:
        cap.release()


def capture_costs(
    video: Path, size: tuple[int, int], bandwidth_gbs: float, repeats: int = 7,
    camera_fps: float = 15.0, interval_s: float = 0.1,
) -> dict[str, Any]:  # fmt: skip
    """Per-frame and per-sampled-frame costs, before vs ours vs floor, and per camera-second."""
    cap = cv2.VideoCapture(str(video))
    ok, frame = cap.read()
    cap.release()
    if not ok:
        raise OSError(f"{video}: no frame")
    before = time_it(lambda: area_rgb(frame, size), repeats)
    ours = time_it(lambda: to_model_rgb(frame, size), repeats)
    h, w = size
    floor_ms = (frame.nbytes + h * w * 3) / (bandwidth_gbs * 1e9) * 1000
    read_ms = min(_decode_ms(video, "read") for _ in range(3))
    grab_ms = min(_decode_ms(video, "grab") for _ in range(3))
    shares = {f"{fps:g}": round(converted_share(fps, interval_s), 3) for fps in (15, 25, 30)}
    share = converted_share(camera_fps, interval_s)
    ticks = 1.0 / interval_s
    before_per_s = camera_fps * read_ms + ticks * before.median_ms
    ours_per_s = (
        camera_fps * grab_ms + share * camera_fps * (read_ms - grab_ms) + ticks * ours.median_ms
    )
    return {
        "frame": f"{frame.shape[1]}x{frame.shape[0]}",
        "size": f"{w}x{h}",
        "resize_before": before.as_dict(),
        "resize_ours": ours.as_dict(),
        "resize_floor_ms": round(floor_ms, 4),
        "decode_read_ms": round(read_ms, 3),
        "decode_grab_ms": round(grab_ms, 3),
        "converted_share": shares,
        "camera_fps": camera_fps,
        "cpu_ms_per_camera_s_before": round(before_per_s, 1),
        "cpu_ms_per_camera_s_ours": round(ours_per_s, 1),
    }


def _frames(video: Path, crop: tuple[int, int, int, int] | None) -> tuple[list[np.ndarray], float]:
    cap = cv2.VideoCapture(str(video))
    fps = file_fps(float(cap.get(cv2.CAP_PROP_FPS) or 0.0), str(video))
    frames: list[np.ndarray] = []
    while True:
        ok, f = cap.read()
        if not ok:
            break
        frames.append(cut(f, crop))
    cap.release()
    return frames, fps


def _fall_probs(session: Any, contract: Any, small: list[np.ndarray], fps: float) -> np.ndarray:
    """The fall probability of every 10 Hz window (clamped at the ends) of one clip."""
    stacker = WindowStacker(contract.mean, contract.std)
    fall = contract.classes.index(contract.fall_class)
    interval_s = contract.interval_ms / 1000
    centres = np.arange(0.0, len(small) / fps, interval_s)
    out: list[float] = []
    for i in range(0, len(centres), 32):
        batch = stacker.stack_batch(
            [
                [small[j] for j in frame_indices(len(small), fps, float(t), contract.window,
                                                 interval_s)]
                for t in centres[i : i + 32]
            ]
        )  # fmt: skip
        logits = session.run(None, {INPUT_NAME: batch})[0]
        e = np.exp(logits - logits.max(axis=1, keepdims=True))
        out.extend((e / e.sum(axis=1, keepdims=True))[:, fall].tolist())
    return np.asarray(out)


def _summary(a: list[np.ndarray], b: list[np.ndarray], threshold: float) -> dict[str, Any]:
    d = np.concatenate([np.abs(x - y) for x, y in zip(a, b, strict=True)])
    flips = sum(
        int(((x >= threshold) != (y >= threshold)).sum()) for x, y in zip(a, b, strict=True)
    )
    return {
        "videos": len(a),
        "windows": len(d),
        "mean_abs_diff": round(float(d.mean()), 4),
        "p99_abs_diff": round(float(np.percentile(d, 99)), 4),
        "max_abs_diff": round(float(d.max()), 4),
        "threshold": threshold,
        "windows_across_threshold": flips,
    }


Videos = list[tuple[Path, "tuple[int, int, int, int] | None"]]


Prepare = Callable[[np.ndarray], np.ndarray]  # a BGR camera frame -> the model's RGB input


def _compare(
    contract: Any, ways: list[tuple[Any, Prepare]], videos: Videos, what: str,
    progress: Callable[[str], None],
) -> dict[str, Any]:  # fmt: skip
    """Fall probabilities of every window of each video computed two ways (a session and a
    frame preparation each), and how far apart they are."""
    probs: list[list[np.ndarray]] = [[], []]
    for video, crop in videos:
        progress(f"{what}: {video.name}")
        frames, fps = _frames(video, crop)
        for (session, prepare), out in zip(ways, probs, strict=True):
            if frames:
                out.append(_fall_probs(session, contract, [prepare(f) for f in frames], fps))
    return _summary(probs[0], probs[1], contract.threshold or 0.5)


def score_effect(
    model: Path, videos: Videos, progress: Callable[[str], None] = print
) -> dict[str, Any]:
    """The model's fall probability on every 10 Hz window of each video, with frames resized by
    INTER_AREA and by the cheap rule (same frames, same windows): how far apart they are."""
    contract = read_contract(model)
    session = open_session(model, threads=1)
    h, w = contract.input_size
    ways: list[tuple[Any, Prepare]] = [
        (session, lambda f: area_rgb(f, (h, w))),
        (session, lambda f: to_model_rgb(f, (h, w), resize="linear2x-area")),
    ]
    res = _compare(contract, ways, videos, "scores through both resizes", progress)
    return {"model": model.name, **res}


def model_effect(
    fp32: Path, other: Path, videos: Videos, progress: Callable[[str], None] = print
) -> dict[str, Any]:
    """Two models (e.g. fp32 and its int8 version) on the same windows of each video, frames
    resized by the first model's rule: how far apart their fall probabilities are."""
    contract = read_contract(fp32)
    h, w = contract.input_size

    def prepare(f: np.ndarray) -> np.ndarray:
        return to_model_rgb(f, (h, w), resize=contract.resize)

    ways: list[tuple[Any, Prepare]] = [(open_session(p, threads=1), prepare) for p in (fp32, other)]
    res = _compare(contract, ways, videos, "scores of both models", progress)
    return {"model": fp32.name, "other": other.name, **res}


def interleaved_ms(
    paths: dict[str, Path], batches: Sequence[int] = (1, 8), repeats: int = 200
) -> dict[str, dict[str, float]]:
    """Median ms per batch of each model, one ONNX Runtime CPU thread each (as the daemon runs
    them), repeats interleaved so the machine's noise hits all alike; random input windows."""
    import statistics
    import time

    sessions = {k: open_session(v, threads=1) for k, v in paths.items()}
    c = read_contract(next(iter(paths.values())))
    h, w = c.input_size
    rng = np.random.default_rng(0)
    out: dict[str, dict[str, float]] = {}
    for b in batches:
        x = rng.standard_normal((b, 3 * c.window * c.volumes, h, w)).astype(np.float32)
        times: dict[str, list[float]] = {k: [] for k in sessions}
        for s in sessions.values():  # warm-up
            for _ in range(5):
                s.run(None, {INPUT_NAME: x})
        for _ in range(repeats):
            for k, s in sessions.items():
                t0 = time.perf_counter()
                s.run(None, {INPUT_NAME: x})
                times[k].append((time.perf_counter() - t0) * 1000)
        out[f"batch{b}"] = {f"{k}_ms": round(statistics.median(v), 3) for k, v in times.items()}
    return out
