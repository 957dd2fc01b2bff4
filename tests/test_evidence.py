"""#43 item 4, evidence that shows no one: skeleton snapshots (the default) drawn from the person
stage's people on a plain background at the camera's resolution, checked pixel by pixel against
the camera's picture; `snapshots.mode: image` the explicit opt-in. A real GMDCSA24 fall through
the shipped person stage; MQTT through a real Mosquitto."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from edge_hf.core.errors import UserError
from edge_hf.daemon.app import attach_clips, build_pipeline, with_clips, with_snapshots
from edge_hf.daemon.config import Config, parse_config
from edge_hf.daemon.mqtt import MqttSink
from edge_hf.daemon.replay import replay_files
from edge_hf.daemon.sinks import AlertSink, ClipNotice, RecordingSink, TeeSink
from edge_hf.daemon.skeleton import FALLEN, PALETTE, Figure, Skeleton, draw
from tests.broker import Broker
from tests.conftest import SHARED_DATA
from tests.test_mqtt import Subscriber

ROOT = Path(__file__).resolve().parents[1]
DEMO_MODEL = ROOT / "models" / "fall-synth-mobilenet_v3_small-t3.onnx"
POSE = ROOT / "models" / "person-movenet-multipose-lightning.onnx"
FALL = SHARED_DATA / "gmdcsa24" / "S3_Fall_01.mp4"  # 1280x720, side view, lies from ~1.5 s
needs_gmdcsa = pytest.mark.skipif(not FALL.is_file(), reason="../shared/data/gmdcsa24 absent")


def _config(tmp_path: Path, **extra: Any) -> Config:
    """The demo classifier at 0.99 (the events are the person stage's), snapshots on."""
    return Config.model_validate(
        {
            "device_id": "box",
            "model": {"path": str(DEMO_MODEL), "providers": ["cpu"], "threshold": 0.99},
            "cameras": [{"name": "hall", "source": str(FALL)}],
            "state_dir": str(tmp_path / "state"),
            "person": {"model": str(POSE), "decision": "pose"},
            "detection": {"snapshot": True},
            **extra,
        }
    )


def _replay(cfg: Config, *sinks: AlertSink, hold_end_s: float = 2.0) -> RecordingSink:
    """`edge-hf replay` of the fall with these sinks behind the snapshots and clips (as `replay`
    composes them); what reached the sinks."""
    recorder = RecordingSink()
    sink = with_clips(cfg, with_snapshots(cfg, TeeSink(recorder, *sinks)), live=False)
    pipeline = build_pipeline(cfg, sink, score_history=None, live=False)
    attach_clips(sink, pipeline)
    replay_files(pipeline, hold_end_s=hold_end_s)
    return recorder


def _frame_at(t: float) -> np.ndarray:
    cap = cv2.VideoCapture(str(FALL))
    cap.set(cv2.CAP_PROP_POS_FRAMES, round(t * cap.get(cv2.CAP_PROP_FPS)))
    ok, frame = cap.read()
    cap.release()
    assert ok
    return frame


@needs_gmdcsa
def test_a_skeleton_snapshot_shows_the_fallen_person_and_no_pixel_of_the_picture(
    broker: Broker, tmp_path: Path
) -> None:
    """The default: the snapshot of a real fall is a PNG at the camera's resolution in which every
    pixel is the background or a drawing colour (none comes from the camera's picture), with
    the fallen person drawn where the event says they are; MQTT publishes those PNG bytes and
    Home Assistant's image entity says image/png."""
    cfg = _config(tmp_path, mqtt={"enabled": True, "port": broker.port})
    sub = Subscriber(broker.port, "#")
    assert sub.subscribed.wait(20)
    mqtt_sink = MqttSink(cfg.mqtt, "box", ["hall"], cfg.state_dir, snapshot_cameras=["hall"])
    start = _replay(cfg, mqtt_sink).events[0]
    assert start.type == "start" and start.snapshot is not None and start.person is not None
    picture = cv2.imread(start.snapshot, cv2.IMREAD_UNCHANGED)
    frame = _frame_at(start.started_at)
    assert picture.shape == frame.shape == (720, 1280, 3), "the camera's resolution"
    colours = {tuple(int(v) for v in c) for c in np.unique(picture.reshape(-1, 3), axis=0)}
    assert colours <= set(PALETTE), f"pixels not drawn: {sorted(colours - set(PALETTE))[:5]}"
    assert (np.abs(picture.astype(int) - frame.astype(int)).sum(axis=2) < 30).mean() < 0.05
    ys, xs = np.nonzero(np.all(picture == FALLEN, axis=2))
    assert len(xs) > 500, "the fallen person is drawn"
    x0, y0, x1, y1 = start.person[1]
    assert x0 * 1280 - 12 <= xs.min() and xs.max() <= x1 * 1280 + 12
    assert y0 * 720 - 12 <= ys.min() and ys.max() <= y1 * 720 + 12
    msgs = sub.wait_for(lambda m: any(t == "edge_hf/box/hall/snapshot" for t, _, _ in m))
    (png,) = [p for t, p, _ in msgs if t == "edge_hf/box/hall/snapshot"]
    assert png == Path(start.snapshot).read_bytes() and png.startswith(b"\x89PNG")
    (config,) = [json.loads(p) for t, p, _ in msgs if t.endswith("hall_snapshot/config")]
    assert config["content_type"] == "image/png"
    sub.close()


@needs_gmdcsa
def test_snapshots_mode_image_is_the_camera_s_picture_as_before(tmp_path: Path) -> None:
    """`snapshots.mode: image`, the explicit opt-in: a JPEG of the camera's picture at the fall."""
    start = _replay(_config(tmp_path, snapshots={"mode": "image"})).events[0]
    assert start.snapshot is not None and start.snapshot.endswith(".jpg")
    picture = cv2.imread(start.snapshot)
    frame = _frame_at(start.started_at)
    assert picture.shape == frame.shape
    assert np.abs(picture.astype(int) - frame.astype(int)).mean() < 12, "the camera's picture"


def test_a_skeleton_is_drawn_inside_the_camera_s_crop() -> None:
    """People are found in the camera's view (`cameras[].crop`): their 0-1 coordinates are drawn
    at that view's place in the full frame; nobody found is said in the caption."""
    kp = np.zeros((17, 3))
    kp[:, 2] = 1.0
    kp[5], kp[6] = (0.0, 0.0, 1.0), (1.0, 1.0, 1.0)  # shoulders at the view's two corners
    sk = Skeleton((640, 480), (320, 240, 320, 240), (Figure((0.0, 0.0, 1.0, 1.0), kp),), None)
    picture = draw(sk)
    drawn = np.argwhere(np.any(picture != PALETTE[0], axis=2))
    assert drawn[:, 0].min() >= 240 - 4 and drawn[:, 1].min() >= 320 - 4, "inside the view"
    empty = draw(Skeleton((640, 480), None, ()), "hall")
    assert np.any(empty != PALETTE[0]), "a caption says nobody was found"


def test_an_unknown_snapshot_mode_is_one_line_naming_file_key_and_value() -> None:
    text = "device_id: b\nmodel: {path: m.onnx}\ncameras: [{name: c, source: x}]\n"
    with pytest.raises(UserError) as err:
        parse_config(text + "snapshots:\n  mode: video\n", "c.yaml")
    message = str(err.value)
    assert message.startswith("c.yaml:5: snapshots.mode = 'video'") and "\n" not in message
    assert "'skeleton' or 'image'" in message


# ------------------------------------------------------------------ event clips


def _video(path: str) -> tuple[list[np.ndarray], float]:
    cap = cv2.VideoCapture(path)
    fps, frames = cap.get(cv2.CAP_PROP_FPS), []
    while True:
        ok, frame = cap.read()
        if not ok:
            break
        frames.append(frame)
    cap.release()
    return frames, fps


def _palette_distance(picture: np.ndarray) -> np.ndarray:
    """Per pixel, the largest channel difference to the nearest PALETTE colour."""
    palette = np.array(PALETTE, np.int16)
    diff = np.abs(picture[:, :, None, :].astype(np.int16) - palette[None, None])
    return diff.max(axis=3).min(axis=2)


@needs_gmdcsa
def test_a_skeleton_clip_of_a_real_fall_shows_no_pixel_of_the_picture(
    broker: Broker, tmp_path: Path
) -> None:
    """`clips: {enabled: true, pre_s: 1, post_s: 4}` (mode skeleton, the default): an MP4 of
    the person stage's people from 1 s before the fall to 4 s after, at the pose rate; every
    frame is the background and the drawing (MPEG-4 blurs edges a little: nearly every pixel
    within 16 levels of a palette colour), none shows the camera's picture; announced retained
    on MQTT `<camera>/clip` with its path."""
    cfg = _config(
        tmp_path,
        detection={},
        clips={"enabled": True, "pre_s": 1, "post_s": 4},
        mqtt={"enabled": True, "port": broker.port},
    )
    sub = Subscriber(broker.port, "edge_hf/box/hall/clip")
    assert sub.subscribed.wait(20)
    mqtt_sink = MqttSink(cfg.mqtt, "box", ["hall"], cfg.state_dir)
    got = _replay(cfg, mqtt_sink, hold_end_s=6.0)
    start = got.events[0]
    (notice,) = got.clips
    assert notice.event_id == start.event_id and notice.mode == "skeleton"
    assert Path(notice.path).parent == cfg.state_dir / "clips"
    assert -1.05 <= notice.from_s <= -0.75 and 3.75 <= notice.to_s <= 4.05
    frames, fps = _video(notice.path)
    assert len(frames) == notice.frames >= 20 and fps == 5.0, "each pose tick, at the pose rate"
    camera = _frame_at(start.started_at)
    for frame in frames:
        near = _palette_distance(frame) <= 16
        assert near.mean() >= 0.97, "the background and the drawing, nothing else"
        seen = cv2.resize(camera, frame.shape[1::-1], interpolation=cv2.INTER_AREA)
        pictured = _palette_distance(seen) > 60  # where the camera shows something of its own
        alike = np.abs(frame.astype(int) - seen.astype(int)).max(axis=2) <= 20
        assert (alike & pictured).mean() < 0.005, "no pixel of the camera's picture"
    assert np.any(np.all(np.abs(frames[-1].astype(int) - (96, 200, 96)) <= 40, axis=2))
    msgs = sub.wait_for(lambda m: len(m) >= 1)
    announced = json.loads(msgs[-1][1])
    assert announced["path"] == notice.path and announced["event_id"] == start.event_id
    assert announced["frames"] == notice.frames and announced["mode"] == "skeleton"
    sub.close()


@needs_gmdcsa
def test_an_image_clip_is_the_frames_the_ring_holds(tmp_path: Path) -> None:
    """`clips.mode: image`: the camera's frames as the model sees them, at the model's rate,
    from the ring (made long enough to hold them): the camera's picture, as asked."""
    cfg = _config(tmp_path, detection={}, clips={"enabled": True, "pre_s": 1, "post_s": 4,
                                                 "mode": "image"})  # fmt: skip
    got = _replay(cfg, hold_end_s=6.0)
    (notice,) = got.clips
    frames, fps = _video(notice.path)
    assert fps == 10.0 and len(frames) == notice.frames >= 45
    assert (_palette_distance(frames[0]) > 60).mean() > 0.3, "a picture, not a drawing"


@needs_gmdcsa
def test_a_live_clip_is_written_by_the_clip_thread_never_the_inference_loop(
    tmp_path: Path,
) -> None:
    """Live (`edge-hf run`'s loop, the camera a file played in real time): the clip is gathered
    and written by the clip sink's own thread once `post_s` has passed, while the inference
    loop goes on; the notice comes from that thread."""
    from edge_hf.training.synth import write_video
    from tests.conftest import live, wait_until

    frames, fps = _video(str(FALL))
    video = tmp_path / "fall.mp4"
    write_video(video, iter(frames + [frames[-1]] * round(8 * fps)), fps, (1280, 720))
    cfg = _config(tmp_path, detection={}, clips={"enabled": True, "pre_s": 1, "post_s": 2})
    cfg = cfg.model_copy(
        update={"cameras": [cfg.cameras[0].model_copy(update={"source": str(video)})]}
    )
    threads: list[str] = []

    class Where(RecordingSink):
        def clip(self, notice: ClipNotice) -> None:
            threads.append(threading.current_thread().name)
            super().clip(notice)

    recorder = Where()
    sink = with_clips(cfg, recorder)
    pipeline = build_pipeline(cfg, sink, score_history=None)
    attach_clips(sink, pipeline)
    with live(pipeline) as runner:
        assert wait_until(lambda: len(recorder.clips) == 1, 40), "written while running"
        assert runner.is_alive()
    assert threads == ["clips"]
    assert recorder.clips[0].to_s >= 1.5
