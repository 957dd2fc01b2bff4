"""Synthetic videos and the hyperframe dataset: real files through OpenCV, the seed's rules kept."""

from __future__ import annotations

import csv
import logging
import math
from dataclasses import astuple
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

from edge_hf.core.errors import UserError
from edge_hf.core.hyperframe import IMAGENET_MEAN, IMAGENET_STD
from edge_hf.core.video import decode_video, to_model_rgb
from edge_hf.training.data import (
    Clip,
    HyperframeDataset,
    WindowSpec,
    decode_clips,
    load_clips,
    read_manifest,
)
from edge_hf.training.synth import CLASSES, MANIFEST_FIELDS, _make_action, generate, render_clip
from edge_hf.training.train import TrainConfig
from tests.conftest import SHARED_DATA, counter_video, frame_number


def test_synth_writes_readable_videos_and_manifest(synth_small: Path) -> None:
    with (synth_small / "manifest.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == MANIFEST_FIELDS
    assert sorted({r["label"] for r in rows}) == sorted(CLASSES)
    for r in rows:
        cap = cv2.VideoCapture(str(synth_small / r["path"]))
        n = int(cap.get(cv2.CAP_PROP_FRAME_COUNT))
        ok, frame = cap.read()
        cap.release()
        assert ok and frame.shape == (120, 160, 3)
        assert n == int(r["frames"]) and float(r["fps"]) == 15.0
        assert 0 < float(r["start_s"]) < float(r["end_s"]) <= n / 15.0
        is_fall = r["label"] == "fall"
        assert (r["fall_start_s"] != "") == is_fall


def test_synth_is_deterministic_for_a_seed(tmp_path: Path) -> None:
    a = generate(tmp_path / "a", 1, 10.0, seed=3, width=96, height=72, classes=("fall",))
    b = generate(tmp_path / "b", 1, 10.0, seed=3, width=96, height=72, classes=("fall",))
    c = generate(tmp_path / "c", 1, 10.0, seed=4, width=96, height=72, classes=("fall",))
    fa = decode_video(a.parent / "fall" / "fall_3_0000.mp4", (72, 96)).frames
    fb = decode_video(b.parent / "fall" / "fall_3_0000.mp4", (72, 96)).frames
    fc = decode_video(c.parent / "fall" / "fall_4_0000.mp4", (72, 96)).frames
    assert np.array_equal(fa, fb)
    assert fa.shape != fc.shape or not np.array_equal(fa, fc)


def test_fall_and_lie_down_share_poses_only_speed_differs() -> None:
    """A single frame cannot tell them apart: same pose at the same fraction of the motion."""
    fall = _make_action("fall", np.random.default_rng(11), 320)
    lie = _make_action("lie_down", np.random.default_rng(11), 320)
    d_fall, d_lie = fall.end_s - fall.start_s, lie.end_s - lie.start_s
    assert d_lie > 2.5 * d_fall
    for u in np.linspace(0, 1, 9):
        a, b = fall.pose(fall.start_s + u * d_fall), lie.pose(lie.start_s + u * d_lie)
        assert astuple(a) == pytest.approx(astuple(b), abs=1e-9)


def test_sit_down_is_stand_up_played_backwards() -> None:
    sit = _make_action("sit_down", np.random.default_rng(4), 320)
    stand = _make_action("stand_up", np.random.default_rng(4), 320)
    d = sit.end_s - sit.start_s
    assert d == pytest.approx(stand.end_s - stand.start_s)
    for u in np.linspace(0, 1, 9):
        a, b = sit.pose(sit.start_s + u * d), stand.pose(stand.start_s + (1 - u) * d)
        assert astuple(a) == pytest.approx(astuple(b), abs=1e-9)


def test_a_generated_index_is_one_scene_acted_differently() -> None:
    """Clips of one index (own seeds, shared look_seed) share place, facing and tempo, so in a
    generated set sit_down is exactly stand_up played backwards: no still cue separates them."""
    _, sit, _ = render_clip("sit_down", 101, 30, 160, 120, look_seed=197)
    _, stand, _ = render_clip("stand_up", 102, 30, 160, 120, look_seed=197)
    _, other, _ = render_clip("stand_up", 103, 30, 160, 120, look_seed=298)
    d = sit.end_s - sit.start_s
    assert d == pytest.approx(stand.end_s - stand.start_s)
    for u in np.linspace(0, 1, 9):
        a, b = sit.pose(sit.start_s + u * d), stand.pose(stand.start_s + (1 - u) * d)
        assert astuple(a) == pytest.approx(astuple(b), abs=1e-9)
    assert other.pose(other.start_s).x != pytest.approx(stand.pose(stand.start_s).x)
    _, fall, _ = render_clip("fall", 104, 30, 160, 120, look_seed=197)
    _, lie, _ = render_clip("lie_down", 105, 30, 160, 120, look_seed=197)
    assert fall.pose(0).x == lie.pose(0).x == sit.pose(0).x
    assert fall.pose(fall.end_s).tilt == pytest.approx(lie.pose(lie.end_s).tilt)


def test_manifest_and_folder_sources(synth_small: Path, tmp_path: Path) -> None:
    clips = load_clips(synth_small)
    assert len(clips) == 2 * len(CLASSES)
    falls = [c for c in clips if c.label == "fall"]
    assert all(c.start_s is not None and c.end_s is not None for c in falls)
    # Folder per class: the same videos without a manifest.
    for c in clips[:3]:
        (tmp_path / "tree" / c.label).mkdir(parents=True, exist_ok=True)
        (tmp_path / "tree" / c.label / c.path.name).write_bytes(c.path.read_bytes())
    tree = load_clips(tmp_path / "tree")
    assert sorted((c.label, c.path.name) for c in tree) == sorted(
        (c.label, c.path.name) for c in clips[:3]
    )
    with pytest.raises(UserError, match="no such file"):
        load_clips(tmp_path / "missing")


def test_real_manifest_is_read_as_it_is() -> None:
    manifest = SHARED_DATA / "gmdcsa24" / "manifest.csv"
    if not manifest.exists():
        pytest.skip("../shared/data not present")
    clips = read_manifest(manifest)
    assert len(clips) == 23
    s1 = next(c for c in clips if c.path.name == "S1_Fall_13.mp4")
    assert (s1.label, s1.start_s, s1.end_s, s1.subject) == ("fall", 0.4, 4.0, "1")
    assert s1.fps == pytest.approx(29.62)
    adl = next(c for c in clips if c.label == "adl")
    assert adl.start_s is None and adl.path.exists()


def _times(frames: list[np.ndarray], fps: float) -> list[float]:
    return [frame_number(f) / fps for f in frames]


def test_30_and_10_fps_windows_span_the_same_time(tmp_path: Path) -> None:
    v30 = counter_video(tmp_path / "v30.mp4", 30.0, 4.0)
    v10 = counter_video(tmp_path / "v10.mp4", 10.0, 4.0)
    spec = WindowSpec(window=5, interval_s=0.2, size=(48, 64))
    loaded = decode_clips([Clip(v30, "x"), Clip(v10, "x")], spec.size)
    ds = HyperframeDataset(loaded, ["x"], spec, train=False)
    for centre in (1.0, 2.0, 2.7):
        t30 = _times(ds.window_frames(0, centre), 30.0)
        t10 = _times(ds.window_frames(1, centre), 10.0)
        expected = [centre + k * 0.2 for k in range(-2, 3)]
        assert t30 == pytest.approx(expected, abs=0.5 / 30 + 1e-6)
        assert t10 == pytest.approx(expected, abs=0.5 / 10 + 1e-6)
        assert t30[-1] - t30[0] == pytest.approx(t10[-1] - t10[0]) == pytest.approx(0.8)


def test_window_clamps_at_clip_start_and_end(tmp_path: Path) -> None:
    v = counter_video(tmp_path / "v.mp4", 10.0, 2.0)
    spec = WindowSpec(window=5, interval_s=0.1, size=(48, 64))
    ds = HyperframeDataset(decode_clips([Clip(v, "x")], spec.size), ["x"], spec, train=False)
    start = [frame_number(f) for f in ds.window_frames(0, 0.0)]
    assert start == [0, 0, 0, 1, 2]
    end = [frame_number(f) for f in ds.window_frames(0, 1.9)]
    assert end == [17, 18, 19, 19, 19], "clamped, not wrapped"


def test_training_augmentation_is_the_same_for_all_frames(static_video: Path) -> None:
    """Crop and flip differ per sample but never per frame: a still clip stays identical blocks."""
    spec = WindowSpec(window=5, interval_s=0.1, size=(64, 64))
    loaded = decode_clips([Clip(static_video, "still")], spec.size)
    ds = HyperframeDataset(loaded, ["still"], spec, train=True, samples_per_clip=8)
    samples = [ds[i][0] for i in range(len(ds))]
    for x in samples:
        assert x.shape == (15, 64, 64)
        for k in range(1, 5):
            assert torch.equal(x[0:3], x[3 * k : 3 * k + 3])
    assert any(not torch.equal(samples[0], s) for s in samples[1:]), "augmentation varies"


def test_camera_augmentation_changes_the_view_but_never_between_frames(
    static_video: Path,
) -> None:
    """Scale, warp, colour, blur and JPEG act on every frame of a sample alike."""
    spec = WindowSpec(window=3, interval_s=0.1, size=(64, 64))
    loaded = decode_clips([Clip(static_video, "still")], spec.size)
    plain = HyperframeDataset(loaded, ["still"], spec, train=True, samples_per_clip=6)
    other = HyperframeDataset(
        loaded, ["still"], spec, train=True, samples_per_clip=6, camera_aug=1.0
    )
    for i in range(len(other)):
        x = other[i][0]
        assert torch.equal(x[0:3], x[3:6]) and torch.equal(x[0:3], x[6:9])
        assert not torch.equal(x, plain[i][0]), "with p=1 every sample is changed"


def test_condition_augmentation_gives_grey_noisy_nights_and_hidden_parts() -> None:
    """#40 item 3: a night picture is grey in all three channels, flatter, with noise new in
    every frame; a hidden part is one flat box at the same place in every frame."""
    import random

    from edge_hf.training.augment import condition_augment, hide_part, night_picture

    rng = np.random.default_rng(0)
    scene = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
    frames = [scene.copy() for _ in range(3)]
    for k in range(10):
        night = night_picture(frames, random.Random(k))
        assert all(np.array_equal(f[..., 0], f[..., 2]) for f in night)
        assert night[0].std() < 0.85 * scene.std()  # flatter
        assert not np.array_equal(night[0], night[1])  # the sensor's noise is new each frame
        hidden = hide_part(frames, random.Random(k))
        box = np.any(hidden[0] != scene, axis=2)
        assert 0.04 * box.size <= box.sum() <= 0.46 * box.size
        assert all(np.array_equal(np.any(f != scene, axis=2), box) for f in hidden[1:])
        ys, xs = np.nonzero(box)
        assert len(np.unique(hidden[0][ys, xs], axis=0)) == 1  # one flat colour
        assert ys.min() >= 48 // 3 - 1  # in the lower two thirds
    changed = sum(
        any(not np.array_equal(f, scene) for f in condition_augment(frames, random.Random(k), 0.3))
        for k in range(100)
    )
    assert 35 <= changed <= 67  # 1 - 0.7 ** 2 = 51 % of the samples touched at p = 0.3
    assert condition_augment(frames, random.Random(1), 0.0) is frames  # p = 0: untouched


def test_a_crop_column_picks_one_view_of_a_joined_frame(tmp_path: Path) -> None:
    """ASSIST-IoT joins two cameras in one frame: the manifest's crop feeds one view only."""
    left = np.zeros((48, 64, 3), np.uint8)
    left[:, :32] = (0, 0, 255)  # red on the left (BGR), blue on the right
    left[:, 32:] = (255, 0, 0)
    path = tmp_path / "joined.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), 10.0, (64, 48))
    for _ in range(5):
        writer.write(left)
    writer.release()
    (tmp_path / "manifest.csv").write_text(
        'path,label,crop\njoined.avi,adl,"0,0,32,48"\njoined.avi,adl,"32,0,32,48"\n'
    )
    clips = load_clips(tmp_path / "manifest.csv")
    assert [c.crop for c in clips] == [(0, 0, 32, 48), (32, 0, 32, 48)]
    views = [decode_clips([c], (16, 16), tmp_path / "cache")[0].video.frames[0] for c in clips]
    assert views[0][..., 0].mean() > 200 and views[0][..., 2].mean() < 50, "red view"
    assert views[1][..., 2].mean() > 200 and views[1][..., 0].mean() < 50, "blue view"
    assert len(list((tmp_path / "cache").glob("*.npy"))) == 2, "one cache entry per crop"
    frame = left
    torch.testing.assert_close(
        torch.from_numpy(to_model_rgb(frame, (16, 16), (32, 0, 32, 48))),
        torch.from_numpy(to_model_rgb(frame[:, 32:], (16, 16))),
    )
    (tmp_path / "bad.csv").write_text('path,label,crop\njoined.avi,adl,"0,0,32"\n')
    with pytest.raises(UserError, match=r"bad.csv:2: crop '0,0,32'"):
        load_clips(tmp_path / "bad.csv")


def test_training_centres_jitter_by_whole_steps(tmp_path: Path) -> None:
    v = counter_video(tmp_path / "v.mp4", 30.0, 4.0)
    spec = WindowSpec(window=3, interval_s=0.1, size=(48, 64))
    clip = Clip(v, "x", start_s=2.0, end_s=2.0)  # a zero-length segment: only the jitter moves it
    ds = HyperframeDataset(
        decode_clips([clip], spec.size),
        ["x"],
        spec,
        train=True,
        samples_per_clip=60,
        hflip=False,
        crop_scale=(1.0, 1.0),
    )
    offsets = set()
    for i in range(len(ds)):
        x = ds[i][0].numpy()
        # Undo the normalisation of the centre frame (block 1) and read its frame number.
        rgb = (
            x[3:6] * np.array(IMAGENET_STD)[:, None, None] + np.array(IMAGENET_MEAN)[:, None, None]
        )
        offsets.add(frame_number(rgb.transpose(1, 2, 0) * 255) - 60)
    assert offsets == {-6, -3, 0, 3, 6}, "centre moved by whole 100 ms steps, at most 2 of them"


def _block_numbers(x: np.ndarray) -> list[int]:
    """Frame number shown in each RGB block of a normalised hyperframe, oldest first."""
    mean, std = np.array(IMAGENET_MEAN)[:, None, None], np.array(IMAGENET_STD)[:, None, None]
    blocks = [x[3 * k : 3 * k + 3] * std + mean for k in range(x.shape[0] // 3)]
    return [frame_number(b.transpose(1, 2, 0) * 255) for b in blocks]


def test_reverse_pairs_play_half_the_samples_backwards_under_the_twin_label(
    tmp_path: Path,
) -> None:
    v = counter_video(tmp_path / "v.mp4", 30.0, 4.0)
    spec = WindowSpec(window=3, interval_s=0.1, size=(48, 64))
    clips = decode_clips([Clip(v, "sit_down", start_s=1.0, end_s=3.0)], spec.size)
    classes = ["fall", "sit_down", "stand_up"]
    common = {"samples_per_clip": 200, "hflip": False, "crop_scale": (1.0, 1.0)}
    ds = HyperframeDataset(
        clips, classes, spec, train=True, reverse_pairs={"sit_down": "stand_up",
        "stand_up": "sit_down"}, **common,  # type: ignore[arg-type]
    )  # fmt: skip
    seen = {"sit_down": 0, "stand_up": 0}
    for i in range(len(ds)):
        x, y, _ = ds[i]
        numbers = _block_numbers(x.numpy())
        if classes[y] == "sit_down":
            assert numbers == sorted(numbers) and numbers[0] < numbers[2]
        else:
            assert classes[y] == "stand_up"
            assert numbers == sorted(numbers, reverse=True) and numbers[0] > numbers[2]
        seen[classes[y]] += 1
    assert 70 < seen["stand_up"] < 130  # about half, drawn per sample
    plain = HyperframeDataset(clips, classes, spec, train=True, **common)  # type: ignore[arg-type]
    assert {plain[i][1] for i in range(20)} == {1}
    evaluation = HyperframeDataset(
        clips, classes, spec, train=False, reverse_pairs={"sit_down": "stand_up"}
    )
    assert all(evaluation[i][1] == 1 for i in range(len(evaluation)))
    with pytest.raises(UserError, match="lie_down"):
        HyperframeDataset(clips, classes, spec, train=True, reverse_pairs={"lie_down": "fall"})


def test_reverse_pairs_option_is_checked() -> None:
    assert TrainConfig(data="x", reverse_pairs=["a:b"]).reverse_map() == {"a": "b", "b": "a"}
    for bad in (["a"], ["a:a"], ["a:b", "b:c"], [":b"]):
        with pytest.raises(UserError, match="--reverse-pairs"):
            TrainConfig(data="x", reverse_pairs=bad).reverse_map()


def test_unreadable_videos_are_skipped_then_refused(
    synth_small: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"not a video at all")
    good = load_clips(synth_small)
    with caplog.at_level(logging.WARNING):
        loaded = decode_clips([*good, Clip(broken, "fall")], (64, 64))
    assert len(loaded) == len(good)
    assert "broken.mp4" in caplog.text
    with pytest.raises(UserError, match="could not be read"):
        decode_clips([good[0], Clip(broken, "fall"), Clip(tmp_path / "gone.mp4", "fall")], (64, 64))


def test_truncated_file_gives_the_frames_that_decode() -> None:
    tree = SHARED_DATA / "capture" / "tree.avi"
    if not tree.exists():
        pytest.skip("../shared/data not present")
    video = decode_video(tree, (60, 80))
    assert 0 < video.frames.shape[0] < 444  # the header claims 444
    assert video.fps == pytest.approx(15.0, abs=0.01)


def test_cache_is_reused(synth_small: Path, tmp_path: Path) -> None:
    path = load_clips(synth_small)[0].path
    first = decode_video(path, (64, 64), tmp_path / "cache")
    cached = list((tmp_path / "cache").glob("*.npy"))
    assert len(cached) == 1
    mtime = cached[0].stat().st_mtime_ns
    second = decode_video(path, (64, 64), tmp_path / "cache")
    assert isinstance(second.frames, np.memmap) and np.array_equal(first.frames, second.frames)
    assert cached[0].stat().st_mtime_ns == mtime and math.isclose(first.fps, second.fps)


def test_time_before_a_fall_can_be_taught_as_background(tmp_path: Path) -> None:
    v = counter_video(tmp_path / "v.mp4", 10.0, 6.0)
    clips = [Clip(v, "fall", start_s=3.0, end_s=5.0), Clip(v, "adl")]
    loaded = decode_clips(clips, (48, 64), background_label="adl")
    segments = sorted((c.label, c.lo_s, c.hi_s) for c in loaded)
    assert segments == [("adl", 0.0, 2.7), ("adl", 0.0, 6.0), ("fall", 3.0, 5.0)]
    assert len(decode_clips(clips, (48, 64))) == 2, "off unless asked for"


def test_classes_of_one_index_share_the_room(synth_small: Path) -> None:
    """The background must not give the label away: index i of every class is the same room."""

    def first(name: str) -> np.ndarray:
        return decode_video(synth_small / name, (60, 80)).frames[0].astype(np.float32)

    same = np.abs(first("fall/fall_5_0000.mp4") - first("sit_down/sit_down_5_0000.mp4")).mean()
    other = np.abs(first("fall/fall_5_0000.mp4") - first("fall/fall_5_0001.mp4")).mean()
    assert same < 0.5 * other


def _vtest_frame() -> np.ndarray:
    video = SHARED_DATA / "capture" / "vtest.avi"
    if not video.exists():
        pytest.skip("../shared/data not present")
    cap = cv2.VideoCapture(str(video))
    ok, frame = cap.read()
    cap.release()
    assert ok
    return cv2.resize(frame, (640, 480), interpolation=cv2.INTER_AREA)


def test_the_cheap_resize_keeps_the_model_s_view_of_a_real_frame() -> None:
    """640x480 -> 112x112: "linear2x-area" (the default) stays within about a grey level of
    INTER_AREA on average; "area" is INTER_AREA exactly; a bare bilinear resize is far off."""
    frame = _vtest_frame()
    area = cv2.cvtColor(
        cv2.resize(frame, (112, 112), interpolation=cv2.INTER_AREA), cv2.COLOR_BGR2RGB
    ).astype(np.float32)
    cheap = to_model_rgb(frame, (112, 112)).astype(np.float32)
    assert np.array_equal(to_model_rgb(frame, (112, 112), resize="area"), area.astype(np.uint8))
    assert np.abs(cheap - area).mean() < 1.5
    bilinear = cv2.cvtColor(
        cv2.resize(frame, (112, 112), interpolation=cv2.INTER_LINEAR), cv2.COLOR_BGR2RGB
    ).astype(np.float32)
    assert np.abs(bilinear - area).mean() > 2 * np.abs(cheap - area).mean()
    small = frame[:200, :200]  # under twice the size: plain area averaging either way
    assert np.array_equal(
        to_model_rgb(small, (112, 112)), to_model_rgb(small, (112, 112), resize="area")
    )
    with pytest.raises(ValueError, match="resize 'cubic'"):
        to_model_rgb(frame, (112, 112), resize="cubic")


def test_decoding_caches_each_resize_rule_apart(tmp_path: Path) -> None:
    path = tmp_path / "v.avi"
    frame = _vtest_frame()
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter.fourcc(*"MJPG"), 10, (640, 480))
    for _ in range(3):
        writer.write(frame)
    writer.release()
    a = decode_video(path, (112, 112), tmp_path / "cache", resize="area").frames
    b = decode_video(path, (112, 112), tmp_path / "cache", resize="linear2x-area").frames
    assert len(list((tmp_path / "cache").glob("*.npy"))) == 2
    assert not np.array_equal(a, b)
    assert TrainConfig.from_dict({"data": "x"}).resize == "area", "old checkpoints: INTER_AREA"
    assert TrainConfig(data="x").resize == "linear2x-area", "new trainings: the cheap rule"
