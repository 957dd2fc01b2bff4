"""The hyperframe core: window selection, clamping, channel stacking and shared normalisation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from edge_hf.core.hyperframe import (
    IMAGENET_MEAN,
    IMAGENET_STD,
    HyperframeBuilder,
    frame_indices,
    stack_frames,
    suggest_window,
    time_shuffle,
)
from edge_hf.core.video import UNKNOWN_FPS, file_fps, tick_frames

MEAN = np.array(IMAGENET_MEAN, dtype=np.float64)
STD = np.array(IMAGENET_STD, dtype=np.float64)


def _reference(frames: list[np.ndarray]) -> np.ndarray:
    """Straightforward NumPy version: per frame HWC->CHW, (x/255 - mean)/std, concat on channels."""
    chw = [((f.astype(np.float64) / 255.0 - MEAN) / STD).transpose(2, 0, 1) for f in frames]
    return np.concatenate(chw, axis=0)


def _frames(t: int, h: int = 6, w: int = 8, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for _ in range(t)]


# ---------------------------------------------------------------- frame_indices


def test_frame_indices_centre_of_a_30fps_clip() -> None:
    # 100 ms at 30 fps is 3 frames; centre at 1.0 s is frame 30.
    assert frame_indices(300, 30.0, 1.0, 3, 0.1) == [27, 30, 33]
    assert frame_indices(300, 30.0, 1.0, 5, 0.1) == [24, 27, 30, 33, 36]


def test_frame_indices_clamp_at_both_ends_never_wrap() -> None:
    assert frame_indices(100, 10.0, 0.0, 5, 0.1) == [0, 0, 0, 1, 2]
    assert frame_indices(100, 10.0, 9.9, 5, 0.1) == [97, 98, 99, 99, 99]
    # Far outside the clip: every index is the end frame, never something from the other end.
    assert frame_indices(100, 10.0, -50.0, 3, 0.1) == [0, 0, 0]
    assert frame_indices(100, 10.0, 500.0, 3, 0.1) == [99, 99, 99]


def test_single_frame_clip_and_single_frame_window() -> None:
    assert frame_indices(1, 25.0, 3.0, 7, 0.2) == [0] * 7
    assert frame_indices(50, 25.0, 1.0, 1, 0.2) == [25]


def test_same_time_span_at_30_and_10_fps() -> None:
    """A model trained at 30 fps sees the same span from a 10 fps camera: sample by seconds."""
    for centre in (0.5, 1.0, 2.3, 4.0):
        i30 = frame_indices(300, 30.0, centre, 5, 0.1)
        i10 = frame_indices(100, 10.0, centre, 5, 0.1)
        t30 = [i / 30.0 for i in i30]
        t10 = [i / 10.0 for i in i10]
        assert t30 == pytest.approx(t10, abs=1 / 60 + 1e-9)
        assert t30[-1] - t30[0] == pytest.approx(0.4, abs=1 / 30 + 1e-9)


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"window": 4}, "window"),
        ({"window": 0}, "window"),
        ({"window": -3}, "window"),
        ({"window": 3.0}, "window"),
        ({"fps": 0.0}, "fps"),
        ({"fps": -30.0}, "fps"),
        ({"fps": math.nan}, "fps"),
        ({"interval_s": 0.0}, "interval_s"),
        ({"n_frames": 0}, "n_frames"),
        ({"center_s": math.inf}, "center_s"),
    ],
)
def test_frame_indices_rejects_bad_arguments_naming_them(kwargs: dict, name: str) -> None:
    args = {"n_frames": 10, "fps": 30.0, "center_s": 0.1, "window": 3, "interval_s": 0.1}
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        frame_indices(**args)


@given(
    n_frames=st.integers(1, 5000),
    fps=st.floats(1.0, 120.0),
    center_s=st.floats(-10.0, 200.0),
    half=st.integers(0, 6),
    interval_s=st.floats(0.005, 1.0),
)
def test_frame_indices_properties(
    n_frames: int, fps: float, center_s: float, half: int, interval_s: float
) -> None:
    window = 2 * half + 1
    idx = frame_indices(n_frames, fps, center_s, window, interval_s)
    assert len(idx) == window
    assert all(0 <= i < n_frames for i in idx)
    assert idx == sorted(idx), "oldest first, and clamping never wraps"
    for k, i in zip(range(-half, half + 1), idx, strict=True):
        t = center_s + k * interval_s
        last = (n_frames - 1) / fps
        if t <= 0:
            assert i == 0
        elif t >= last:
            assert i == n_frames - 1
        else:
            # The nearest frame: no other frame is closer to the wanted time.
            assert abs(i / fps - t) <= 0.5 / fps + 1e-9


# ---------------------------------------------------------------- suggest_window


@pytest.mark.parametrize(
    ("action_s", "interval_s", "expected"),
    [(1.0, 0.1, 5), (0.6, 0.1, 3), (0.2, 0.1, 3), (1.4, 0.1, 7), (2.0, 0.2, 5), (3.0, 0.1, 15)],
)
def test_suggest_window_examples(action_s: float, interval_s: float, expected: int) -> None:
    assert suggest_window(action_s, interval_s) == expected


@given(st.floats(0.01, 30.0), st.floats(0.01, 1.0))
def test_suggest_window_is_odd_at_least_3_and_near_half_the_action(a: float, i: float) -> None:
    t = suggest_window(a, i)
    assert t >= 3 and t % 2 == 1
    assert t <= max(3, a / 2 / i + 1 + 1e-9)
    assert t >= a / 2 / i - 1 - 1e-9


def test_suggest_window_rejects_nonsense() -> None:
    with pytest.raises(ValueError, match="action_s"):
        suggest_window(0.0, 0.1)
    with pytest.raises(ValueError, match="interval_s"):
        suggest_window(1.0, -0.1)


# ---------------------------------------------------------------- stack_frames


@pytest.mark.parametrize("t", [1, 3, 5])
def test_stack_matches_reference_channel_concat(t: int) -> None:
    frames = _frames(t)
    out = stack_frames(frames)
    assert out.dtype == torch.float32
    assert tuple(out.shape) == (3 * t, 6, 8), "channels, not side by side"
    np.testing.assert_allclose(out.numpy(), _reference(frames), rtol=1e-5, atol=1e-5)


def test_channel_blocks_are_frames_in_time_order_rgb_within() -> None:
    """Block k is frame k (oldest first) and its channels are R, G, B."""
    frames = []
    for k in range(5):
        f = np.zeros((4, 4, 3), dtype=np.uint8)
        f[..., 0] = 10 * k  # R encodes time
        f[..., 1] = 200  # G constant
        f[..., 2] = 100  # B constant
        frames.append(f)
    out = stack_frames(frames).numpy()
    for k in range(5):
        r, g, b = out[3 * k], out[3 * k + 1], out[3 * k + 2]
        assert np.allclose(r, (10 * k / 255 - MEAN[0]) / STD[0], atol=1e-5)
        assert np.allclose(g, (200 / 255 - MEAN[1]) / STD[1], atol=1e-5)
        assert np.allclose(b, (100 / 255 - MEAN[2]) / STD[2], atol=1e-5)


def test_static_scene_gives_identical_channel_blocks() -> None:
    """Same stats for every frame: a still camera gives bit-identical blocks (no per-frame norm)."""
    frame = _frames(1, 16, 16, seed=3)[0]
    out = stack_frames([frame, frame.copy(), frame.copy()])
    assert torch.equal(out[0:3], out[3:6]) and torch.equal(out[3:6], out[6:9])


def test_brightness_change_survives_normalisation() -> None:
    """Per-frame normalisation would erase a lighting step; shared stats must keep it exactly."""
    dark = np.full((8, 8, 3), 50, np.uint8)
    bright = np.full((8, 8, 3), 150, np.uint8)
    out = stack_frames([dark, dark, bright]).numpy()
    step = out[6:9].mean(axis=(1, 2)) - out[0:3].mean(axis=(1, 2))
    np.testing.assert_allclose(step, 100 / 255 / STD, rtol=1e-5)


def test_torch_tensors_and_out_buffer() -> None:
    frames = _frames(3, seed=1)
    buf = torch.full((9, 6, 8), -1.0)
    out = stack_frames([torch.from_numpy(f) for f in frames], out=buf)
    assert out.data_ptr() == buf.data_ptr(), "writes into the caller's buffer"
    np.testing.assert_allclose(buf.numpy(), _reference(frames), rtol=1e-5, atol=1e-5)


def test_custom_stats_are_used_for_every_frame() -> None:
    frames = _frames(3, seed=2)
    out = stack_frames(frames, mean=(0.5, 0.5, 0.5), std=(0.5, 0.5, 0.5))
    expected = np.concatenate([((f / 255.0 - 0.5) / 0.5).transpose(2, 0, 1) for f in frames])
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("frames", "match"),
    [
        (
            [np.zeros((4, 4, 3), np.uint8), np.zeros((4, 5, 3), np.uint8)] * 2
            + [np.zeros((4, 4, 3), np.uint8)],
            "shape",
        ),
        ([np.zeros((4, 4, 3), np.uint8)] * 2 + [np.zeros((4, 4, 3), np.float32)], "dtype"),
        ([np.zeros((4, 4, 3), np.float32)] * 3, "uint8"),
        ([np.zeros((4, 4, 4), np.uint8)] * 3, r"\(H, W, 3\)"),
        ([np.zeros((4, 4, 3), np.uint8)] * 2, "odd"),
        ([np.zeros((4, 4, 3), np.uint8)] * 4, "odd"),
        ([], "odd"),
    ],
)
def test_stack_rejects_bad_frames(frames: list, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        stack_frames(frames)


def test_stats_on_the_wrong_scale_are_refused() -> None:
    with pytest.raises(ValueError, match="0-1 scale"):
        stack_frames(_frames(3), mean=(123.7, 116.3, 103.5))
    with pytest.raises(ValueError, match="std"):
        stack_frames(_frames(3), std=(0.2, 0.0, 0.2))


def test_batch_equals_single_windows() -> None:
    builder = HyperframeBuilder()
    windows = [_frames(3, seed=s) for s in range(4)]
    batch = builder.stack_batch(windows)
    assert tuple(batch.shape) == (4, 9, 6, 8)
    for i, w in enumerate(windows):
        assert torch.equal(batch[i], stack_frames(w))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu() -> None:
    windows = [_frames(5, 32, 32, seed=s) for s in range(3)]
    gpu = HyperframeBuilder(device="cuda").stack_batch(windows)
    assert gpu.device.type == "cuda"
    torch.testing.assert_close(gpu.cpu(), HyperframeBuilder().stack_batch(windows))


# ---------------------------------------------------------------- time_shuffle


def test_time_shuffle_moves_whole_frames_and_differs_per_sample() -> None:
    n, t = 64, 5
    x = torch.zeros(n, 3 * t, 2, 2)
    for k in range(t):  # frame k: R = k, G = 10 + k, B = 20 + k
        x[:, 3 * k] = k
        x[:, 3 * k + 1] = 10 + k
        x[:, 3 * k + 2] = 20 + k
    y = time_shuffle(x, torch.Generator().manual_seed(0))
    r = y[:, 0::3, 0, 0]
    assert torch.equal(y[:, 1::3, 0, 0], r + 10) and torch.equal(y[:, 2::3, 0, 0], r + 20)
    assert torch.equal(r.sort(dim=1).values, torch.arange(t).float().expand(n, t))
    orders = {tuple(row.tolist()) for row in r}
    assert len(orders) > 10, "a fresh order per sample, not one fixed permutation"


@given(
    st.integers(1, 200),
    st.sampled_from([7.0, 10.0, 12.5, 25.0, 29.97, 30.0]),
    st.sampled_from([0.05, 0.1, 0.2, 0.5]),
)
def test_file_ticks_get_the_frame_indices_frame(n: int, fps: float, interval_s: float) -> None:
    """Sampling a file by ticks (replay, pose caches, experiments) is the windows' rule."""
    got = list(tick_frames(iter(range(n)), fps, interval_s))
    assert got, "the first tick always has the first frame"
    for k, (t, i) in enumerate(got):
        assert t == k * interval_s
        assert i == frame_indices(n, fps, t, 1, interval_s)[0]
    # it stops at the last tick whose nearest frame is in the file
    assert math.floor(len(got) * interval_s * fps + 0.5) >= n


@pytest.mark.parametrize("reported", [0.0, float("nan"), -5.0, 1000.0])
def test_a_file_without_a_usable_frame_rate_plays_at_30(reported: float) -> None:
    assert file_fps(reported, "x.mp4") == UNKNOWN_FPS == 30.0
    assert file_fps(24.0, "x.mp4") == 24.0
