"""The conditions benchmark's transforms (#40): each does what its docstring says to a real frame,
and a rendered clip holds the frames the daemon would sample."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import cv2
import numpy as np
import pytest

from experiments.realbench import conditions as cond
from experiments.realbench.items import Item
from tests.conftest import SHARED_DATA

CLIP = SHARED_DATA / "gmdcsa24" / "S3_Fall_01.mp4"
needs_gmdcsa = pytest.mark.skipif(not CLIP.is_file(), reason="../shared/data/gmdcsa24 absent")


@pytest.fixture(scope="module")
def frame() -> np.ndarray:
    cap = cv2.VideoCapture(str(CLIP))
    ok, f = cap.read()
    cap.release()
    assert ok
    return cv2.resize(f, (640, 360), interpolation=cv2.INTER_AREA)


@needs_gmdcsa
def test_night_is_one_grey_channel_darker_flatter_and_noisy(frame: np.ndarray) -> None:
    out = cond.night(frame, 0.0, 0)
    assert out.shape == frame.shape
    assert (out[..., 0] == out[..., 1]).all() and (out[..., 1] == out[..., 2]).all()
    grey = cv2.cvtColor(frame, cv2.COLOR_BGR2GRAY).astype(float)
    assert out[..., 0].mean() < grey.mean() and out[..., 0].std() < grey.std()
    assert not np.array_equal(cond.night(frame, 0.0, 0), cond.night(frame, 0.1, 1))  # noise


@needs_gmdcsa
def test_far_puts_the_whole_picture_at_three_tenths_of_its_size(frame: np.ndarray) -> None:
    out = cond.far(frame, 0.0, 0)
    assert out.shape == frame.shape
    h, w = frame.shape[:2]
    sh, sw = round(h * 0.3), round(w * 0.3)
    y0, x0 = round(0.55 * (h - sh)), round(0.3 * (w - sw))
    small = cv2.resize(frame, (sw, sh), interpolation=cv2.INTER_AREA)
    assert np.array_equal(out[y0 : y0 + sh, x0 : x0 + sw], small)
    assert out[:y0].std() < 10  # the canvas around it is flat


@needs_gmdcsa
def test_partial_portrait_and_occluder_hide_what_they_say(frame: np.ndarray) -> None:
    h, w = frame.shape[:2]
    assert (cond.partial(frame, 0.0, 0)[h - h // 3 :] == 0).all()
    assert np.array_equal(cond.partial(frame, 0.0, 0)[: h - h // 3], frame[: h - h // 3])
    p = cond.portrait(frame, 0.0, 0)
    assert p.shape[0] == h and abs(p.shape[1] / h - 9 / 16) < 0.01
    o = cond.occluder(frame, 0.0, 0)
    assert (o[round(0.7 * h), w // 2] == (40, 55, 75)).all()


def test_fall_look_alikes_are_chosen_by_words() -> None:
    assert cond.is_hard("sitting laying down slowly") and cond.is_hard("crawling")
    assert cond.is_hard("Reading newspaper while sitting on the floor")
    assert not cond.is_hard("walking slowly") and not cond.is_hard("jogging quickly")


@needs_gmdcsa
def test_a_rendered_clip_holds_one_frame_per_100_ms_and_low_rate_one_per_200(
    tmp_path: Path,
) -> None:
    it = Item("S3", "S3_Fall_01", CLIP, "fall", None, None, None, "")
    cap = cv2.VideoCapture(str(CLIP))
    seconds = cap.get(cv2.CAP_PROP_FRAME_COUNT) / cap.get(cv2.CAP_PROP_FPS)
    cap.release()
    for name, rate in (("wide angle", 10.0), ("low rate", 5.0)):
        got = cond.render(it, name, tmp_path)
        assert got.crop == "" and got.path.is_file() and got.fps == rate
        out = cv2.VideoCapture(str(got.path))
        assert out.get(cv2.CAP_PROP_FPS) == pytest.approx(rate)
        n = out.get(cv2.CAP_PROP_FRAME_COUNT)
        out.release()
        assert abs(n - seconds * rate) <= 1.5
    again = cond.render(replace(it), "wide angle", tmp_path)  # rendered once: reused
    assert again.path.stat().st_size > 0
