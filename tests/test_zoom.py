"""Motion zoom: the crop follows where people move, stays put when they lie still."""

from __future__ import annotations

from pathlib import Path

import cv2
import numpy as np
import pytest

from edge_hf.core.video import VideoError
from experiments.realbench.zoom import MotionZoom, ZoomSettings, zoom_video

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
W, H = 640, 360


def _scene(person_xy: tuple[int, int] | None, seed: int = 0) -> np.ndarray:
    """A textured room (the same every call) with a dark 24x72 'person' at `person_xy`."""
    rng = np.random.default_rng(0)
    frame = cv2.GaussianBlur(rng.integers(90, 200, (H, W, 3), dtype=np.uint8), (9, 9), 0)
    noise = np.random.default_rng(seed).integers(-2, 3, frame.shape)  # sensor noise
    frame = np.clip(frame.astype(int) + noise, 0, 255).astype(np.uint8)
    if person_xy is not None:
        x, y = person_xy
        frame[y : y + 72, x : x + 24] = (30, 30, 40)
    return frame


def _walk(zoom: MotionZoom, xs: range, y: int) -> tuple[int, int, int, int]:
    crop = zoom.crop
    for i, x in enumerate(xs):
        crop = zoom.update(_scene((x, y), seed=i))
    return crop


def _contains(crop: tuple[int, int, int, int], x0: int, y0: int, x1: int, y1: int) -> bool:
    cx, cy, cw, ch = crop
    return cx <= x0 and cy <= y0 and x1 <= cx + cw and y1 <= cy + ch


def test_a_still_scene_keeps_the_whole_frame() -> None:
    zoom = MotionZoom((W, H), 0.1, ZoomSettings())
    for i in range(30):
        crop = zoom.update(_scene(None, seed=i))
    assert crop == (0, 0, W, H)


def test_the_crop_follows_a_person_walking_and_keeps_the_frame_shape() -> None:
    s = ZoomSettings()
    zoom = MotionZoom((W, H), 0.1, s)
    crop = _walk(zoom, range(40, 120, 4), 200)  # 20 steps in the lower left
    x, y, w, h = crop
    assert w < W, "a small person in a corner should be zoomed in on"
    assert w >= s.min_fraction * W - 1 and h >= s.min_fraction * H - 1
    assert abs(w / h - W / H) < 0.02, "the crop keeps the frame's aspect ratio"
    assert x >= 0 and y >= 0 and x + w <= W and y + h <= H
    assert _contains(crop, 116, 200, 140, 272), "the person's last position is in the crop"
    assert _contains(crop, 80, 200, 140, 272), "so is where they walked in the last 1.5 s"


def test_the_crop_stays_while_the_person_stays_in_it() -> None:
    zoom = MotionZoom((W, H), 0.1, ZoomSettings())
    crop = _walk(zoom, range(40, 120, 4), 200)
    for i in range(30):  # 3 s down on the spot, one hand moving: motion inside the crop
        frame = _scene((116, 200), seed=100 + i)
        frame[200:216, 116 + 8 * (i % 2) : 132 + 8 * (i % 2)] = (220, 220, 220)
        assert zoom.update(frame) == crop
    for i in range(50):  # 5 s lying still: nothing moves
        assert zoom.update(_scene((116, 200), seed=200 + i)) == crop


def test_the_crop_moves_when_motion_leaves_it() -> None:
    zoom = MotionZoom((W, H), 0.1, ZoomSettings())
    first = _walk(zoom, range(40, 120, 4), 200)
    assert not _contains(first, 560, 20, 600, 92)
    moved = _walk(zoom, range(520, 580, 4), 20)  # someone walks in at the top right
    assert _contains(moved, 576, 20, 600, 92), (first, moved)


def test_settings_out_of_range_are_refused() -> None:
    with pytest.raises(ValueError, match="min_fraction"):
        ZoomSettings(min_fraction=0.0)
    with pytest.raises(ValueError, match="memory_s"):
        ZoomSettings(memory_s=0.0)


def test_a_frame_of_another_size_is_refused() -> None:
    zoom = MotionZoom((W, H), 0.1, ZoomSettings())
    with pytest.raises(ValueError, match="640x360"):
        zoom.update(np.zeros((480, 640, 3), np.uint8))


def test_zoom_video_writes_every_frame_of_real_footage(tmp_path: Path) -> None:
    src = SHARED / "gmdcsa24" / "S1_Fall_15.mp4"
    stats = zoom_video(src, None, tmp_path / "z.avi", 0.1, 320, ZoomSettings())
    cap = cv2.VideoCapture(str(src))
    n_src, aspect = int(cap.get(cv2.CAP_PROP_FRAME_COUNT)), cap.get(3) / cap.get(4)
    cap.release()
    out = cv2.VideoCapture(str(tmp_path / "z.avi"))
    frames = []
    while True:
        ok, f = out.read()
        if not ok:
            break
        frames.append(f)
    assert stats["frames"] == len(frames) == n_src
    assert frames[0].shape[1] == 320 and abs(320 / frames[0].shape[0] - aspect) < 0.02
    assert 1.0 < stats["zoom_mean"] <= 2.0, "a person falling in a room is zoomed in on"
    assert not (tmp_path / "z.part.avi").exists()


def test_zoom_video_names_a_file_that_is_not_a_video(tmp_path: Path) -> None:
    bad = tmp_path / "notes.avi"
    bad.write_text("not a video")
    with pytest.raises(VideoError, match=r"notes\.avi"):
        zoom_video(bad, None, tmp_path / "z.avi", 0.1, 320, ZoomSettings())
