"""The daemon's parts with real files and real ONNX Runtime: sampling, ring, capture, events, replay."""

from __future__ import annotations

import fcntl
import itertools
import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import cv2
import jsonschema
import numpy as np
import pytest
import yaml

import edge_hf
from edge_hf.core.errors import UserError
from edge_hf.core.hyperframe import frame_indices
from edge_hf.core.runtime import read_contract
from edge_hf.daemon.app import build_pipeline, with_snapshots
from edge_hf.daemon.capture import CaptureThread, TickSampler, sample_by_media_time
from edge_hf.daemon.config import Config, check_against_model
from edge_hf.daemon.replay import replay_files
from edge_hf.daemon.ring import FrameRing
from edge_hf.daemon.sinks import JsonLinesSink, RecordingSink, TeeSink
from edge_hf.daemon.sources import (
    FirstThatOpens,
    OpenCVSource,
    hardware_decoder,
    hardware_rtsp_pipeline,
    make_source,
)
from edge_hf.training.synth import write_demo_clips
from tests.broker import Broker, publish_sentinel
from tests.conftest import (
    SHARED_DATA,
    SHIPPED_MODEL,
    counter_video,
    frame_number,
    moving_clip,
    wait_or_fail,
)
from tests.test_mqtt import Subscriber

ROOT = Path(__file__).resolve().parents[1]

# ------------------------------------------------------------------ sampling


@pytest.mark.parametrize("fps", [30.0, 10.0, 7.0])
def test_media_time_sampling_is_the_frame_indices_rule(tmp_path: Path, fps: float) -> None:
    video = counter_video(tmp_path / "v.mp4", fps, 3.0)
    src = make_source(str(video), realtime=False)
    src.open()
    try:
        samples = [(t, frame_number(f)) for t, f in sample_by_media_time(src, 0.1)]
    finally:
        src.release()
    n = round(fps * 3.0)
    for t, idx in samples:
        assert idx == frame_indices(n, fps, t, 1, 0.1)[0]
    assert samples[-1][0] <= (n - 1) / fps + 0.05


def test_30_and_10_fps_files_give_windows_of_the_same_span(tmp_path: Path) -> None:
    """Through the daemon's own sampling and ring: same seconds, whatever the fps."""
    spans = {}
    for fps in (30.0, 10.0):
        video = counter_video(tmp_path / f"v{fps:g}.mp4", fps, 3.0)
        src = make_source(str(video), realtime=False)
        src.open()
        ring = FrameRing(16, (48, 64, 3))
        windows = []
        for t, frame in sample_by_media_time(src, 0.1):
            ring.write(frame[..., ::-1], t)
            w = ring.window(5)
            if w is not None and t >= 1.0:
                windows.append([frame_number(f) / fps for f in w.frames])
        src.release()
        spans[fps] = windows[:10]
    for w30, w10 in zip(spans[30.0], spans[10.0], strict=True):
        assert w30 == pytest.approx(w10, abs=1e-6)
        assert w30[-1] - w30[0] == pytest.approx(0.4)


# ------------------------------------------------------------------ ring


def test_a_camera_at_the_sampling_rate_gives_every_tick_its_own_frame() -> None:
    """A 10 fps camera sampled every 100 ms, its frames jittering around the ticks: each tick
    gets the frame that arrived nearest to it, none is repeated and none is lost. (Taking the
    newest frame when the next one arrives gave ticks 2 and 3 both frame 3 here.)"""
    rng = np.random.default_rng(0)
    arrivals = [k * 0.1 + float(rng.uniform(-0.008, 0.008)) for k in range(1, 41)]
    arrivals[1], arrivals[2] = 0.199, 0.301  # one interval with no arrival at all
    sampler = TickSampler(t0=0.1, interval_s=0.1)
    written: list[tuple[float, int]] = []
    for i, now in enumerate(arrivals):
        frame = np.full((2, 2, 3), i, np.uint8)
        written += [(tick, int(f[0, 0, 0])) for tick, f, _ in sampler.on_frame(frame, now)]
    ticks = [round(t, 6) for t, _ in written]
    assert ticks == [round(0.1 * k, 6) for k in range(1, len(written) + 1)]
    assert [i for _, i in written] == list(range(len(written)))
    assert len(written) >= 39


