"""Benchmarks, offline part: window preparation and inference, ours vs the naive way vs the floor.

Every figure is the median of repeated timings with the interquartile range as its spread, and
every ratio compares numbers measured side by side in the same run (the machine may be shared).
The live part (cameras per machine, capture -> MQTT latency, RSS) is in `edge_hf.bench.live`.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch

from edge_hf.core.contract import INPUT_NAME, ModelContract
from edge_hf.core.hyperframe import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    HyperframeBuilder,
    use_one_cpu_thread,
)
from edge_hf.core.runtime import open_session
from edge_hf.core.video import RESIZE, shrink, to_model_rgb
from edge_hf.daemon.ring import FrameRing

CAMERA_FRAME = (480, 640)  # (H, W) of the BGR frames a camera delivers in these benchmarks


@dataclass(frozen=True)
class Timing:
    """Milliseconds per call: median over `repeats` repeats, and the quartiles as the spread."""

    median_ms: float
    p25_ms: float
    p75_ms: float
    repeats: int

    def as_dict(self) -> dict[str, float]:
        return {k: round(v, 5) if isinstance(v, float) else v for k, v in asdict(self).items()}


def time_it(fn: Callable[[], object], repeats: int = 7, target_s: float = 0.05) -> Timing:
    """Time `fn`: each repeat runs it enough times to last about `target_s`, after a warm-up."""
    fn()
    t0 = time.perf_counter()
    fn()
    once = max(time.perf_counter() - t0, 1e-6)
    number = max(1, int(target_s / once))
    per_call = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        per_call.append((time.perf_counter() - t0) * 1000 / number)
    q = statistics.quantiles(per_call, n=4) if repeats > 1 else per_call * 3
    return Timing(statistics.median(per_call), q[0], q[2], repeats)


def copy_bandwidth_gbs(mib: int = 256, repeats: int = 5) -> float:
    """Measured memory bandwidth of a large copy, bytes read + bytes written per second (GB/s)."""
    src = np.ones(mib * 2**20, np.uint8)
    dst = np.empty_like(src)
    t = time_it(lambda: np.copyto(dst, src), repeats=repeats, target_s=0.2)
    return 2 * src.nbytes / (t.median_ms / 1000) / 1e9


def matmul_gflops(threads: int, n: int = 1024, repeats: int = 5) -> float:
    """Measured float32 matrix-multiply rate on `threads` threads (GFLOP/s): the compute ceiling."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a, b = torch.randn(n, n), torch.randn(n, n)
        t = time_it(lambda: torch.mm(a, b), repeats=repeats, target_s=0.2)
    finally:
        torch.set_num_threads(before)
    return 2 * n**3 / (t.median_ms / 1000) / 1e9


# ---------------------------------------------------------------------- window preparation


def naive_window(
    frames_bgr: Sequence[np.ndarray],
    size: tuple[int, int],
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
    resize: str = RESIZE,
) -> torch.Tensor:
    """The naive way to a (1, 3T, H, W) window: per-frame resize (the model's rule) and colour
    conversion, concatenate, normalise in NumPy, then `torch.from_numpy`. It recomputes every
    frame for every window."""
    h, w = size
    rgb = [cv2.cvtColor(shrink(f, (w, h), resize), cv2.COLOR_BGR2RGB) for f in frames_bgr]
    x = np.concatenate([f.transpose(2, 0, 1) for f in rgb], axis=0).astype(np.float32) / 255.0
    t = len(frames_bgr)
    m = np.tile(np.asarray(mean, np.float32), t)[:, None, None]
    x = (x - m) / np.tile(np.asarray(std, np.float32), t)[:, None, None]
    return torch.from_numpy(x)[None]


