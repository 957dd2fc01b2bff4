"""Hyperframe maths shared by training and the daemon: which frames, in which order, normalised how.

A hyperframe is the last T frames of a camera stacked on the channel axis, oldest first, so
channels 3k..3k+2 hold frame k's R, G, B ("time-major RGB": R0 G0 B0 R1 G1 B1 ...). Every frame is
normalised with the same mean/std. Past either end of a clip the nearest end frame is repeated
(clamp), never wrapped around. This module is the only implementation of those rules.

On the CPU a window is stacked and normalised in NumPy (`WindowStacker`), for training and the
daemon alike; torch is imported only by what needs it (the CUDA stage of `HyperframeBuilder`,
and the tensor helpers training uses), so the CPU daemon runs without loading torch at all.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeAlias

import numpy as np

if TYPE_CHECKING:
    import torch

# ImageNet statistics per RGB channel on the 0-1 scale (pixel / 255), as torchvision gives them.
IMAGENET_MEAN: tuple[float, float, float] = (0.485, 0.456, 0.406)
IMAGENET_STD: tuple[float, float, float] = (0.229, 0.224, 0.225)

Frame: TypeAlias = "np.ndarray | torch.Tensor"


def _check_window(window: int, name: str = "window") -> None:
    if isinstance(window, bool) or not isinstance(window, int) or window < 1 or window % 2 == 0:
        raise ValueError(f"{name} must be an odd integer >= 1 (got {window!r})")


def _check_positive(value: float, name: str) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0 (got {value!r})")


def window_offsets(window: int, interval_s: float) -> list[float]:
    """Offsets in seconds of a window's frames from its centre, oldest first."""
    _check_window(window)
    _check_positive(interval_s, "interval_s")
    half = window // 2
    return [k * interval_s for k in range(-half, half + 1)]


def nearest_index(t: float, fps: float, n_frames: int) -> int:
    """Index of the frame (frame i shown at i / fps) nearest to time `t`, clamped to the clip."""
    # floor(x + 0.5) rounds halves up (Python's round() would round them to even).
    i = math.floor(t * fps + 0.5)
    return min(max(i, 0), n_frames - 1)


def frame_indices(
    n_frames: int, fps: float, center_s: float, window: int, interval_s: float
) -> list[int]:
    """Source-frame indices of the window centred at `center_s`, oldest first, clamped to the clip.

    Frame k of the window is the source frame nearest to ``center_s + k * interval_s`` for
    k = -(window // 2) ... +(window // 2). Sampling by wall-clock interval (not by frame step) keeps
    the window's time span the same whatever the clip's fps.
    """
    if isinstance(n_frames, bool) or not isinstance(n_frames, int) or n_frames < 1:
        raise ValueError(f"n_frames must be an integer >= 1 (got {n_frames!r})")
    _check_positive(fps, "fps")
    _check_window(window)
    _check_positive(interval_s, "interval_s")
    if not (isinstance(center_s, (int, float)) and math.isfinite(center_s)):
        raise ValueError(f"center_s must be a finite number (got {center_s!r})")
    return [nearest_index(center_s + d, fps, n_frames) for d in window_offsets(window, interval_s)]


def suggest_window(action_s: float, interval_s: float) -> int:
    """Suggest T: about half the action's duration in sampling steps, as an odd number >= 3."""
    _check_positive(action_s, "action_s")
    _check_positive(interval_s, "interval_s")
    steps = action_s / 2.0 / interval_s
    nearest_odd = 2 * math.floor((steps - 1.0) / 2.0 + 0.5) + 1
    return max(3, nearest_odd)


def _check_stats(values: Sequence[float], name: str) -> None:
    if len(values) != 3:
        raise ValueError(f"{name} must have 3 values, one per RGB channel (got {len(values)})")
    for v in values:
        if not math.isfinite(v) or v < 0 or v > 1:
            raise ValueError(
                f"{name} is on the 0-1 scale (pixel/255); got {list(values)}: divide by 255"
            )
    if name == "std" and min(values) <= 0:
        raise ValueError(f"std values must be > 0 (got {list(values)})")


def _as_array(frame: Frame) -> np.ndarray:
    if isinstance(frame, np.ndarray):
        return np.ascontiguousarray(frame)
    import torch

    if isinstance(frame, torch.Tensor):
        return frame.detach().cpu().numpy()
    raise ValueError(
        f"a frame must be a NumPy array or a torch tensor (got {type(frame).__name__})"
    )