@pytest.mark.parametrize("fps", [10.0, 15.0, 25.0, 30.0])
def test_only_frames_that_may_be_sampled_are_converted(fps: float) -> None:
    """A camera at 10-30 fps with a few ms of jitter: the sampler asks for the conversion of far
    fewer frames than arrive (at 25-30 fps at most half), and every tick still gets the frame a
    sampler that saw every frame picks."""
    rng = np.random.default_rng(int(fps))
    arrivals = [k / fps + float(rng.uniform(-0.004, 0.004)) for k in range(1, int(fps * 20))]
    full, lazy = TickSampler(0.0, 0.1), TickSampler(0.0, 0.1)
    picked_full: list[tuple[float, int]] = []
    picked_lazy: list[tuple[float, int]] = []
    converted = 0
    for i, now in enumerate(arrivals):
        frame = np.full(1, i)
        picked_full += [(t, int(f[0])) for t, f, _ in full.on_frame(frame, now)]
        keep = lazy.wants(now)
        converted += keep
        picked_lazy += [(t, int(f[0])) for t, f, _ in lazy.on_frame(frame if keep else None, now)]
    assert picked_lazy == picked_full
    assert len(picked_full) >= 190
    if fps >= 25:
        assert converted <= 0.5 * len(arrivals)
    assert converted <= 1.5 * len(picked_full)


@pytest.mark.parametrize("fps", [10.0, 15.0, 30.0])
def test_a_tick_is_decided_when_its_nearest_frame_arrives(fps: float) -> None:
    """Cameras with a few ms of jitter: nearly every tick is decided by the arrival of the frame it takes (not a frame later), that frame
    is the nearest one or within the jitter of it, and the sample carries its arrival time."""
    rng = np.random.default_rng(int(fps) + 1)
    arrivals = [k / fps + float(rng.uniform(-0.003, 0.003)) for k in range(1, int(fps * 30))]
    sampler = TickSampler(0.013, 0.1)  # (ticks midway between frames: ~87 % at arrival)
    at_arrival, n = 0, 0
    for i, now in enumerate(arrivals):
        for tick, f, arrived in sampler.on_frame(np.full(1, i), now):
            assert arrived == arrivals[int(f[0])]
            best = min(abs(a - tick) for a in arrivals)
            assert abs(arrived - tick) - best <= 0.006, f"tick {tick:.2f}: not the nearest"
            n += 1
            at_arrival += arrived == now
    assert n >= 290
    assert at_arrival / n >= 0.95


def test_a_frame_not_converted_is_never_sampled() -> None:
    """Ignoring `wants` (no frame converted) never hands out a missing frame."""
    sampler = TickSampler(0.0, 0.1)
    got = [f for k in range(1, 40) for _, f, _ in sampler.on_frame(None, k / 30)]
    assert got == []


def test_a_slow_camera_repeats_frames_and_a_fast_one_skips_them() -> None:
    slow, fast = TickSampler(0.0, 0.1), TickSampler(0.0, 0.1)
    got_slow = [
        i for k in range(10) for _, f, _ in slow.on_frame(np.full(1, k), 0.25 * k) for i in f
    ]
    got_fast = [
        i for k in range(30) for _, f, _ in fast.on_frame(np.full(1, k), 0.033 * k) for i in f
    ]
    assert len(got_slow) >= 20 and len(set(got_slow)) < len(got_slow)  # 4 fps -> repeats
    assert got_slow == sorted(got_slow)
    assert len(got_fast) == len(set(got_fast)) and len(got_fast) < 30  # 30 fps -> skips
    assert got_fast == sorted(got_fast)