class OurWindow:
    """The daemon's way, part for part: each new camera frame is resized once into the camera's
    ring (capture thread), then the window is read from the ring and stacked by the shared
    `HyperframeBuilder` (one strided copy, in-place normalisation, uint8 upload on CUDA)."""

    def __init__(self, window: int, size: tuple[int, int], device: str = "cpu") -> None:
        self.window, self.size = window, size
        self.ring = FrameRing(max(4 * window, 16), (*size, 3))
        self.builder = HyperframeBuilder(IMAGENET_MEAN, IMAGENET_STD, device)
        self.t = 0.0

    def __call__(self, new_frame_bgr: np.ndarray) -> torch.Tensor:
        self.t += 0.1
        self.ring.write(to_model_rgb(new_frame_bgr, self.size), self.t)
        w = self.ring.window(self.window)
        assert w is not None  # primed by the caller
        return self.builder.stack_batch([w.frames])


def _camera_frames(n: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    base = cv2.GaussianBlur(rng.integers(0, 256, (*CAMERA_FRAME, 3), np.uint8), (0, 0), 3)
    return [np.roll(base, 4 * i, axis=1) for i in range(n)]  # a scene that moves a little


def prep_rows(
    windows: Sequence[int] = (1, 3, 5),
    sizes: Sequence[int] = (112, 224),
    repeats: int = 7,
    bandwidth_gbs: float | None = None,
) -> list[dict[str, Any]]:
    """Per window: ours vs naive on CPU (and CUDA when present), and the memory-traffic floor."""
    bw = bandwidth_gbs or copy_bandwidth_gbs()
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    frames = _camera_frames(8)
    return [
        _prep_row(device, t, s, frames, repeats, bw)
        for device in devices
        for t in windows
        for s in sizes
    ]


def _prep_row(
    device: str, t: int, s: int, frames: list[np.ndarray], repeats: int, bw_gbs: float
) -> dict[str, Any]:
    size = (s, s)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    ours = OurWindow(t, size, device)
    for f in frames[:t]:
        mine = ours(f)
    if not torch.allclose(mine.cpu(), naive_window(frames[:t], size), atol=1e-4):
        raise AssertionError("our window and the naive window differ: the comparison is void")
    k = [0]

    def run_ours() -> None:
        k[0] += 1
        ours(frames[k[0] % len(frames)])
        sync()

    def run_naive() -> None:
        k[0] += 1
        i = k[0] % (len(frames) - t)
        naive_window(frames[i : i + t], size).to(device)
        sync()

    before = torch.get_num_threads()
    default_t = time_it(run_ours, repeats)  # torch's default thread pool, for comparison
    use_one_cpu_thread()  # as the daemon runs it
    try:
        ours_t = time_it(run_ours, repeats)
        naive_t = time_it(run_naive, repeats)
        # Ours in its two parts: the capture thread's resize, and the window stage proper.
        resize_t = time_it(lambda: to_model_rgb(frames[0], size), repeats)
        window = ours.ring.window(t)
        assert window is not None

        def run_stack() -> None:
            ours.builder.stack_batch([window.frames])
            sync()

        stack_t = time_it(run_stack, repeats)
    finally:
        torch.set_num_threads(before)
    # The least our path must move: read the new camera frame, write its resized copy, read the
    # T resized frames, write the 3T-channel float32 window.
    stack_bytes = s * s * 3 * t + 12 * t * s * s
    nbytes = CAMERA_FRAME[0] * CAMERA_FRAME[1] * 3 + s * s * 3 + stack_bytes
    floor_ms = nbytes / (bw_gbs * 1e9) * 1000
    stack_floor_ms = stack_bytes / (bw_gbs * 1e9) * 1000
    return {
        "device": device,
        "window": t,
        "size": s,
        "ours": ours_t.as_dict(),
        "naive": naive_t.as_dict(),
        "ours_default_threads": default_t.as_dict(),
        "floor_ms": round(floor_ms, 5),
        "bytes": nbytes,
        "ours_over_naive": round(ours_t.median_ms / naive_t.median_ms, 3),
        "ours_over_floor": round(ours_t.median_ms / floor_ms, 1),
        "resize": resize_t.as_dict(),
        "stack": stack_t.as_dict(),
        "stack_floor_ms": round(stack_floor_ms, 5),
        "stack_over_floor": round(stack_t.median_ms / stack_floor_ms, 1),
    }


# ---------------------------------------------------------------------- inference


def count_flops(model: torch.nn.Module, x: torch.Tensor) -> int:
    """Multiply-adds x 2 of every Conv2d and Linear layer in one forward pass of `x`."""
    total = [0]

    def hook(mod: torch.nn.Module, _inp: Any, out: torch.Tensor) -> None:
        if isinstance(mod, torch.nn.Conv2d):
            k = mod.kernel_size[0] * mod.kernel_size[1] * mod.in_channels // mod.groups
            total[0] += 2 * out.numel() * k
        elif isinstance(mod, torch.nn.Linear):
            total[0] += 2 * out.numel() * mod.in_features

    handles = [
        m.register_forward_hook(hook)
        for m in model.modules()
        if isinstance(m, torch.nn.Conv2d | torch.nn.Linear)
    ]
    try:
        with torch.inference_mode():
            model(x)
    finally:
        for h in handles:
            h.remove()
    return total[0] // x.shape[0]


def _ort_session(path: Path, threads: int) -> Any:
    return open_session(path, threads=threads)


def inference_rows(
    contract: ModelContract,
    windows: Sequence[int] = (1, 3),
    batches: Sequence[int] = (1, 8),
    repeats: int = 7,
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """ORT vs PyTorch eager for the shipped backbone at each T, and the FLOP floor.

    The networks are built fresh (random weights: speed does not depend on them; an ensemble's
    members averaged as `export_onnx` does) and exported with the same code as `edge-hf
    export`. Per-window milliseconds; threads = this machine's cores.
    """
    from edge_hf.training.export import ProbabilityMean, write_onnx
    from edge_hf.training.models import build_model

    def network(t: int) -> torch.nn.Module:
        nets = [
            build_model(contract.backbone, t, len(contract.classes))
            for _ in range(contract.members)
        ]
        return (nets[0] if len(nets) == 1 else ProbabilityMean(nets)).eval()

    name = contract.backbone + (f" x{contract.members}" if contract.members > 1 else "")

    cores = os.cpu_count() or 1
    rates = {n: matmul_gflops(n) for n in sorted({1, cores})}
    h, w = contract.input_size
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for t in windows:
            model = network(t)
            flops = count_flops(model, torch.zeros(1, 3 * t, h, w))
            onnx_path = Path(tmp) / f"t{t}.onnx"
            write_onnx(model, replace(contract, window=t, volumes=1), onnx_path)
            for threads in sorted({1, cores}):
                session = _ort_session(onnx_path, threads)
                for n in batches:
                    row = _inference_row(
                        model, session, n, threads, flops / 1e9, rates[threads], repeats
                    )
                    rows.append({"backbone": name, "window": t, **row})
    return rows, {f"matmul_gflops_{k}_threads": round(v, 1) for k, v in rates.items()}


def _inference_row(
    model: torch.nn.Module,
    session: Any,
    n: int,
    threads: int,
    gflops: float,
    rate: float,
    repeats: int,
) -> dict[str, Any]:
    """Per-window ms of ORT and eager PyTorch on a batch of `n`, and the FLOP floor."""
    c, h, w = session.get_inputs()[0].shape[1:]
    x = torch.randn(n, c, h, w)
    xn = x.numpy()
    ort_t = time_it(lambda: session.run(None, {INPUT_NAME: xn}), repeats)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with torch.inference_mode():
            eager_t = time_it(lambda: model(x), repeats)
    finally:
        torch.set_num_threads(before)
    floor_ms = gflops * n / rate * 1000
    return {
        "input": f"{h}x{w}",
        "threads": threads,
        "batch": n,
        "gflops_per_window": round(gflops, 4),
        "ort": _per_window(ort_t, n),
        "eager": _per_window(eager_t, n),
        "floor_ms": round(floor_ms / n, 5),
        "ort_over_eager": round(ort_t.median_ms / eager_t.median_ms, 3),
        "ort_over_floor": round(ort_t.median_ms / floor_ms, 1),
    }


def _per_window(t: Timing, n: int) -> dict[str, float]:
    return Timing(t.median_ms / n, t.p25_ms / n, t.p75_ms / n, t.repeats).as_dict()