def use_one_cpu_thread() -> None:
    """Run torch's CPU ops on the calling thread only (the daemon calls this once at start).

    The hyperframe stage is a few small memory-bound ops per batch. Torch's intra-op thread pool
    gains nothing on them and, when the cores are busy with capture threads and ONNX Runtime's
    own pool, its fork/join waits on a descheduled worker: `edge-hf bench` measured a T=3 112x112
    stack at 0.16 ms on one thread and 56 ms with the default two on a busy 2-core machine.
    """
    import torch

    torch.set_num_threads(1)


def _check_arrays(
    windows: Sequence[Sequence[np.ndarray]], volumes: int = 1
) -> tuple[int, int, int, int]:
    """(N, frames, H, W) of windows of uint8 RGB arrays, each `volumes` hyperframes of an odd T
    frames; a ValueError naming what is wrong."""
    if len(windows) == 0:
        raise ValueError("no windows to stack")
    for w in windows:
        if len(w) % volumes:
            raise ValueError(f"a window of {len(w)} frames is not {volumes} hyperframes")
        _check_window(len(w) // volumes, "the number of frames in a hyperframe")
        if len(w) != len(windows[0]):
            raise ValueError("all windows must have the same number of frames")
    first = windows[0][0]
    if not isinstance(first, np.ndarray):
        raise ValueError(f"a frame must be a NumPy array (got {type(first).__name__})")
    if first.dtype != np.uint8:
        raise ValueError(f"frames must be uint8 RGB (got dtype {first.dtype})")
    if first.ndim != 3 or first.shape[2] != 3:
        raise ValueError(f"frames must have shape (H, W, 3) (got {tuple(first.shape)})")
    for w in windows:
        for f in w:
            if not isinstance(f, np.ndarray) or f.shape != first.shape or f.dtype != first.dtype:
                raise ValueError(
                    "all frames must share shape and dtype: "
                    f"{tuple(first.shape)}/{first.dtype} vs {getattr(f, 'shape', '?')}"
                )
    return len(windows), len(windows[0]), first.shape[0], first.shape[1]


class WindowStacker:
    """Stacks windows of uint8 RGB frames into normalised (N, 3T, H, W) float32 arrays, in NumPy.

    The CPU implementation of the window rule for training and the daemon: one strided copy
    does the HWC->CHW permute and the uint8->float conversion, then (x - 255 mean) / (255 std)
    in place, the same mean/std for every frame. Allocates nothing once `out` is passed in.
    """

    def __init__(
        self,
        mean: Sequence[float] = IMAGENET_MEAN,
        std: Sequence[float] = IMAGENET_STD,
        volumes: int = 1,
    ) -> None:
        _check_stats(mean, "mean")
        _check_stats(std, "std")
        # A hyper-volume model's window is `volumes` consecutive hyperframes of T frames: their
        # V*T frames in time order, stacked on channels (block v = hyperframe v, oldest first).
        self.volumes = volumes
        shape = (1, 1, 3, 1, 1)
        self._mean255 = np.asarray([255.0 * m for m in mean], np.float32).reshape(shape)
        self._std255 = np.asarray([255.0 * s for s in std], np.float32).reshape(shape)

    def stack_batch(
        self, windows: Sequence[Sequence[np.ndarray]], out: np.ndarray | None = None
    ) -> np.ndarray:
        """N windows of T (V*T) uint8 RGB frames (H, W, 3) as normalised (N, 3T, H, W)
        ((N, 3VT, H, W)) float32."""
        n, t, h, w = _check_arrays(windows, self.volumes)
        if out is None:
            out = np.empty((n, 3 * t, h, w), np.float32)
        elif out.shape != (n, 3 * t, h, w) or out.dtype != np.float32:
            raise ValueError(
                f"out must be float32 of shape {(n, 3 * t, h, w)} "
                f"(got {out.dtype} {tuple(out.shape)})"
            )
        blocks = out.reshape(n, t, 3, h, w)
        for i, win in enumerate(windows):
            for k, f in enumerate(win):
                blocks[i, k] = f.transpose(2, 0, 1)  # one strided copy: permute + to float
        blocks -= self._mean255
        blocks /= self._std255
        return out


class HyperframeBuilder:
    """Stacks windows of uint8 RGB frames into normalised (N, 3T, H, W) float32 tensors.

    Keeps its mean/std tensors and, on CUDA, a pinned staging buffer, so a daemon calling it for
    every batch allocates nothing on the hot path once the batch size has been seen.
    """

    def __init__(
        self,
        mean: Sequence[float] = IMAGENET_MEAN,
        std: Sequence[float] = IMAGENET_STD,
        device: torch.device | str | None = None,
        volumes: int = 1,
    ) -> None:
        import torch

        # the CPU path (and the checks of mean/std)
        self._numpy = WindowStacker(mean, std, volumes)
        self.device = torch.device(device) if device is not None else torch.device("cpu")
        # (x / 255 - mean) / std computed as (x - 255 mean) / (255 std), in place on the output.
        shape = (1, 1, 3, 1, 1)
        self._mean255 = torch.tensor([255.0 * m for m in mean], device=self.device).view(shape)
        self._std255 = torch.tensor([255.0 * s for s in std], device=self.device).view(shape)
        self._staging: torch.Tensor | None = None

    def _stage(self, tensors: list[list[torch.Tensor]]) -> torch.Tensor:
        """Gather the uint8 frames into one (N, T, H, W, 3) tensor on the target device."""
        import torch

        n, t = len(tensors), len(tensors[0])
        shape = (n, t, *tensors[0][0].shape)
        # On CUDA: one pinned host buffer, then a single non-blocking upload of uint8 (4x fewer
        # bytes than uploading floats); conversion and normalisation then run on the GPU.
        if self._staging is None or tuple(self._staging.shape) != shape:
            self._staging = torch.empty(shape, dtype=torch.uint8, pin_memory=True)
        for i, w in enumerate(tensors):
            for k, f in enumerate(w):
                self._staging[i, k].copy_(f)
        return self._staging.to(self.device, non_blocking=True)

    def stack_batch(
        self, windows: Sequence[Sequence[Frame]], out: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Stack N windows of T uint8 RGB frames (H, W, 3) into normalised (N, 3T, H, W) float32."""
        import torch

        arrays = [[_as_array(f) for f in w] for w in windows]
        if self.device.type == "cpu":  # one implementation on the CPU: the NumPy one
            if out is None:
                return torch.from_numpy(self._numpy.stack_batch(arrays))
            if out.is_cuda or not out.is_contiguous():
                raise ValueError("out must be a contiguous CPU tensor for a CPU builder")
            self._numpy.stack_batch(arrays, out.numpy())  # checks out's shape and dtype
            return out
        n, t, h, w = _check_arrays(arrays, self._numpy.volumes)
        tensors = [[torch.from_numpy(f) for f in win] for win in arrays]
        if out is None:
            out = torch.empty((n, 3 * t, h, w), dtype=torch.float32, device=self.device)
        elif out.shape != (n, 3 * t, h, w) or out.dtype != torch.float32:
            raise ValueError(
                f"out must be float32 of shape {(n, 3 * t, h, w)} "
                f"(got {out.dtype} {tuple(out.shape)})"
            )
        staged = self._stage(tensors)
        # One strided copy does the HWC->CHW permute and the uint8->float conversion together.
        blocks = out.view(n, t, 3, h, w)
        blocks.copy_(staged.permute(0, 1, 4, 2, 3))
        blocks.sub_(self._mean255).div_(self._std255)
        return out


def stack_frames(
    frames: Sequence[Frame],
    mean: Sequence[float] = IMAGENET_MEAN,
    std: Sequence[float] = IMAGENET_STD,
    device: torch.device | str | None = None,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Stack T uint8 RGB frames (H, W, 3), oldest first, into one normalised (3T, H, W) tensor.

    `mean`/`std` are per RGB channel on the 0-1 scale (ImageNet's by default) and the same for
    every frame. Channels 3k..3k+2 are frame k's R, G, B.
    """
    batch_out = out.unsqueeze(0) if out is not None else None
    if out is not None and out.dim() != 3:
        raise ValueError(f"out must have shape (3T, H, W) (got {tuple(out.shape)})")
    return HyperframeBuilder(mean, std, device).stack_batch([frames], batch_out)[0]


def time_shuffle(
    hyperframes: torch.Tensor, generator: torch.Generator | None = None
) -> torch.Tensor:
    """Put the T frame blocks of each sample (N, 3T, H, W) in a fresh random order.

    Each frame keeps its R, G, B together; only the time order is destroyed. Used for the
    time-shuffled control in `edge-hf diagnose`.
    """
    import torch

    n, c, h, w = hyperframes.shape
    t = c // 3
    blocks = hyperframes.view(n, t, 3, h, w)
    order = torch.argsort(torch.rand(n, t, generator=generator), dim=1).to(hyperframes.device)
    index = order.view(n, t, 1, 1, 1).expand(n, t, 3, h, w)
    return torch.gather(blocks, 1, index).reshape(n, c, h, w)