def test_ring_window_is_oldest_first_and_clamps_at_start() -> None:
    ring = FrameRing(8, (2, 2, 3))
    assert ring.window(3) is None
    ring.write(np.full((2, 2, 3), 1, np.uint8), 0.1)
    assert [int(f[0, 0, 0]) for f in ring.window(3).frames] == [1, 1, 1]  # type: ignore[union-attr]
    for v in (2, 3, 4):
        ring.write(np.full((2, 2, 3), v, np.uint8), v / 10)
    w = ring.window(3)
    assert w is not None and [int(f[0, 0, 0]) for f in w.frames] == [2, 3, 4]
    assert w.times == pytest.approx([0.2, 0.3, 0.4]) and w.seq == 3


def test_ring_never_blocks_the_writer_and_counts_drops() -> None:
    ring = FrameRing(16, (8, 8, 3))
    frame = np.zeros((8, 8, 3), np.uint8)
    # Nobody reads: the writer goes on, and every overwritten unread frame is a drop.
    for i in range(1000):
        frame[:] = i % 256
        ring.write(frame, i)
    assert ring.seq == 1000 and ring.dropped == 1000 - 16
    # A reader hammering windows while a writer writes: windows stay consecutive, writer unhindered.
    ring2 = FrameRing(32, (8, 8, 3))
    stop = threading.Event()
    bad: list[list[int]] = []

    def reader() -> None:
        while not stop.is_set():
            w = ring2.window(5)
            if w is not None and w.seq >= 4:
                vals = [int(f[0, 0, 0]) for f in w.frames]
                if any((b - a) % 256 != 1 for a, b in itertools.pairwise(vals)):
                    bad.append(vals)

    th = threading.Thread(target=reader)
    th.start()
    t0 = time.perf_counter()
    for i in range(20000):
        frame[:] = i % 256
        ring2.write(frame, i)
    writer_s = time.perf_counter() - t0
    stop.set()
    th.join()
    assert not bad, f"torn windows: {bad[:3]}"
    assert ring2.seq == 20000 and writer_s < 20  # finished: nothing made it wait


# ------------------------------------------------------------------ capture


def test_a_missing_camera_is_retried_while_another_keeps_producing(tmp_path: Path) -> None:
    good = moving_clip()
    late = tmp_path / "late.avi"
    stop = threading.Event()
    rings = {n: FrameRing(16, (48, 64, 3)) for n in ("a", "b")}

    def factory(path: Path):  # type: ignore[no-untyped-def]
        return lambda: make_source(str(path), realtime=True, loop=True)

    threads = {
        name: CaptureThread(
            name,
            factory(path),
            rings[name],
            interval_s=0.1,
            size=(48, 64),
            stop=stop,
            max_backoff_s=0.5,
        )
        for name, path in (("a", good), ("b", late))
    }
    for th in threads.values():
        th.start()
    try:
        # Not fixed sleeps: b retried while a sampled; then, once b is back, a keeps pace with it.
        wait_or_fail(
            lambda: threads["b"].stats.state == "stalled" and threads["b"].stats.reconnects >= 1,
            20, "camera b to be retried",
        )  # fmt: skip
        wait_or_fail(lambda: rings["a"].seq >= 10, 20, "10 samples of a while b is missing")
        a_before = rings["a"].seq
        shutil.copy(good, late)  # the camera comes back
        wait_or_fail(
            lambda: threads["b"].stats.state == "online" and rings["b"].seq >= 5,
            10, "camera b back, 5 samples",
        )  # fmt: skip
        b_back = rings["b"].seq
        wait_or_fail(lambda: rings["b"].seq >= b_back + 10, 20, "10 more samples of b")
        assert rings["a"].seq >= a_before + 10, "a never paused for b: it kept pace"
    finally:
        stop.set()
        for th in threads.values():
            th.join(5)
    assert all(not th.is_alive() for th in threads.values())


def test_a_truncated_file_ends_cleanly() -> None:
    tree = SHARED_DATA / "capture" / "tree.avi"
    if not tree.exists():
        pytest.skip("../shared/data not present")
    stop = threading.Event()
    ring = FrameRing(16, (48, 64, 3))
    th = CaptureThread(
        "tree",
        lambda: make_source(str(tree), realtime=False),
        ring,
        interval_s=0.1,
        size=(48, 64),
        stop=stop,
    )
    th.start()
    th.join(20)
    assert not th.is_alive() and th.stats.state == "ended"
    assert 0 < th.stats.frames_read < 444  # the header's count is a lie


