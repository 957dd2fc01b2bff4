"""bench.md's tables (`edge_hf.bench.report`) from small hand-made results, and from the stored one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from edge_hf.bench import report

ROOT = Path(__file__).resolve().parents[1]
MACHINE = {"cpu": "Test CPU", "cores": 2, "cuda": None, "python": "3.11", "torch": "2.0",
           "onnxruntime": "1.0", "date": "2026-12-07 10:00 UTC"}  # fmt: skip


def _t(median: float) -> dict[str, float]:
    return {"median_ms": median, "p25_ms": median - 0.1, "p75_ms": median + 0.1}


def _res(**sections: Any) -> dict[str, Any]:
    return {"machine": MACHINE, "model": "models/m.onnx", "total_s": 12.3,
            "copy_bandwidth_gbs": 10.0, "camera_video": "a generated clip", **sections}  # fmt: skip


def _table(md: str, title: str) -> list[str]:
    """The table lines of the section `title` in `md`."""
    section = md.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    return [ln for ln in section.splitlines() if ln.startswith("|")]


def test_a_table_is_a_header_its_separator_and_a_line_a_row() -> None:
    assert report.table(["a", "b"], [[1, "x"], [2.5, None]]) == [
        "| a | b |",
        "| --- | --- |",
        "| 1 | x |",
        "| 2.5 | None |",
    ]
    assert report.table(["only"], []) == ["| only |", "| --- |"]


def test_a_section_is_title_intro_table_and_the_notes_after_it() -> None:
    s = report.Section("T", "Intro.", ["h"], [["v"]], ["Note one.", "Note two."])
    assert s.lines() == [
        "## T", "", "Intro.", "", "| h |", "| --- |", "| v |", "", "Note one.", "", "Note two.", "",
    ]  # fmt: skip


def test_the_prep_section() -> None:
    row = {"device": "cpu", "window": 3, "size": 112, "ours": _t(0.5), "naive": _t(1.0),
           "ours_over_naive": 0.5, "floor_ms": 0.05, "ours_over_floor": 10.0, "resize": _t(0.2),
           "stack": _t(0.1), "stack_over_floor": 3.33, "ours_default_threads": _t(0.4)}  # fmt: skip
    lines = _table(report.markdown(_res(prep=[row])), "Window preparation, per window")
    assert lines[0].startswith("| device | T | size | ours ms | naive ms |")
    assert lines[0].endswith("| ours on torch's default 2 threads ms |")
    assert lines[1] == "| " + " | ".join(["---"] * 12) + " |"
    assert lines[2:] == [
        "| cpu | 3 | 112² | 0.500 (0.400-0.600) | 1.000 (0.900-1.100) | 0.50 | 0.050 | 10 "
        "| 0.200 (0.100-0.300) | 0.100 (0.000-0.200) | 3.3 | 0.400 (0.300-0.500) |"
    ]


def test_the_inference_section() -> None:
    row = {"backbone": "lite0", "window": 3, "input": "9x160x160", "threads": 1, "batch": 8,
           "gflops_per_window": 1.23456, "ort": _t(5.0), "eager": _t(10.0),
           "ort_over_eager": 0.5, "floor_ms": 1.0, "ort_over_floor": 5.0}  # fmt: skip
    md = report.markdown(_res(inference=[row], matmul={"matmul_gflops_1_threads": 99.2}))
    assert "matrix-multiply rate (1 thread(s) 99.2 GFLOP/s)." in md
    assert _table(md, "Inference, per window") == [
        "| backbone | T | input | threads | batch | GFLOP | ORT ms | eager ms | ORT / eager "
        "| floor ms | ORT / floor |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        "| lite0 | 3 | 9x160x160 | 1 | 8 | 1.235 | 5.000 (4.900-5.100) | 10.000 (9.900-10.100) "
        "| 0.50 | 1.000 | 5 |",
    ]


def test_the_capture_section_with_and_without_the_score_effect() -> None:
    c = {"frame": "640x480", "size": "112x112", "camera_fps": 15.0, "resize_before": _t(2.0),
         "resize_ours": _t(1.0), "resize_floor_ms": 0.01, "decode_read_ms": 3.0,
         "decode_grab_ms": 2.5, "converted_share": {"15": 0.667},
         "cpu_ms_per_camera_s_before": 75.0, "cpu_ms_per_camera_s_ours": 50.0}  # fmt: skip
    md = report.markdown(_res(capture=c))
    assert _table(md, "Capture, per camera frame") == [
        "| per sampled frame: before ms | ours ms | ours / before | floor ms | decode: read ms "
        "| grab ms | frames converted | CPU ms per camera-second at 15 fps: before | ours |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        "| 2.000 (1.900-2.100) | 1.000 (0.900-1.100) | 0.50 | 0.010 | 3.000 | 2.500 | 15 fps 67% "
        "| 75.0 | 50.0 |",
    ]
    assert "What the resize does to scores" not in md
    scores = {"model": "m.onnx", "windows": 100, "videos": 4, "mean_abs_diff": 0.01,
              "p99_abs_diff": 0.05, "max_abs_diff": 0.1, "windows_across_threshold": 2,
              "threshold": 0.5}  # fmt: skip
    md = report.markdown(_res(capture={**c, "scores": scores}))
    assert "| 15 fps 67% | 75.0 | 50.0 |\n\nWhat the resize does to scores: `m.onnx` on 100" in md


def test_the_graph_section() -> None:
    from edge_hf.bench.graph import GRAPHS, OPS

    nodes = {g: {"total": 100 + i, **{op: i for op in OPS}} for i, g in enumerate(GRAPHS)}
    ms = {"batch 1, 1 thread": {g: 1.0 + i for i, g in enumerate(GRAPHS)}}
    md = report.markdown(_res(graph={"size": 64, "nodes": nodes, "ms_per_window": ms}))
    lines = _table(md, "One network vs the three-network ensemble; static vs run-time padding")
    assert lines[0] == "| graph | nodes | Shape | Ceil | Cast | Pad | Conv | batch 1, 1 thread |"
    assert lines[1] == "| --- | --- | --- | --- | --- | --- | --- | --- |"
    assert lines[2] == "| one, static | 100 | 0 | 0 | 0 | 0 | 0 | 1.00 |"
    assert len(lines) == 2 + len(GRAPHS)
    assert "(static graphs): batch 1, 1 thread: 0.33." in md
    assert "rerun alone" not in md


def test_the_int8_section() -> None:
    q = {"model": "m.onnx", "calibration": "data", "size_mb": {"fp32": 13.0, "int8": 3.6},
         "speed": {"batch 1": {"fp32_ms": 10.0, "int8_ms": 5.0, "speedup": 2.0}},
         "scores": {"windows": 100, "videos": 4, "mean_abs_diff": 0.01, "p99_abs_diff": 0.05,
                    "max_abs_diff": 0.1, "windows_across_threshold": 1, "threshold": 0.5}}  # fmt: skip
    md = report.markdown(_res(int8=q))
    assert _table(md, "int8") == [
        "| CPU time per batch, fp32 → int8 | size MB | fall probability vs fp32 on 100 windows of "
        "4 real clips: mean / p99 / max abs diff | windows across the threshold 0.5 |",
        "| --- | --- | --- | --- |",
        "| batch 1: 10.00 → 5.00 ms (2.00×) | 13.0 → 3.6 | 0.010 / 0.050 / 0.100 | 1 |",
    ]
    assert "`python -m experiments.int8_real`" in md


def test_the_capacity_section() -> None:
    runs = [
        {"cameras": 2, "windows": 200, "expected_windows": 200, "skipped": 0, "sustained": True,
         "cpu_cores": 1.2, "inference_busy": 0.3, "latency_p99_ms": 40.0, "batch_p99_ms": 20.0,
         "pose_frames": 100, "expected_pose_frames": 100},
        {"cameras": 4, "windows": 300, "expected_windows": 400, "skipped": 5, "sustained": False},
    ]  # fmt: skip
    c = {"mode": "batched", "max_cameras": 2, "first_failure": 4, "runs": runs}
    lines = _table(report.markdown(_res(capacity=[c])), "Capacity: cameras at 10 Hz")
    assert lines[0] == (
        "| pipeline | layout | cameras sustained | first level that failed | p99 latency at the "
        "sustained level, ms (one batch's p99) | runs in order (cameras: windows/expected, "
        "skipped, CPU cores, busy) |"
    )
    assert lines[1] == "| --- | --- | --- | --- | --- | --- |"
    assert lines[2:] == [
        "| demo | batched, one session | 2 | 4 | 40.0 (batch p99 20.0) "
        "| 2: 200/200, 0, 1.2, 0.3, pose 100/100; 4: 300/400, 5, -, - |"
    ]


def test_the_latency_section() -> None:
    r = {"duration_s": 600.0, "cameras": 2, "events": 40, "latency_p50_ms": 120.0,
         "latency_p99_ms": 300.0, "latency_max_ms": 350.0, "rss_start_mb": 400.0,
         "rss_end_mb": 410.0, "rss_max_mb": 415.0, "rss_slope_mb_h": 1.5}  # fmt: skip
    md = report.markdown(_res(latency=r))
    assert "`edge-hf run` for 600 s with 2 looping fall clips" in md
    assert _table(md, "Alert latency and memory") == [
        "| events | latency p50 ms | p99 ms | max ms | RSS after 30 s MB | RSS end MB "
        "| RSS max MB | RSS slope MB/h |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        "| 40 | 120.0 | 300.0 | 350.0 | 400.0 | 410.0 | 415.0 | 1.5 |",
    ]


def test_results_without_sections_are_the_title_machine_and_total() -> None:
    md = report.markdown(_res())
    assert md.startswith("# edge_hf benchmarks\n\nTest CPU, 2 cores, CUDA: none; ")
    assert "Model `m.onnx`." in md and "## " not in md
    assert md.endswith("\nTotal benchmark time: 12 s.\n")


def test_the_stored_results_render() -> None:
    from edge_hf.bench.runner import markdown  # the runner writes bench.md with it

    res = json.loads((ROOT / "benchmarks" / "results" / "bench.json").read_text())
    md = markdown(res)
    assert md.startswith("# edge_hf benchmarks\n")
    assert all(f"## {section(res).title}\n" in md for key, section in report.SECTIONS if key in res)
