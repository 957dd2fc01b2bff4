"""Person-centred hyperframes: the crop rule, the contract, and the same windows in training and in
the daemon (the real MoveNet file on a real clip)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from edge_hf.core.contract import ModelContract, read_metadata
from edge_hf.core.errors import UserError
from edge_hf.core.personcrop import BoxTrack, PersonCropRule, crop_box, cut, work_size
from edge_hf.core.pose import POSE_MODEL
from edge_hf.daemon.app import build_pipeline
from edge_hf.daemon.config import Config
from edge_hf.daemon.replay import replay_files
from edge_hf.daemon.sinks import RecordingSink
from edge_hf.training.data import Clip, HyperframeDataset, WindowSpec, decode_clips
from tests.conftest import SHARED_DATA

ROOT = Path(__file__).resolve().parents[1]
GMDCSA = SHARED_DATA / "gmdcsa24"
needs_gmdcsa = pytest.mark.skipif(not GMDCSA.is_dir(), reason="../shared/data/gmdcsa24 absent")
RULE = PersonCropRule()


def test_the_crop_is_a_square_around_the_people_inside_the_frame() -> None:
    assert crop_box([], (320, 320), RULE) is None  # nobody: the whole frame
    # A small person in the middle: the minimum side (half the frame), centred on them.
    x, y, w, h = crop_box([(0.45, 0.4, 0.55, 0.6)], (320, 320), RULE) or (0, 0, 0, 0)
    assert (w, h) == (160, 160) and (x + w / 2, y + h / 2) == pytest.approx((160, 160), abs=1)
    # A tall person at the right edge: the box plus margin on each side, pushed inside.
    x, y, w, h = crop_box([(0.85, 0.2, 0.99, 0.6)], (320, 320), RULE) or (0, 0, 0, 0)
    assert w == h == round(0.4 * 320 * 1.6) and x + w == 320 and y >= 0
    # Two people far apart: their union, at most the frame.
    assert crop_box([(0.0, 0.0, 0.1, 0.2), (0.9, 0.8, 1.0, 1.0)], (320, 320), RULE) == (
        0, 0, 320, 320,
    )  # fmt: skip
    # The cut brings every frame of the window to the model's size with the same crop.
    frames = [np.full((320, 320, 3), k, np.uint8) for k in range(3)]
    out = cut(frames, (10, 20, 160, 160), (64, 64), "area")
    assert [f.shape for f in out] == [(64, 64, 3)] * 3 and [int(f[0, 0, 0]) for f in out] == [
        0,
        1,
        2,
    ]


def test_the_boxes_of_a_window_are_the_recent_ticks_or_the_last_person_seen() -> None:
    track = BoxTrack(RULE)
    a, b = (0.1, 0.1, 0.2, 0.5), (0.3, 0.3, 0.4, 0.7)
    for k, boxes in enumerate([[a], [a], [b], [], [], [], [], [], [], [], [], [], [], [], [], []]):
        track.add(k * 0.2, boxes)
    assert track.boxes_for(0.4) == [a, a, b]  # ticks 0.0, 0.2, 0.4: the union of all three
    assert track.boxes_for(0.7) == [a, b]  # ticks 0.2, 0.4, 0.6 lie within the last 0.6 s
    assert track.boxes_for(1.2) == [b]  # nobody lately: the last person seen (0.4 s), held
    assert track.boxes_for(3.5) == []  # held 3 s at most: then the whole frame
    with pytest.raises(ValueError):
        track.add(0.1, [])  # ticks come in time order


def _person_crop_model(out: Path) -> Path:
    """An untrained but real person-crop export (T=3, 64x64, adl/falling/down)."""
    from edge_hf.training.export import export_onnx
    from edge_hf.training.models import build_model
    from edge_hf.training.train import TrainConfig, save_checkpoint

    cfg = TrainConfig(
        data="none", backbone="mobilenet_v3_small", input_size=64, crop="person",
        classes=["adl", "down", "falling"], fall_class="falling", down_class="down",
    )  # fmt: skip
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = build_model(cfg.backbone, cfg.window, 3)
    save_checkpoint(out / "pc.pt", model, cfg, cfg.classes)
    export_onnx(out / "pc.pt", out / "pc.onnx")
    return out / "pc.onnx"


@pytest.fixture(scope="module")
def person_crop_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _person_crop_model(tmp_path_factory.mktemp("person_crop"))


def test_the_model_records_its_crop_and_an_unknown_crop_is_refused(person_crop_model: Path) -> None:
    meta = read_metadata(person_crop_model)
    assert meta["edge_hf.crop"] == "person"
    contract = ModelContract.from_metadata(meta)
    assert PersonCropRule.from_json(contract.crop_rule) == RULE
    assert (
        ModelContract.from_metadata({k: v for k, v in meta.items() if "crop" not in k}).crop
        == "full"
    )  # models from before the key: the whole frame
    with pytest.raises(ValueError, match="crop 'face'"):
        ModelContract.from_metadata({**meta, "edge_hf.crop": "face"})


def _config(model_path: Path, video: Path, state: Path, **person: object) -> Config:
    return Config.model_validate(
        {
            "device_id": "t",
            "model": {"path": str(model_path), "providers": ["cpu"]},
            "cameras": [{"name": "cam", "source": str(video)}],
            "state_dir": str(state),
            "person": person,
        }
    )


def test_the_daemon_refuses_a_person_crop_model_it_cannot_feed(
    person_crop_model: Path, tmp_path: Path
) -> None:
    video = tmp_path / "none.mp4"
    with pytest.raises(UserError, match=r"person-centred windows .* set person.model"):
        build_pipeline(_config(person_crop_model, video, tmp_path / "s1"), RecordingSink(),
                       score_history=None, live=False)  # fmt: skip
    with pytest.raises(UserError, match=r"person.rate_hz = 2 .* set person.rate_hz: 5"):
        build_pipeline(
            _config(person_crop_model, video, tmp_path / "s2", model=str(ROOT / POSE_MODEL),
                    rate_hz=2),
            RecordingSink(), score_history=None, live=False,
        )  # fmt: skip


@needs_gmdcsa
def test_training_and_the_daemon_cut_the_same_windows_on_a_real_clip(
    person_crop_model: Path, tmp_path: Path
) -> None:
    """The daemon's replay (person stage live, boxes from its ticks) and training's dataset (boxes
    cached per clip) give the model the same pixels for the same window."""
    video = GMDCSA / "S3_Fall_01.mp4"
    cfg = _config(person_crop_model, video, tmp_path / "s", model=str(ROOT / POSE_MODEL),
                  decision="cnn")  # fmt: skip
    pipeline = build_pipeline(cfg, RecordingSink(), score_history=None, live=False)
    seen: list[tuple[float, list[np.ndarray]]] = []
    frames_of = pipeline._frames

    def record(cam, w):  # type: ignore[no-untyped-def]
        got = frames_of(cam, w)
        seen.append((w.times[-1], got))
        return got

    pipeline._frames = record  # type: ignore[method-assign]
    replay_files(pipeline, hold_end_s=0.0)
    assert pipeline.size == work_size((64, 64)) and len(seen) > 30

    loaded = decode_clips([Clip(video, "falling")], (64, 64), tmp_path / "cache",
                          person_crop=RULE, pose_model=ROOT / POSE_MODEL)  # fmt: skip
    spec = WindowSpec(3, 0.1, (64, 64), person_crop=RULE, resize=pipeline.resize)
    ds = HyperframeDataset(loaded, ["adl", "down", "falling"], spec, train=False)
    whole = 0
    for t, frames in seen:
        expected = ds.window_frames(0, t - 0.1)  # centred one interval before the newest
        assert all(np.array_equal(a, b) for a, b in zip(frames, expected, strict=True)), t
        full = cut(
            [loaded[0].video.frames[round(t * loaded[0].fps)]], None, (64, 64), pipeline.resize
        )
        whole += np.array_equal(frames[-1], full[0])
    assert whole < 0.5 * len(seen), "most windows of this clip are cut around the person"


def test_the_model_card_says_the_daemon_needs_the_person_stage(
    person_crop_model: Path, tmp_path: Path
) -> None:
    from edge_hf.training.card import write_card

    card = write_card(
        person_crop_model, tmp_path / "pc.md", "edge-hf train --crop person", "", None, ""
    )
    assert "edge_hf.crop: person" in card and "person.model" in card


_FRACTION = st.floats(0.0, 1.0, allow_nan=False)


@given(
    boxes=st.lists(st.tuples(_FRACTION, _FRACTION, _FRACTION, _FRACTION), min_size=1, max_size=6),
    h=st.integers(32, 1080),
    w=st.integers(32, 1920),
)
def test_any_crop_is_a_square_inside_the_frame_holding_every_box(
    boxes: list[tuple[float, float, float, float]], h: int, w: int
) -> None:
    boxes = [(min(a, c), min(b, d), max(a, c), max(b, d)) for a, b, c, d in boxes]
    crop = crop_box(boxes, (h, w), RULE)
    assert crop is not None
    x, y, cw, ch = crop
    assert cw == ch and x >= 0 and y >= 0 and x + cw <= w and y + ch <= h
    assert cw >= min(round(RULE.min_fraction * min(h, w)), min(h, w))
    # Every box's centre lies inside the crop unless the union is wider than the frame allows.
    ux0, uy0 = min(b[0] for b in boxes) * w, min(b[1] for b in boxes) * h
    ux1, uy1 = max(b[2] for b in boxes) * w, max(b[3] for b in boxes) * h
    if max(ux1 - ux0, uy1 - uy0) <= cw:
        assert x - 1 <= ux0 and ux1 <= x + cw + 1 and y - 1 <= uy0 and uy1 <= y + ch + 1


def test_check_says_the_person_stage_feeds_a_person_centred_model(
    person_crop_model: Path, tmp_path: Path
) -> None:
    import subprocess
    import sys

    path = tmp_path / "c.yaml"
    path.write_text(
        f"device_id: t\nmodel:\n  path: {person_crop_model}\ncameras:\n  - name: a\n"
        f"    source: x.mp4\nstate_dir: {tmp_path / 's'}\nperson:\n"
        f"  model: {ROOT / POSE_MODEL}\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "edge_hf.cli", "check", "--config", str(path)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "person stage: on" in out.stdout and "person-centred windows" in out.stdout
