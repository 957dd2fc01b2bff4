"""The benchmarks measure what they claim: same outputs, consistent ratios, real runs. No timing
assertions here: speed targets live in `make bench`."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from edge_hf.bench.live import run_cameras, soak
from edge_hf.bench.prep import OurWindow, count_flops, inference_rows, naive_window
from edge_hf.bench.runner import POSE_SEQ, paste_into_readme, retimed
from edge_hf.core.errors import UserError
from edge_hf.core.hyperframe import stack_frames
from edge_hf.core.runtime import read_contract
from edge_hf.core.video import to_model_rgb
from edge_hf.training.synth import write_demo_clips
from tests.conftest import SHARED_DATA, SHIPPED_MODEL


def _frames(n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(3)
    return [rng.integers(0, 256, (120, 160, 3), np.uint8) for _ in range(n)]


def test_naive_and_our_window_are_the_same_tensor() -> None:
    """The comparison is void unless both paths compute the window the daemon classifies."""
    frames = _frames(5)
    size = (48, 64)
    expected = stack_frames([to_model_rgb(f, size) for f in frames])
    assert torch.allclose(naive_window(frames, size)[0], expected, atol=1e-5)
    ours = OurWindow(5, size)
    for f in frames:
        got = ours(f)
    assert torch.allclose(got[0], expected, atol=1e-6)
    # ...and the naive path really is time-ordered per block, not a different layout
    assert not torch.allclose(naive_window(frames[::-1], size)[0], expected, atol=1e-3)


def test_flop_count_matches_the_formula() -> None:
    model = torch.nn.Sequential(
        torch.nn.Conv2d(9, 16, 3, stride=2, padding=1),
        torch.nn.Conv2d(16, 16, 3, padding=1, groups=16),
        torch.nn.AdaptiveAvgPool2d(1),
        torch.nn.Flatten(),
        torch.nn.Linear(16, 2),
    )
    flops = count_flops(model, torch.zeros(4, 9, 32, 32))
    conv1 = 2 * (16 * 16 * 16) * (9 * 3 * 3)
    dw = 2 * (16 * 16 * 16) * (1 * 3 * 3)
    assert flops == conv1 + dw + 2 * 2 * 16


def test_inference_of_an_ensemble_is_measured_with_all_its_members() -> None:
    single = replace(read_contract(SHIPPED_MODEL), input_size=(64, 64))
    one, _ = inference_rows(single, (3,), (1,), repeats=1)
    three, _ = inference_rows(replace(single, members=3), (3,), (1,), repeats=1)
    assert three[0]["backbone"] == f"{single.backbone} x3"
    # The members' convolutions and heads, three times (the mean itself is a few adds).
    assert three[0]["gflops_per_window"] == pytest.approx(3 * one[0]["gflops_per_window"], rel=0.01)


def test_bench_cli_writes_json_and_table(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    cmd = [sys.executable, "-c", "import sys; from edge_hf.cli import main; sys.exit(main())"]
    args = ["bench", "--quick", "--sections", "prep", "inference", "--repeats", "2"]
    r = subprocess.run(
        [*cmd, *args, "--out", str(out), "--model", str(SHIPPED_MODEL)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    res = json.loads((out / "bench.json").read_text())
    assert {(row["window"], row["size"]) for row in res["prep"]} == {(1, 112), (3, 112)}
    for row in res["prep"]:
        ratio = row["ours"]["median_ms"] / row["naive"]["median_ms"]
        assert row["ours_over_naive"] == pytest.approx(ratio, rel=0.01, abs=0.002)
        assert row["floor_ms"] > 0 and row["bytes"] > 640 * 480 * 3
    inference = res["inference"]
    assert {row["window"] for row in inference} == {1, 3}
    # T=3 only widens the first conv: a few more FLOPs than T=1, not three times as many
    flops = {row["window"]: row["gflops_per_window"] for row in inference}
    assert flops[1] < flops[3] < 1.5 * flops[1]
    table = (out / "bench.md").read_text()
    assert "| cpu | 3 | 112² |" in table and "ORT / eager" in table


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--model", "nope.onnx"], "--model nope.onnx: no such file"),
        (["--sections", "speed"], "--sections ['speed']"),
        (["--seconds", "0"], "--seconds 0: must be at least 1"),
    ],
)
def test_bench_cli_user_errors_are_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    cmd = [sys.executable, "-c", "import sys; from edge_hf.cli import main; sys.exit(main())"]
    r = subprocess.run(
        [*cmd, "bench", "--out", str(tmp_path), *args], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2
    assert needle in r.stderr and len(r.stderr.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def fall_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_demo_clips(tmp_path_factory.mktemp("clips"))[0]


def test_capacity_run_counts_windows_of_every_camera(fall_clip: Path, tmp_path: Path) -> None:
    r = run_cameras(SHIPPED_MODEL, fall_clip, 2, 2.0, "per_camera", tmp_path)
    assert r["cameras"] == 2 and r["mode"] == "per_camera"
    assert r["expected_windows"] == pytest.approx(40, abs=4)
    assert 0 < r["windows"] <= r["expected_windows"] + 2
    assert r["sustained"] == (r["skipped"] == 0 and r["dropped"] == 0 and r["windows"] >= 36)
    with pytest.raises(ValueError, match="batched or per_camera"):
        run_cameras(SHIPPED_MODEL, fall_clip, 1, 1.0, "threads", tmp_path)


def test_soak_measures_alerts_at_a_subscriber_and_the_daemon_rss(
    fall_clip: Path, tmp_path: Path
) -> None:
    """A short daemon run against a real broker: the fall at 3 s arrives as MQTT events."""
    r = soak(SHIPPED_MODEL, fall_clip, 1, 12.0, tmp_path, progress=lambda _m: None)
    assert r["events"] >= 1
    assert 0 < r["latency_p50_ms"] <= r["latency_max_ms"] < 5000
    assert r["rss_end_mb"] > 50
    assert "windows" in r["daemon_summary"]


def test_capacity_clip_is_retimed_to_a_camera_rate(fall_clip: Path, tmp_path: Path) -> None:
    """Same frames, declared at 15 fps: a 10 fps camera would beat against the 10 Hz ticks."""
    import cv2

    from edge_hf.bench.runner import retimed

    out = retimed(fall_clip, tmp_path / "c.mp4", 10.0)
    a, b = cv2.VideoCapture(str(fall_clip)), cv2.VideoCapture(str(out))
    assert b.get(cv2.CAP_PROP_FPS) == 10.0 != a.get(cv2.CAP_PROP_FPS)
    assert b.get(cv2.CAP_PROP_FRAME_COUNT) == a.get(cv2.CAP_PROP_FRAME_COUNT)


def test_capture_section_compares_before_ours_and_floor(tmp_path: Path) -> None:
    """The capture section on a generated clip: before / ours / floor per sampled frame, the
    decode split, the share of frames converted, the score effect on the given real clips."""
    video = SHARED_DATA / "capture" / "vtest.avi"
    if not video.exists():
        pytest.skip("../shared/data not present")
    out = tmp_path / "bench"
    clips = tmp_path / "real"
    clips.mkdir()
    cmd = [sys.executable, "-c", "import sys; from edge_hf.cli import main; sys.exit(main())"]
    retimed(video, clips / "a.mp4", fps=25.0, size=(320, 240))
    r = subprocess.run(
        [*cmd, "bench", "--sections", "capture", "--repeats", "2", "--out", str(out),
         "--model", str(SHIPPED_MODEL), "--score-model", str(SHIPPED_MODEL),
         "--score-data", str(clips)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    c = json.loads((out / "bench.json").read_text())["capture"]
    assert c["frame"] == "640x480" and c["size"] == "112x112"
    # (timings are the benchmark's business: here only that each was measured)
    assert min(c["resize_floor_ms"], c["resize_ours"]["median_ms"], c["decode_grab_ms"]) > 0
    assert c["cpu_ms_per_camera_s_ours"] > 0 and c["cpu_ms_per_camera_s_before"] > 0
    assert c["converted_share"]["30"] < c["converted_share"]["15"] <= 1.0
    s = c["scores"]
    assert s["videos"] == 1 and s["windows"] > 100
    assert 0 <= s["mean_abs_diff"] <= s["p99_abs_diff"] <= s["max_abs_diff"] < 1
    assert "## Capture, per camera frame" in (out / "bench.md").read_text()


def test_bench_tables_are_pasted_between_the_readme_markers(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- bench:start (note) -->\nold table\n<!-- bench:end -->\noutro\n")
    paste_into_readme(readme, "# edge_hf benchmarks\n\nmachine\n\n## Capture\n\n| a |\n")
    text = readme.read_text()
    assert text.startswith("intro\n<!-- bench:start (note) -->\nmachine\n")
    assert "### Capture" in text and "old table" not in text and "# edge_hf benchmarks" not in text
    assert text.endswith("| a |\n<!-- bench:end -->\noutro\n")
    (tmp_path / "plain.md").write_text("no markers\n")
    with pytest.raises(UserError, match="no '<!-- bench:start"):
        paste_into_readme(tmp_path / "plain.md", "# t\n\nx\n")


def test_make_bench_pastes_into_the_benchmark_readme_which_has_the_markers(
    tmp_path: Path,
) -> None:
    """`make bench` runs 20 minutes before it pastes: the file it names must take the tables
    (pasted here into a copy), and what is around the markers must stay."""
    import re

    root = Path(__file__).resolve().parents[1]
    (target,) = re.findall(r"--readme (\S+)", (root / "Makefile").read_text())
    assert target == "benchmarks/README.md"
    copy = tmp_path / "README.md"
    copy.write_text((root / target).read_text())
    paste_into_readme(copy, "# edge_hf benchmarks\n\nmachine\n\n## Capture\n\n| a |\n")
    text = copy.read_text()
    assert "machine\n\n### Capture\n\n| a |\n<!-- bench:end -->" in text
    assert "## Real footage" in text and "The pipeline people deploy" in text


def test_a_capacity_run_with_the_person_stage_counts_pose_frames(
    fall_clip: Path, tmp_path: Path
) -> None:
    pose = (
        Path(__file__).resolve().parents[1] / "models" / "person-movenet-multipose-lightning.onnx"
    )
    for threaded in (True, False):  # the stage's own thread (the daemon's way), the loop's
        r = run_cameras(SHIPPED_MODEL, fall_clip, 1, 2.0, "batched", tmp_path, pose, threaded)
        assert r["pose_ms_per_frame"] is not None and r["pose_ms_per_frame"] > 0
        assert r["latency_p99_ms"] is not None and r["person_threaded"] is threaded
        assert r["batch_p99_ms"] is not None and r["batch_p99_ms"] > 0
        # 5 pose frames a camera-second, counted over the timed run only
        assert abs(r["expected_pose_frames"] - 5 * r["seconds"]) <= 1
        assert (
            0.5 * r["expected_pose_frames"]
            <= r["pose_frames"]
            <= 1.2 * r["expected_pose_frames"] + 1
        )
    plain = run_cameras(SHIPPED_MODEL, fall_clip, 1, 2.0, "batched", tmp_path)
    assert plain["pose_ms_per_frame"] is None and plain["pose_frames"] is None


def test_the_graph_section_counts_nodes_of_one_network_and_the_ensemble(tmp_path: Path) -> None:
    from edge_hf.bench import report
    from edge_hf.bench.graph import GRAPHS, one_vs_three

    r = one_vs_three(tmp_path, repeats=1, size=64)
    n = r["nodes"]
    assert n["one, static"]["Shape"] == 0 and n["one, run-time padding"]["Shape"] > 0
    assert n["three, static"]["Conv"] == 3 * n["one, static"]["Conv"]
    assert n["three, static"]["total"] < n["three, run-time padding"]["total"]
    assert set(r["ms_per_window"]) == {
        "batch 1, 1 thread", "batch 8, 1 thread", "batch 1, all cores", "batch 8, all cores",
    }  # fmt: skip
    assert all(set(t) == set(GRAPHS) and min(t.values()) > 0 for t in r["ms_per_window"].values())
    md = "\n".join(report.graph({"graph": r}).lines())
    assert all(f"| {g} | {n[g]['total']} |" in md for g in GRAPHS)


def test_a_capacity_run_can_carry_the_pose_sequence_model(fall_clip: Path, tmp_path: Path) -> None:
    from edge_hf.bench.live import _config

    root = Path(__file__).resolve().parents[1]
    pose, seq = root / "models" / "person-movenet-multipose-lightning.onnx", root / POSE_SEQ
    cfg = _config(SHIPPED_MODEL, fall_clip, ["a"], tmp_path, pose, sequence=seq)
    assert cfg.person.sequence == seq and cfg.person.sequence_mode == "join"
    from edge_hf.daemon.app import build_pipeline
    from edge_hf.daemon.sinks import RecordingSink

    stage = build_pipeline(cfg, RecordingSink(), score_history=None, live=False).person
    assert stage is not None and stage.sequence is not None  # the model runs in the stage
    r = run_cameras(SHIPPED_MODEL, fall_clip, 1, 2.0, "batched", tmp_path, pose, True, False, seq)
    assert r["pose_frames"] is not None and r["pose_frames"] > 0