# ------------------------------------------------------------------ replay and run


DEMO_THRESHOLD = yaml.safe_load((ROOT / "deploy" / "demo.yaml").read_text())["model"]["threshold"]


def _config(model: Path, tmp_path: Path, sources: dict[str, Path], **extra: object) -> Config:
    """A config like deploy/demo.yaml (same threshold) for the given cameras."""
    return Config.model_validate(
        {
            "device_id": "test",
            "model": {"path": str(model), "providers": ["cpu"], "threshold": DEMO_THRESHOLD},
            "cameras": [{"name": n, "source": str(p)} for n, p in sources.items()],
            "state_dir": str(tmp_path / "state"),
            **extra,
        }
    )


@pytest.fixture(scope="module")
def demo_clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    paths = write_demo_clips(tmp_path_factory.mktemp("demo"))
    return {p.stem: p for p in paths}


needs_shipped = pytest.mark.skipif(not SHIPPED_MODEL.exists(), reason="shipped model not built")


@needs_shipped
def test_replay_of_the_demo_fall_gives_one_start_and_one_end(
    demo_clips: dict[str, Path], tmp_path: Path
) -> None:
    cfg = _config(
        SHIPPED_MODEL, tmp_path, {"fall": demo_clips["fall_demo"]}, detection={"snapshot": True},
        snapshots={"mode": "image"},  # the camera's picture (the default draws skeletons: #43)
    )  # fmt: skip
    lines_sink = JsonLinesSink(stream=open(tmp_path / "events.jsonl", "w"))  # noqa: SIM115
    recorder = RecordingSink()
    sink = with_snapshots(cfg, TeeSink(lines_sink, recorder))
    pipeline = build_pipeline(cfg, sink, score_history=None, live=False)
    replay_files(pipeline)
    events = [e.as_dict() for e in recorder.events]
    kinds = [e["type"] for e in events]
    assert kinds == ["start", "end"]
    start = events[0]
    # The fall happens 3 s in: the event starts within a second of it.
    assert "1970-01-01T00:00:03" in start["started_at"]
    assert Path(start["snapshot"]).stat().st_size > 0
    # The picture is the window's centre frame at the camera's resolution (it rode in the ring).
    assert cv2.imread(start["snapshot"]).shape[:2] == (240, 320)
    lines = (tmp_path / "events.jsonl").read_text().splitlines()
    assert [json.loads(x)["event_id"] for x in lines] == [start["event_id"]] * 2
    schema = json.loads((Path(edge_hf.__file__).parent / "event.schema.json").read_text())
    for event in events:
        jsonschema.validate(event, schema, format_checker=jsonschema.FormatChecker())


@needs_shipped
def test_replay_of_the_slow_lie_down_gives_no_event(
    demo_clips: dict[str, Path], tmp_path: Path
) -> None:
    cfg = _config(SHIPPED_MODEL, tmp_path, {"lie": demo_clips["lie_down_demo"]})
    sink = RecordingSink()
    pipeline = build_pipeline(cfg, sink, score_history=None, live=False)
    replay_files(pipeline)
    assert list(sink.events) == []
    assert max(pipeline.cameras[0].scores) < DEMO_THRESHOLD


@needs_shipped
def test_replay_cli_is_deterministic(demo_clips: dict[str, Path], tmp_path: Path) -> None:
    """Over a clip that really raises a fall, two replays print the same events, ids included."""
    cmd = [sys.executable, "-m", "edge_hf.cli", "replay", "--model", str(SHIPPED_MODEL), "--video",
           str(demo_clips["fall_demo"]), "--state-dir", str(tmp_path), "--log-level", "WARNING"]  # fmt: skip
    runs = [subprocess.run(cmd, capture_output=True, text=True, check=True) for _ in range(2)]
    events = [json.loads(line) for line in runs[0].stdout.splitlines()]
    assert [e["type"] for e in events] == ["start", "end"], runs[0].stdout
    assert events[0]["event_id"] == events[1]["event_id"]
    assert runs[0].stdout == runs[1].stdout


