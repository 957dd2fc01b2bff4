"""#40 item 2: the pose model with a batch dimension (deploy/pose/batch_movenet.py): frames of one
size share a run, and each frame's answer is the shipped model's; the shipped file (batch 1)
keeps working frame by frame."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from edge_hf.core.pose import POSE_MODEL, Person, PoseEstimator, letterbox, pose_frame
from edge_hf.core.secondlook import SecondLook, view_frame
from tests.conftest import SHARED_DATA

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / POSE_MODEL
VTEST = SHARED_DATA / "capture" / "vtest.avi"
FALL = SHARED_DATA / "gmdcsa24" / "S1_Fall_13.mp4"  # 640x480, as vtest.avi's 768x576: 256x192
WIDE = SHARED_DATA / "gmdcsa24" / "S3_Fall_01.mp4"  # 1280x720: 256x144, padded to 256x160
needs_clips = pytest.mark.skipif(
    not (VTEST.is_file() and FALL.is_file() and WIDE.is_file()),
    reason="../shared/data vtest.avi or GMDCSA24 absent",
)


def _script() -> Any:
    spec = importlib.util.spec_from_file_location(
        "batch_movenet", ROOT / "deploy" / "pose" / "batch_movenet.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def batched_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("onnx")
    out = tmp_path_factory.mktemp("pose") / "person-movenet-multipose-lightning-batch.onnx"
    _script().make(MODEL, out)
    return out


@pytest.fixture(scope="module")
def shipped() -> PoseEstimator:
    return PoseEstimator(MODEL)


@pytest.fixture(scope="module")
def batched(batched_path: Path) -> PoseEstimator:
    return PoseEstimator(batched_path)


class Counted:
    """A session that counts its runs and the frames in them."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.runs = inner, []

    def run(self, names: Any, feeds: dict[str, np.ndarray]) -> Any:
        self.runs.append(len(next(iter(feeds.values()))))
        return self.inner.run(names, feeds)


def _counting(est: PoseEstimator) -> Counted:
    counted = Counted(est.session)
    est.session = counted
    return counted


def _frames(
    path: Path, every: int, n: int, crop: tuple[int, int, int, int] | None = None
) -> list[np.ndarray]:
    """`n` pose frames (RGB, long side 256) of a clip, one every `every` frames."""
    cap = cv2.VideoCapture(str(path))
    out, i = [], 0
    while len(out) < n:
        ok, frame = cap.read()
        assert ok, f"{path} ended at frame {i}"
        if i % every == 0:
            out.append(pose_frame(frame, crop, 256))
        i += 1
    cap.release()
    return out


def _same(a: list[Person], b: list[Person]) -> bool:
    return len(a) == len(b) and all(
        np.allclose(p.box, q.box, atol=1e-3)
        and abs(p.score - q.score) <= 1e-4
        and np.allclose(p.keypoints, q.keypoints, atol=1e-3)  # (pixels: 1e-4 of 256 is 0.03)
        for p, q in zip(a, b, strict=True)
    )


def test_the_batched_file_says_what_it_was_made_from(
    batched_path: Path, batched: PoseEstimator, shipped: PoseEstimator
) -> None:
    assert batched.batched and not shipped.batched
    assert batched.session.get_inputs()[0].shape[0] == "batch"
    meta = batched.session.get_modelmeta().custom_metadata_map
    assert meta["edge_hf.batched_from"] == MODEL.name
    assert meta["edge_hf.batched_from_sha256"] == _script().sha256(MODEL)


@needs_clips
def test_batches_of_real_frames_answer_as_the_shipped_model_frame_by_frame(
    batched: PoseEstimator, shipped: PoseEstimator
) -> None:
    frames = _frames(VTEST, 40, 4) + _frames(FALL, 12, 4)  # both 256x192 once letterboxed
    boxed = np.stack([letterbox(f, 256)[0] for f in frames]).astype(np.int32)
    assert boxed.shape == (8, 192, 256, 3)
    one = np.concatenate([shipped.session.run(None, {"input": b[None]})[0] for b in boxed])
    assert (one[:, :, 55] >= 0.2).any(axis=1).sum() >= 6  # people found: not an empty test
    for n in (1, 2, 4, 8):
        got = np.concatenate(
            [batched.session.run(None, {"input": boxed[i : i + n]})[0] for i in range(0, 8, n)]
        )
        assert got.shape == one.shape
        keypoints = np.s_[:, :, :51]
        assert np.allclose(got[keypoints], one[keypoints], atol=1e-4), n
        assert np.allclose(got[:, :, 51:], one[:, :, 51:], atol=1e-4), n


@needs_clips
def test_people_batch_runs_each_size_once_and_answers_each_frame_as_alone(
    batched: PoseEstimator, shipped: PoseEstimator
) -> None:
    four3 = _frames(VTEST, 40, 2) + _frames(FALL, 12, 1)  # -> 256x192
    wide = _frames(WIDE, 20, 2)  # -> 256x160 (144 padded)
    portrait = _frames(FALL, 12, 2, crop=(200, 0, 240, 480))  # 240x480 -> 128x256
    frames = [four3[0], portrait[0], wide[0], four3[1], wide[1], portrait[1], four3[2]]
    alone = [shipped.people(f) for f in frames]
    counted = _counting(batched)
    try:
        together = batched.people_batch(frames)
    finally:
        batched.session = counted.inner
    assert sorted(counted.runs) == [2, 2, 3]  # one run per letterboxed size
    assert len(together) == len(frames)
    assert sum(bool(p) for p in alone) >= 5
    for i, (a, b) in enumerate(zip(together, alone, strict=True)):
        assert _same(a, b), i
    assert batched.people_batch([]) == []


@needs_clips
def test_the_shipped_batch_1_file_still_runs_frame_by_frame(shipped: PoseEstimator) -> None:
    frames = _frames(VTEST, 40, 2) + _frames(FALL, 12, 1, crop=(200, 0, 240, 480))
    counted = _counting(shipped)
    try:
        together = shipped.people_batch(frames)
    finally:
        shipped.session = counted.inner
    assert counted.runs == [1, 1, 1]
    for a, f in zip(together, frames, strict=True):
        assert _same(a, shipped.people(f))


@needs_clips
def test_a_second_looks_squares_share_one_run_and_find_the_same_people(
    batched: PoseEstimator, shipped: PoseEstimator
) -> None:
    cap = cv2.VideoCapture(str(WIDE))  # crawls, lies on the floor by ~2 s
    ticks = []
    for i in range(90):
        ok, frame = cap.read()
        assert ok
        if i % 6 == 0:  # 5 Hz
            far = cv2.resize(frame, (192, 108), interpolation=cv2.INTER_AREA)
            canvas = np.full((360, 640, 3), 120, np.uint8)  # two people far away: two squares
            canvas[130:238, 30:222] = far
            canvas[200:308, 420:612] = far[:, ::-1]
            ticks.append((i / 30, canvas))
    cap.release()
    looks = SecondLook(batched), SecondLook(shipped)
    counted = _counting(batched)
    try:
        for t, frame in ticks:
            small, view = pose_frame(frame, None, 256), view_frame(frame, None, 256)
            a, b = (look.people(t, small, view) for look in looks)
            assert _same(a, b), t
    finally:
        batched.session = counted.inner
    assert looks[0].crops == looks[1].crops > 0
    # a run for each whole frame, then one for that frame's squares, if any (2 at most)
    assert sum(counted.runs) == len(ticks) + looks[0].crops
    assert len(counted.runs) < sum(counted.runs) and max(counted.runs) == 2
