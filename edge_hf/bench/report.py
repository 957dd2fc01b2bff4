"""bench.md from bench.json: one small function per section turns its part of the results into
a `Section` (title, intro, header, rows, notes after the table), and `table` draws the table."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from edge_hf.bench.graph import GRAPHS, OPS


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    """A markdown table: the header line, its `| --- |` line and one line a row."""
    return [
        "| " + " | ".join(header) + " |",
        "| " + " | ".join("---" for _ in header) + " |",
        *("| " + " | ".join(str(cell) for cell in row) + " |" for row in rows),
    ]


class Section(NamedTuple):
    """One `##` section of bench.md: its intro paragraph, its table and the paragraphs after it."""

    title: str
    intro: str
    header: Sequence[str]
    rows: list[Sequence[object]]
    after: Sequence[str] = ()

    def lines(self) -> list[str]:
        out = [f"## {self.title}", "", self.intro, "", *table(self.header, self.rows), ""]
        for paragraph in self.after:
            out += [paragraph, ""]
        return out


def _ms(t: dict[str, float]) -> str:
    return f"{t['median_ms']:.3f} ({t['p25_ms']:.3f}-{t['p75_ms']:.3f})"


def prep(res: dict[str, Any]) -> Section:
    return Section(
        "Window preparation, per window",
        "Ours: resize the new camera frame once into the ring, then stack the window with "
        "`HyperframeBuilder` (what the daemon does). Naive: resize/convert all T frames in "
        "NumPy, concatenate, normalise, `torch.from_numpy`. Floor: the bytes ours must move "
        f"at the measured copy bandwidth ({res['copy_bandwidth_gbs']} GB/s, read + write): "
        "read the 640x480 camera frame, write it resized, read T resized frames, write the "
        "float32 window; the stack's own floor counts the last two only.",
        ["device", "T", "size", "ours ms", "naive ms", "ours / naive", "floor ms",
         "ours / floor", "of ours: resize ms", "of ours: stack ms", "stack / its floor",
         f"ours on torch's default {res['machine']['cores']} threads ms"],
        [
            [r["device"], r["window"], f"{r['size']}²", _ms(r["ours"]), _ms(r["naive"]),
             f"{r['ours_over_naive']:.2f}", f"{r['floor_ms']:.3f}", f"{r['ours_over_floor']:.0f}",
             _ms(r["resize"]), _ms(r["stack"]), f"{r['stack_over_floor']:.1f}",
             _ms(r["ours_default_threads"])]
            for r in res["prep"]
        ],
    )  # fmt: skip


def inference(res: dict[str, Any]) -> Section:
    rates = ", ".join(f"{k.split('_')[2]} thread(s) {v} GFLOP/s" for k, v in res["matmul"].items())
    return Section(
        "Inference, per window",
        "ONNX Runtime (CPU provider) vs PyTorch eager on the same network; FLOPs = 2 x "
        "multiply-adds of every conv and linear layer; floor = FLOPs at the measured float32 "
        f"matrix-multiply rate ({rates}).",
        ["backbone", "T", "input", "threads", "batch", "GFLOP", "ORT ms", "eager ms",
         "ORT / eager", "floor ms", "ORT / floor"],
        [
            [r["backbone"], r["window"], r["input"], r["threads"], r["batch"],
             f"{r['gflops_per_window']:.3f}", _ms(r["ort"]), _ms(r["eager"]),
             f"{r['ort_over_eager']:.2f}", f"{r['floor_ms']:.3f}", f"{r['ort_over_floor']:.0f}"]
            for r in res["inference"]
        ],
    )  # fmt: skip


def capture(res: dict[str, Any]) -> Section:
    c = res["capture"]
    share = ", ".join(f"{k} fps {v:.0%}" for k, v in c["converted_share"].items())
    after = []
    if "scores" in c:
        s = c["scores"]
        after.append(
            f"What the resize does to scores: `{s['model']}` on {s['windows']} windows of "
            f"{s['videos']} real clips, frames resized both ways: fall probability differs "
            f"by {s['mean_abs_diff']:.3f} on average (p99 {s['p99_abs_diff']:.3f}, max "
            f"{s['max_abs_diff']:.3f}); {s['windows_across_threshold']} windows land on the "
            f"other side of its threshold {s['threshold']:g}. A model records the rule it "
            "was trained with and the daemon resizes by it, so this is the cost of running a "
            "model with the rule it was not trained with, not a loss of a model trained "
            "with the rule it runs."
        )
    return Section(
        "Capture, per camera frame",
        f"A {c['frame']} camera frame to the {c['size']} model input, one thread. Before: "
        "every frame read (decoded and converted to BGR), INTER_AREA. Ours: every frame "
        "grabbed (decoded), converted only when it may be sampled, resized by the "
        "`linear2x-area` rule. Floor: read the camera frame and write the small one at the "
        f"copy bandwidth ({res['copy_bandwidth_gbs']} GB/s).",
        ["per sampled frame: before ms", "ours ms", "ours / before", "floor ms",
         "decode: read ms", "grab ms", "frames converted",
         f"CPU ms per camera-second at {c['camera_fps']:g} fps: before", "ours"],
        [[_ms(c["resize_before"]), _ms(c["resize_ours"]),
          f"{c['resize_ours']['median_ms'] / c['resize_before']['median_ms']:.2f}",
          f"{c['resize_floor_ms']:.3f}", f"{c['decode_read_ms']:.3f}", f"{c['decode_grab_ms']:.3f}",
          share, c["cpu_ms_per_camera_s_before"], c["cpu_ms_per_camera_s_ours"]]],
        after,
    )  # fmt: skip


def graph(res: dict[str, Any]) -> Section:
    """One network vs the ensemble (`graph.one_vs_three`): node counts and ms per window."""
    r = res["graph"]
    ratios = ", ".join(
        f"{key}: {t['one, static'] / t['three, static']:.2f}"
        for key, t in r["ms_per_window"].items()
    )
    return Section(
        "One network vs the three-network ensemble; static vs run-time padding",
        f"EfficientNet-Lite0 T=3 at {r['size']}x{r['size']} (the shipped real model's shape; "
        "random weights), exported as `edge-hf export` does: one checkpoint, or three averaged "
        "into one model (the ensemble shipped until 2026-12-06). ONNX Runtime on the CPU, the "
        "four graphs interleaved in each repeat; median milliseconds per window."
        + (f" (This section rerun alone at {r['rerun']}.)" if r.get("rerun") else ""),
        ["graph", "nodes", *OPS, *r["ms_per_window"]],
        [
            [name, r["nodes"][name]["total"], *(r["nodes"][name][op] for op in OPS),
             *(f"{t[name]:.2f}" for t in r["ms_per_window"].values())]
            for name in GRAPHS
        ],
        [f"One network's time as a share of the ensemble's (static graphs): {ratios}."],
    )  # fmt: skip


def int8(res: dict[str, Any]) -> Section:
    q = res["int8"]
    s = q["scores"]
    speed = "; ".join(
        f"{k}: {v['fp32_ms']:.2f} → {v['int8_ms']:.2f} ms ({v['speedup']:.2f}×)"
        for k, v in q["speed"].items()
    )
    return Section(
        "int8",
        f"`{q['model']}` quantised as `edge-hf export --int8 --calibration {q['calibration']}` "
        "does (QDQ, per-channel int8 weights, MinMax on 200 windows), then side by side "
        "with the fp32 model on ONNX Runtime's CPU provider, one thread, interleaved repeats.",
        ["CPU time per batch, fp32 → int8", "size MB",
         f"fall probability vs fp32 on {s['windows']} windows of {s['videos']} real clips: "
         "mean / p99 / max abs diff", f"windows across the threshold {s['threshold']:g}"],
        [[speed, f"{q['size_mb']['fp32']} → {q['size_mb']['int8']}",
          f"{s['mean_abs_diff']:.3f} / {s['p99_abs_diff']:.3f} / {s['max_abs_diff']:.3f}",
          s["windows_across_threshold"]]],
        ["Event-level accuracy on held-out folds needs the benchmark's fold models: "
         "`python -m experiments.int8_real` (benchmarks/README.md, int8)."],
    )  # fmt: skip


def _capacity_row(c: dict[str, Any]) -> list[object]:
    runs = "; ".join(
        f"{r['cameras']}: {r['windows']}/{r['expected_windows']}, {r['skipped']}, "
        f"{r.get('cpu_cores', '-')}, {r.get('inference_busy', '-')}"
        + (f", pose {r['pose_frames']}/{r['expected_pose_frames']}"
           if r.get("pose_frames") is not None else "")
        + (f", squares {r['looks_per_pose_frame']:g}" if r.get("looks_per_pose_frame") else "")
        for r in c["runs"]
    )  # fmt: skip
    layout = "batched, one session" if c["mode"] == "batched" else "one session per camera"
    at = [r for r in c["runs"] if r["cameras"] == c["max_cameras"] and r["sustained"]]
    p99 = at[-1].get("latency_p99_ms", "-") if at else "-"
    if at and at[-1].get("batch_p99_ms") is not None:
        p99 = f"{p99} (batch p99 {at[-1]['batch_p99_ms']})"
    return [c.get("pipeline", "demo"), layout, c["max_cameras"], c["first_failure"], p99, runs]


def capacity(res: dict[str, Any]) -> Section:
    cores = res["machine"]["cores"]
    return Section(
        "Capacity: cameras at 10 Hz",
        f"File cameras in real time ({res['camera_video']}, looping), a window "
        "every 100 ms each. Sustained = no skipped window, no dropped frame, >= 90 % of the "
        "expected windows (with the person stage: also >= 90 % of its pose frames, 5 a "
        "camera-second; pose = done/expected; squares = the second look's pose-model runs per "
        "pose frame, which get only the stage's spare time). CPU = cores the process used "
        "during the run (of "
        f"{cores}): a level that fails near {cores} is bound by the CPU. Busy = "
        "share of the run the inference loop spent stacking and classifying (summed over "
        "the pipelines of the per-camera layout): near 1, the one inference thread of the "
        "batched layout is the bound.",
        ["pipeline", "layout", "cameras sustained", "first level that failed",
         "p99 latency at the sustained level, ms (one batch's p99)",
         "runs in order (cameras: windows/expected, skipped, CPU cores, busy)"],
        [_capacity_row(c) for c in res["capacity"]],
    )  # fmt: skip


def latency(res: dict[str, Any]) -> Section:
    r = res["latency"]
    return Section(
        "Alert latency and memory",
        f"`edge-hf run` for {r['duration_s']:.0f} s with {r['cameras']} looping fall clips, "
        "MQTT to a local Mosquitto; latency = subscriber receive time - capture time of the "
        "window's newest frame.",
        ["events", "latency p50 ms", "p99 ms", "max ms", "RSS after 30 s MB", "RSS end MB",
         "RSS max MB", "RSS slope MB/h"],
        [[r["events"], r["latency_p50_ms"], r["latency_p99_ms"], r["latency_max_ms"],
          r["rss_start_mb"], r["rss_end_mb"], r["rss_max_mb"], r["rss_slope_mb_h"]]],
    )  # fmt: skip


# The sections in the order bench.md shows them, each drawn when the results have its key.
SECTIONS: tuple[tuple[str, Callable[[dict[str, Any]], Section]], ...] = (
    ("prep", prep), ("inference", inference), ("capture", capture), ("graph", graph),
    ("int8", int8), ("capacity", capacity), ("latency", latency),
)  # fmt: skip


def markdown(res: dict[str, Any]) -> str:
    """The tables benchmarks/README.md shows: medians with the interquartile range, ratios side
    by side."""
    m = res["machine"]
    lines = [
        "# edge_hf benchmarks",
        "",
        f"{m['cpu']}, {m['cores']} cores, CUDA: {m['cuda'] or 'none'}; Python {m['python']}, "
        f"torch {m['torch']}, ONNX Runtime {m['onnxruntime']}; {m['date']}. "
        f"Model `{Path(res['model']).name}`. Times: median (interquartile range) of repeated runs.",
        "",
    ]
    for key, section in SECTIONS:
        if key in res:
            lines += section(res).lines()
    lines.append(f"Total benchmark time: {res['total_s']:.0f} s.")
    return "\n".join(lines) + "\n"