def test_replay_warns_when_a_file_stops_decoding_early(tiny_onnx: Path, tmp_path: Path) -> None:
    tree = SHARED_DATA / "capture" / "tree.avi"
    if not tree.exists():
        pytest.skip("../shared/data not present")
    odd = tmp_path / "my fall#1.avi"  # spaces and '#' in the name become the camera's name
    odd.write_bytes(tree.read_bytes())
    proc = subprocess.run(
        [sys.executable, "-m", "edge_hf.cli", "replay", "--model", str(tiny_onnx), "--video",
         str(odd), "--state-dir", str(tmp_path / "s")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "decoding stopped at frame 68 of the 444" in proc.stderr
    assert "Traceback" not in proc.stderr


def _vtest_config(tmp_path: Path, model: Path, camera: str, state: str) -> Path:
    """A one-camera config on a generated 768x576 clip with `camera`'s extra keys."""
    video = moving_clip()
    config = tmp_path / "c.yaml"
    config.write_text(
        f"device_id: t\nmodel: {{path: {model}, providers: [cpu]}}\n"
        f"cameras: [{{name: a, source: {video}, {camera}}}]\nstate_dir: {tmp_path / state}\n"
    )
    return config


def test_a_crop_past_the_frame_is_one_line_at_replay(tiny_onnx: Path, tmp_path: Path) -> None:
    config = _vtest_config(tmp_path, tiny_onnx, "crop: [700, 0, 200, 100]", "s")
    proc = subprocess.run(
        [sys.executable, "-m", "edge_hf.cli", "--log-level", "WARNING", "replay", "--config", str(config)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert len(lines) == 1 and "reaches past the 768x576 frame" in lines[-1], proc.stderr


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "edge_hf.cli", *args], capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def _live_config(tmp_path: Path, port: int, video: Path, extra: str = "") -> Path:
    cfg = tmp_path / "live.yaml"
    cfg.write_text(
        f"device_id: box\nmodel: {{path: {SHIPPED_MODEL}, providers: [cpu], threshold: 0.75}}\n"
        f"cameras:\n  - {{name: hall, source: {video}}}\n  - {{name: porch, source: {video}}}\n"
        f"mqtt: {{enabled: true, port: {port}}}\nstate_dir: {tmp_path / 'live'}\n{extra}"
    )
    return cfg


def test_replay_with_the_live_config_never_publishes_nor_touches_its_state(
    broker: Broker, tmp_path: Path, demo_clips: dict[str, Path]
) -> None:
    live = tmp_path / "live"
    live.mkdir(mode=0o700)
    lock = (live / "edge-hf.lock").open("a+")  # a running daemon holds its state_dir
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    before = sorted(p.name for p in live.iterdir())
    sub = Subscriber(broker.port, "#")
    assert sub.subscribed.wait(20), "the subscription acknowledged"
    cfg = _live_config(tmp_path, broker.port, demo_clips["fall_demo"])
    proc = _cli("replay", "--config", str(cfg), "--state-dir", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(x) for x in proc.stdout.splitlines()]
    assert [e["type"] for e in events] == ["start", "end"] * 2  # both cameras replay the fall
    # An absence, checked after a positive marker rather than a fixed sleep: the replay has
    # exited, so whatever it published reached the broker before this sentinel was sent; once
    # the sentinel has arrived, anything of the replay's would have arrived too.
    sentinel = "edge_hf-test/sentinel"
    publish_sentinel(broker.port, sentinel)
    sub.wait_for(lambda m: any(t == sentinel for t, _, _ in m))
    assert [m for m in sub.messages if m[0] != sentinel] == [], "nothing reached the live broker"
    assert sorted(p.name for p in live.iterdir()) == before, "the live state_dir is untouched"
    # Asked to publish: it does, under its own client id (the daemon's session is not kicked).
    proc = _cli("replay", "--config", str(cfg), "--state-dir", str(tmp_path / "r"), "--publish")
    assert proc.returncode == 0, proc.stderr
    sub.wait_for(lambda m: sum(t.endswith("/event") for t, _, _ in m) >= 2)
    assert sorted(p.name for p in live.iterdir()) == before
    sub.close()
    lock.close()


def test_replay_of_a_file_with_a_non_ascii_name(
    tmp_path: Path, demo_clips: dict[str, Path]
) -> None:
    video = tmp_path / "chute_ü_é.mp4"
    video.write_bytes(demo_clips["fall_demo"].read_bytes())
    proc = _cli("replay", "--model", str(SHIPPED_MODEL), "--video", str(video),
                "--state-dir", str(tmp_path / "r"))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    events = [json.loads(x) for x in proc.stdout.splitlines()]
    assert events and events[0]["camera"] == "chute"  # "chute_ü_é": ASCII, trailing _ trimmed


def test_run_batches_two_cameras_and_stops_on_sigterm(
    tiny_onnx: Path, demo_clips: dict[str, Path], tmp_path: Path
) -> None:
    path = tmp_path / "c.yaml"
    cams = "\n".join(f"  - {{name: {n}, source: {p}, loop: true}}" for n, p in demo_clips.items())
    path.write_text(
        f"device_id: t\nmodel: {{path: {tiny_onnx}, providers: [cpu]}}\ncameras:\n{cams}\n"
        f"state_dir: {tmp_path / 'state'}\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "edge_hf.cli", "run", "--config", str(path), "--statuses"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    # Stop once both cameras said they are online (a fixed sleep fails on a loaded machine).
    assert proc.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline and sum('"online"' in x for x in seen) < 2:
        seen.append(proc.stdout.readline())
    time.sleep(1)  # lets it classify a few batches before the TERM; decides nothing
    proc.terminate()
    out, err = proc.communicate(timeout=30)
    out = "".join(seen) + out
    assert proc.returncode == 0, err
    statuses = [json.loads(x) for x in out.splitlines() if '"status"' in x]
    assert {(s["camera"], s["status"]) for s in statuses} >= {
        ("fall_demo", "online"), ("lie_down_demo", "online"),
        ("fall_demo", "offline"), ("lie_down_demo", "offline"),
    }  # fmt: skip
    assert "Traceback" not in err and "signal 15: stopping" in err


def test_a_second_daemon_on_the_same_state_dir_is_refused(tiny_onnx: Path, tmp_path: Path) -> None:
    config = _vtest_config(tmp_path, tiny_onnx, "loop: true", "state")
    cmd = [sys.executable, "-m", "edge_hf.cli", "run", "--config", str(config)]
    first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        lock = tmp_path / "state" / "edge-hf.lock"
        while time.monotonic() < deadline and not (lock.exists() and lock.read_text().strip()):
            time.sleep(0.2)
        second = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=60)
        lines = second.stderr.strip().splitlines()
        assert second.returncode == 2 and len(lines) == 1, second.stderr
        assert f"in use by another edge-hf (pid {first.pid})" in lines[0]
    finally:
        first.terminate()
        first.communicate(timeout=30)
    assert first.returncode == 0
    again = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Not a fixed sleep: wait until it holds the lock (its pid written there) or has exited. A
    # start refused as "in use" exits before writing its pid, so this ends either way.
    wait_or_fail(
        lambda: (
            again.poll() is not None
            or (lock.exists() and lock.read_text().strip() == str(again.pid))
        ),
        60,
        "the restarted daemon to take the lock or exit",
    )
    again.terminate()
    _, err = again.communicate(timeout=30)
    assert "in use" not in err, "the lock goes with the process"


@needs_shipped
def test_replay_can_hold_the_last_frame_of_a_clip_cut_short(
    demo_clips: dict[str, Path], tmp_path: Path
) -> None:
    cfg = _config(SHIPPED_MODEL, tmp_path, {"fall": demo_clips["fall_demo"]})
    plain = build_pipeline(cfg, RecordingSink(), score_history=None, live=False)
    replay_files(plain)
    held = build_pipeline(cfg, RecordingSink(), score_history=None, live=False)
    replay_files(held, hold_end_s=2.0)
    n = len(plain.cameras[0].scores)
    assert len(held.cameras[0].scores) == n + 20, "2 s more at 100 ms"
    assert list(held.cameras[0].scores)[:n] == list(plain.cameras[0].scores)
    last = list(held.cameras[0].scores)[-5:]
    assert max(last) - min(last) < 1e-6, "a still frame scores the same every window"


def test_the_batch_wait_ends_when_every_due_camera_has_written(
    tiny_onnx: Path, tmp_path: Path
) -> None:
    """No fixed coalescing delay: the loop waits only for online cameras due at the newest tick."""
    from types import SimpleNamespace

    cfg = _config(tiny_onnx, tmp_path, {"a": tmp_path / "a.mp4", "b": tmp_path / "b.mp4"})
    pipeline = build_pipeline(cfg, RecordingSink(), score_history=None, live=False)
    a, b = pipeline.cameras
    for cam in (a, b):
        cam.thread = SimpleNamespace(stats=SimpleNamespace(state="online"))  # type: ignore[assignment]
    frame = np.zeros((*pipeline.size, 3), np.uint8)
    a.ring.write(frame, 10.0)
    b.ring.write(frame, 10.0)
    assert pipeline.wait_for_batch(5.0) < 1.0, "both wrote tick 10.0: no wait"
    a.ring.write(frame, 10.1)  # b is due at 10.1 too and writes 50 ms later
    threading.Timer(0.05, b.ring.write, (frame, 10.1)).start()
    waited = pipeline.wait_for_batch(5.0)
    assert 0.04 <= waited < 1.0, waited
    a.ring.write(frame, 10.2)
    b.thread.stats.state = "stalled"  # never waited for
    assert pipeline.wait_for_batch(5.0) < 1.0
    b.thread.stats.state = "online"
    assert pipeline.wait_for_batch(0.2) >= 0.2, "an online camera that is late: waited, capped"


@needs_shipped
def test_the_cpu_daemon_never_imports_torch(demo_clips: dict[str, Path], tmp_path: Path) -> None:
    """`edge-hf run` on the CPU provider classifies windows with NumPy and ONNX Runtime only:
    torch (hundreds of MB resident) is never imported. The fall still raises its event."""
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "device_id": "test",
                "model": {"path": str(SHIPPED_MODEL), "providers": ["cpu"],
                          "threshold": DEMO_THRESHOLD},
                "cameras": [{"name": "fall", "source": str(demo_clips["fall_demo"])}],
                "state_dir": str(tmp_path / "state"),
            }
        )
    )  # fmt: skip
    code = (
        "import sys; from edge_hf.cli import main; rc = main(['run', '--config', sys.argv[1]]); "
        "print('TORCH', sorted(m for m in sys.modules if m.split('.')[0] == 'torch')[:3]); "
        "sys.exit(rc)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, str(cfg)], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert "TORCH []" in r.stdout, r.stdout[-500:]
    events = [json.loads(x) for x in r.stdout.splitlines() if x.startswith("{")]
    assert [e["type"] for e in events if e.get("camera") == "fall"][:1] == ["start"]


def test_rtsp_decoding_falls_back_to_software_when_the_hardware_way_does_not_open() -> None:
    """Where the hardware pipeline cannot open (no nvv4l2decoder here), the camera opens through
    the next way in the list; a camera that insists on hardware is refused at check."""
    video = moving_clip()
    assert isinstance(make_source("rtsp://cam/stream", decoder="software"), OpenCVSource)
    if not hardware_decoder():
        assert isinstance(make_source("rtsp://cam/stream"), OpenCVSource), "auto: FFmpeg here"
    hw = OpenCVSource(
        hardware_rtsp_pipeline("rtsp://127.0.0.1:9/none"), cv2.CAP_GSTREAMER,
        description="rtsp://127.0.0.1:9/none (hardware decoder)",
    )  # fmt: skip
    src = FirstThatOpens([hw, OpenCVSource(str(video), cv2.CAP_FFMPEG, live=False)])
    src.open()
    try:
        assert src.grab() is not None and src.retrieve() is not None
        assert src.description == str(video)
    finally:
        src.release()
    cfg = Config.model_validate(
        {"device_id": "t", "model": {"path": str(SHIPPED_MODEL)},
         "cameras": [{"name": "door", "source": "rtsp://cam/stream", "decoder": "hardware"}]}
    )  # fmt: skip
    if not hardware_decoder():
        with pytest.raises(UserError, match=r"cameras\[0\].decoder: hardware needs OpenCV"):
            check_against_model(cfg, read_contract(SHIPPED_MODEL), "c.yaml")


def test_the_ring_hands_the_centre_frames_original_with_the_window_when_it_keeps_them() -> None:
    ring = FrameRing(8, (4, 4, 3), evidence_slots=5)
    plain = FrameRing(8, (4, 4, 3))
    for i in range(10):
        small, full = np.full((4, 4, 3), i, np.uint8), np.full((40, 40, 3), i, np.uint8)
        ring.write(small, i * 0.1, None, full)
        plain.write(small, i * 0.1, None, full)
    w = ring.window(3)
    assert w is not None and w.evidence is not None
    assert int(w.frames[1][0, 0, 0]) == int(w.evidence[0, 0, 0]) == 8, "the centre sample's own"
    assert w.evidence.shape == (40, 40, 3)
    pw = plain.window(3)
    assert pw is not None and pw.evidence is None, "snapshots off: nothing kept"


def _as_volumes_2(model: Path, out: Path) -> Path:
    """`model` as a hyper-volume model (volumes 2, input 2 x 3T channels) that answers what
    `model` answers to the newer of its two hyperframes: a real ONNX graph whose output is known."""
    import onnx
    from onnx import helper, numpy_helper

    proto = onnx.load(str(model))
    g = proto.graph
    t3 = g.input[0].type.tensor_type.shape.dim[1].dim_value  # 3T channels
    for node in g.node:
        node.input[:] = ["newest" if i == "hyperframe" else i for i in node.input]
    g.initializer.extend(
        numpy_helper.from_array(np.array([v], np.int64), name)
        for name, v in (("v_start", t3), ("v_end", 2 * t3), ("v_axis", 1))
    )
    g.node.insert(0, helper.make_node("Slice", ["hyperframe", "v_start", "v_end", "v_axis"],
                                      ["newest"]))  # fmt: skip
    g.input[0].type.tensor_type.shape.dim[1].dim_value = 2 * t3
    for entry in proto.metadata_props:
        if entry.key == "edge_hf.volumes":
            entry.value = "2"
    onnx.save(proto, str(out))
    return out


@needs_shipped
def test_a_hyper_volume_model_runs_in_the_daemon_and_raises_the_demo_fall(
    demo_clips: dict[str, Path], tmp_path: Path
) -> None:
    volumes = _as_volumes_2(SHIPPED_MODEL, tmp_path / "v2.onnx")
    assert read_contract(volumes).volumes == 2
    plain, vol = (
        _config(m, tmp_path, {"fall": demo_clips["fall_demo"]}) for m in (SHIPPED_MODEL, volumes)
    )
    check_against_model(vol, read_contract(volumes))  # no longer refused
    runs = []
    for cfg in (plain, vol):
        sink = RecordingSink()
        pipeline = build_pipeline(cfg, sink, score_history=None, live=False)
        assert pipeline.samples_per_window == (6 if cfg is vol else 3)
        replay_files(pipeline)
        runs.append(([e.type for e in sink.events], list(pipeline.cameras[0].scores)))
    assert runs[1][0] == ["start", "end"] == runs[0][0]
    # The newer hyperframe of each 6-sample window is the plain model's 3-sample window.
    np.testing.assert_allclose(runs[1][1], runs[0][1], atol=1e-5)
